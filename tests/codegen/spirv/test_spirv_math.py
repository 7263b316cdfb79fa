"""CPU-only: the shaders of every math op (tests/e2e/test_math_ops.py's program) in f32, f16 and
bf16 pass spirv-val; tests/drivers/vulkan/test_vulkan_math.py measures them on a device. They
compute the math themselves (codegen/common/math_expansion), not with GLSL.std.450."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from spirv_modules import DEVICE_TARGET, spirv_binaries, validate

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e"))
from test_math_ops import BINARY, UNARY, compiled  # noqa: E402

pytestmark = pytest.mark.vulkan


def test_math_shaders_pass_spirv_val(tmp_path):
    for dtype in ("f32", "f16", "bf16"):
        for code, _ in spirv_binaries(compiled("vulkan-spirv", list(UNARY), list(BINARY), dtype,
                                                 vulkan_target=DEVICE_TARGET)):
            assert validate(code, tmp_path) == ""
