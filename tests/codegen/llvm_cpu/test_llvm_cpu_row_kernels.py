"""Row kernels in the kernel IR: reductions in phases (``Final`` of an earlier result) and row
results stored per (parallel, reduction) point, against ``kernel.evaluate`` and numpy."""

import numpy as np
import pytest
from llvmcpu_harness import affine, random_array, run
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import (
    Acc,
    Binary,
    Binding,
    Compare,
    Const,
    Final,
    Kernel,
    Load,
    LoopIndex,
    Result,
    Select,
    Unary,
    evaluate,
    phases,
)

M, N = 7, 53  # loops (m, n | k): rows of x[m, k, n] along k = the middle dim
X = Load(0, (affine(1, 0, 0), affine(0, 0, 1), affine(0, 1, 0)), "f32")
AT_ROW = (affine(1, 0, 0), affine(0, 1, 0))


def centered_argmax_kernel() -> Kernel:
    """Phase 1: mean (sum with an epilogue). Phase 2, two results at once: the largest |x - mean|
    and its first index (an argmax: not a plain fold). Rows: (x - mean) / max|x - mean|, and a mask
    of where the argmax is."""
    k = 11
    d = Unary("abs", Binary("sub", X, Final(0, "f32"), "f32"), "f32")
    better = Compare("gt", d, Acc(1, "f32"))
    results = (
        Result(1, AT_ROW, Binary("add", Acc(0, "f32"), X, "f32"), Const(0.0, "f32"),
               Binary("div", Acc(0, "f32"), Const(float(k), "f32"), "f32")),
        Result(2, AT_ROW, Select(better, d, Acc(1, "f32"), "f32"), Const(-1.0, "f32")),
        Result(3, AT_ROW, Select(better, LoopIndex(2, "i64"), Acc(2, "i64"), "i64"), Const(-1, "i64"),
               Binary("add", Acc(2, "i64"), Const(100, "i64"), "i64")),
        Result(4, X.index, Binary("div", Binary("sub", X, Final(0, "f32"), "f32"), Final(1, "f32"), "f32"), row=True),
        Result(5, X.index, Compare("eq", LoopIndex(2, "i64"),
                                  Binary("sub", Final(2, "i64"), Const(100, "i64"), "i64")), row=True),
    )
    return Kernel("centered", (M, N, k), 2,
                  (Binding("f32", (M, k, N), "read"), Binding("f32", (M, N), "write"),
                   Binding("f32", (M, N), "write"), Binding("i64", (M, N), "write"),
                   Binding("f32", (M, k, N), "write"), Binding("i1", (M, k, N), "write")),
                  results)


def test_phases_follow_the_finals_they_read():
    assert phases(centered_argmax_kernel().results) == [[0], [1, 2]]


def test_phased_reductions_and_row_results_match_the_reference():
    kernel = centered_argmax_kernel()
    x = random_array("f32", (M, 11, N), np.random.default_rng(3))
    got = run(kernel, {0: x})
    want = [x, np.zeros((M, N), np.float32), np.zeros((M, N), np.float32),
            np.zeros((M, N), np.int64), np.zeros((M, 11, N), np.float32), np.zeros((M, 11, N), np.bool_)]
    evaluate(kernel, want)
    mean = x.astype(np.float64).mean(axis=1)
    np.testing.assert_allclose(got[1], mean, rtol=1e-5, atol=1e-6)
    dev = np.abs(x - got[1][:, None, :])
    np.testing.assert_array_equal(got[3], dev.argmax(axis=1) + 100)
    np.testing.assert_allclose(got[2], dev.max(axis=1), rtol=1e-6)
    np.testing.assert_allclose(got[4], (x - got[1][:, None, :]) / got[2][:, None, :], rtol=1e-6)
    np.testing.assert_array_equal(got[5], np.arange(11)[None, :, None] == got[3][:, None, :] - 100)
    for k in (1, 2, 3, 4, 5):
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("result, message", [
    (Result(2, AT_ROW, Binary("add", Acc(0, "f32"), Final(1, "f32"), "f32"), Const(0.0, "f32")),
     "Final(1), which is not an earlier reduction"),
    (Result(2, (affine(1, 0, 0), affine(0, 1, 0)), Acc(0, "f32"), row=True), "Acc(0)"),
])
def test_malformed_row_kernels_are_refused(result, message):
    first = Result(1, AT_ROW, Binary("add", Acc(0, "f32"), X, "f32"), Const(0.0, "f32"))
    kernel = Kernel("bad", (M, N, 11), 2, (Binding("f32", (M, 11, N), "read"),
                                            Binding("f32", (M, N), "write"),
                                            Binding("f32", (M, N), "write")), (first, result))
    with pytest.raises(CompileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        normalize(kernel)
