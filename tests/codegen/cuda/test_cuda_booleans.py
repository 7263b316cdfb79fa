"""i1 arithmetic in the LLVM GPU kernels (cuda's NVPTX, run here on the CPU): an i1 is 0 or 1,
so max, min, division and shifts on it are unsigned (as llvm-cpu computes them). A signed max
of i1 reads true as -1 and returns false: ONNX's ReduceMax over bools was wrong on the H200."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from tooling import require_module

require_module("llvmlite")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from nvptx_on_cpu import Emulated  # noqa: E402
from pyree.compiler.kernel import AffineExpr, Binary, Binding, Kernel, Load, Result  # noqa: E402

N = 37


@pytest.mark.parametrize("op, reference", [("max", np.logical_or), ("min", np.logical_and)])
def test_elementwise_max_and_min_of_booleans(op, reference):
    at = (AffineExpr((1,), 0),)
    kernel = Kernel(f"i1_{op}", (N,), 1,
                    (Binding("i1", (N,), "read"), Binding("i1", (N,), "read"),
                     Binding("i1", (N,), "write")),
                    (Result(2, at, Binary(op, Load(0, at, "i1"), Load(1, at, "i1"), "i1")),))
    rng = np.random.default_rng(7)
    x, y = rng.random(N) < 0.5, rng.random(N) < 0.5
    out = np.zeros(N, bool)
    assert Emulated(kernel)([x, y, out], [])
    np.testing.assert_array_equal(out, reference(x, y))
