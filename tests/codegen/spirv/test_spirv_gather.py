"""CPU-only: the shaders of every gather of tests/gather_cases.py pass spirv-val;
tests/drivers/vulkan/test_vulkan_gather.py runs them."""

from __future__ import annotations

import pytest
from gather_cases import CASES
from spirv_modules import spirv_binaries, validate, vulkan_vmfb

pytestmark = pytest.mark.vulkan


@pytest.mark.parametrize("name", sorted(CASES))
def test_gather_shaders_pass_spirv_val(name, tmp_path):
    for code, _ in spirv_binaries(vulkan_vmfb(CASES[name].program)):
        assert validate(code, tmp_path) == ""
