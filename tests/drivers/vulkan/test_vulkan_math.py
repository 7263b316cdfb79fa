"""Every math op on the vulkan-spirv target, measured as tests/e2e/test_math_ops.py measures
llvm-cpu: max ulp error against float64 and exact special values, on a device (lavapipe in CI;
tests/codegen/spirv/test_spirv_math.py validates the shaders). The shaders compute the math themselves (codegen/common/math_expansion), not with GLSL.std.450, whose
results on lavapipe were up to millions of ulp off. Subnormals count: compile for the device's
target (PYREE_VULKAN_TARGET, e.g. hopper-h100-linux on the H100), whose shaders then keep them;
the default target leaves a driver free to flush them, and NVIDIA's does."""

from __future__ import annotations

import sys
from pathlib import Path

import pyree.runtime as rt
import pytest
from codegen.spirv.spirv_modules import DEVICE_TARGET

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e"))
from test_math_ops import (  # noqa: E402
    BINARY,
    EXACT_OPS,
    GPU_ULP,
    UNARY,
    compiled,
    measure,
    over_bounds,
)

pytestmark = pytest.mark.vulkan


def test_f32_ulp_error_and_special_values(vulkan_device):
    module = rt.load_module(compiled("vulkan-spirv", list(UNARY), list(BINARY), "f32",
                                     vulkan_target=DEVICE_TARGET), device=vulkan_device)
    errors = measure(module, list(UNARY), list(BINARY), "f32")
    bad = over_bounds(errors, GPU_ULP)
    assert not bad, f"over the bound: {bad}; all: {errors}"


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_16_bit_floats_round_once_from_f32(vulkan_device, dtype):
    module = rt.load_module(compiled("vulkan-spirv", list(UNARY), list(BINARY), dtype,
                                     vulkan_target=DEVICE_TARGET), device=vulkan_device)
    errors = measure(module, list(UNARY), list(BINARY), dtype)
    bad = over_bounds(errors, dict.fromkeys(EXACT_OPS, 0))
    assert not bad, f"over the bound: {bad}; all: {errors}"
