"""CPU-only: the shaders of the special-float-value and 16-bit float programs (tests/dtype_cases.py)
pass spirv-val; tests/drivers/vulkan/test_vulkan_dtypes.py runs them. bf16 has no Vulkan 1.2
type: it is stored as 16-bit integers and converted with integer ops."""

from __future__ import annotations

import pytest
from dtype_cases import PROGRAMS
from spirv_modules import spirv_binaries, validate, vulkan_vmfb

pytestmark = pytest.mark.vulkan


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_shaders_pass_spirv_val(name, tmp_path):
    for code, _ in spirv_binaries(vulkan_vmfb(PROGRAMS[name])):
        assert validate(code, tmp_path) == ""
