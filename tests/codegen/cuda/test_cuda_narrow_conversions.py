"""Float to 8- and 16-bit integers in the LLVM GPU kernels (cuda's NVPTX, run here on the CPU):
a value the narrow type cannot hold keeps the low bits of its 32-bit conversion, as on every
pyree target (tests/e2e/test_edge_narrow_conversions.py; DESIGN.md, "Narrow conversions")."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from tooling import require_module

require_module("llvmlite")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from nvptx_on_cpu import Emulated  # noqa: E402
from pyree.compiler.codegen.cuda import generate_ptx, resolve_target  # noqa: E402
from pyree.compiler.kernel import AffineExpr, Binding, Cast, Kernel, Load, Result  # noqa: E402

VALUES = [-70000.5, -300.7, -129.0, -128.5, -1.5, -0.0, 0.4, 127.9, 128.0, 153.0, 255.0, 255.9,
          256.0, 300.2, 32768.0, 65535.0, 70000.0]


def conversion(op: str, dtype: str) -> Kernel:
    n, at = len(VALUES), (AffineExpr((1,), 0),)
    return Kernel(f"{op}_{dtype}", (n,), 1,
                  (Binding("f32", (n,), "read"), Binding(dtype, (n,), "write")),
                  (Result(1, at, Cast(op, Load(0, at, "f32"), dtype)),))


@pytest.mark.parametrize("op", ["fptosi", "fptoui"])
@pytest.mark.parametrize("dtype, numpy_dtype", [("i8", np.int8), ("i16", np.int16)])
def test_out_of_range_values_keep_the_low_bits(op, dtype, numpy_dtype):
    kernel, n = conversion(op, dtype), len(VALUES)
    x = np.array(VALUES, np.float32)
    out = np.zeros(n, numpy_dtype)
    assert Emulated(kernel)([x, out], [])
    np.testing.assert_array_equal(out, np.trunc(x).astype(np.int32).astype(numpy_dtype))


@pytest.mark.parametrize("op", ["fptosi", "fptoui"])
@pytest.mark.parametrize("dtype", ["i8", "i16"])
def test_the_gpu_converts_to_32_bits(op, dtype):
    """What the CPU run above cannot show: NVPTX's own conversion to 16 bits saturates there
    (70000.0 to i8 would keep the bits of 32767), so the PTX converts to s32 alone."""
    ptx, _ = generate_ptx([conversion(op, dtype)], resolve_target("sm_90"))
    conversions = [line.split()[0] for line in ptx.splitlines() if "cvt.rzi" in line]
    assert conversions and all(c.startswith("cvt.rzi.s32.f32") for c in conversions), conversions
