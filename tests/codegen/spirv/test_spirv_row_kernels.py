"""CPU-only: the vulkan-spirv target's row kernels (softmax, log_softmax, layernorm, rmsnorm as
one dispatch): the shaders of both templates (the workgroup tree for rows of 128 or more, one
invocation per row below) pass spirv-val; tests/drivers/vulkan/test_vulkan_row_kernels.py runs
them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from spirv_modules import spirv_binaries, validate, vulkan_vmfb

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "flow"))
import row_kernel_cases as C  # noqa: E402

pytestmark = pytest.mark.vulkan


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("kind", C.KINDS)
def test_row_kernels_pass_spirv_val(kind, dtype, tmp_path):
    for m, n in ((37, 45), (37, 129)):
        (code, executable), = spirv_binaries(vulkan_vmfb(C.mlir(kind, m, n, dtype)))
        assert len(executable.exports) == 1
        assert validate(code, tmp_path) == ""
