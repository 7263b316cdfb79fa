"""Reductions over inner and outer loops, multi-result (argmax), epilogues, init loads."""

import numpy as np
from llvmcpu_harness import affine, random_array, run
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.codegen.llvm_cpu.reduction import ReductionLowering
from pyree.compiler.kernel import (
    Acc,
    Binary,
    Binding,
    Cast,
    Compare,
    Const,
    Kernel,
    Load,
    LoopIndex,
    Result,
    Select,
    Unary,
    evaluate,
)


def sum_kernel(shape, axis, dtype="f32", epilogue=None):
    """Reduce ``shape`` over ``axis``: loops are (kept dims..., axis)."""
    kept = [d for d in range(len(shape)) if d != axis]
    loops = tuple(shape[d] for d in kept) + (shape[axis],)
    n = len(loops)
    src_index = tuple(affine(*[int(loop == (kept.index(d) if d != axis else n - 1)) for loop in range(n)])
                      for d in range(len(shape)))
    out_shape = tuple(shape[d] for d in kept)
    out_index = tuple(affine(*[int(loop == i) for loop in range(n)]) for i in range(len(kept)))
    value = Binary("add", Acc(0, dtype), Load(0, src_index, dtype), dtype)
    return Kernel(f"sum{axis}", loops, n - 1,
                  (Binding(dtype, shape, "read"), Binding(dtype, out_shape, "write")),
                  (Result(1, out_index, value, init=Const(0, dtype), epilogue=epilogue),))


def test_inner_and_outer_sums_pick_their_loop_order():
    rng = np.random.default_rng(10)
    x = random_array("f32", (53, 37), rng)
    for axis, parallel_inner in ((1, False), (0, True)):
        k = sum_kernel(x.shape, axis)
        assert ReductionLowering(normalize(k)).parallel_inner == parallel_inner
        got = run(k, {0: x})[1]
        np.testing.assert_allclose(got, x.astype(np.float64).sum(axis=axis), rtol=1e-5, atol=1e-5)


def test_middle_axis_large_and_int():
    rng = np.random.default_rng(11)
    x = random_array("f32", (7, 301, 129), rng)
    got = run(sum_kernel(x.shape, 1), {0: x})[1]
    np.testing.assert_allclose(got, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)
    xi = random_array("i32", (301, 1029), rng)
    for axis in (0, 1):
        got = run(sum_kernel(xi.shape, axis, "i32"), {0: xi})[1]
        np.testing.assert_array_equal(got, xi.sum(axis=axis, dtype=np.int32))


def test_mean_epilogue_and_full_reduction_to_rank0():
    rng = np.random.default_rng(12)
    x = random_array("f64", (37, 53), rng)
    mean = Binary("div", Acc(0, "f64"), Const(53.0, "f64"), "f64")
    got = run(sum_kernel(x.shape, 1, "f64", epilogue=mean), {0: x})[1]
    np.testing.assert_allclose(got, x.mean(axis=1), rtol=1e-12)
    total = Kernel("total", (37, 53), 0, (Binding("f64", (37, 53), "read"), Binding("f64", (), "write")),
                   (Result(1, (), Binary("add", Acc(0, "f64"), Load(0, (affine(1, 0), affine(0, 1)), "f64"),
                                         "f64"), init=Const(0.0, "f64")),))
    np.testing.assert_allclose(run(total, {0: x})[1], x.sum(), rtol=1e-12)


def test_max_and_argmax_multi_result():
    """max over the last axis and its first index: result 1 reads result 0's accumulator."""
    rng = np.random.default_rng(13)
    M, K = 37, 53
    x = random_array("f32", (M, K), rng)
    x[3, 10] = x[3, 20] = 5.0   # ties keep the first index
    ld = Load(0, (affine(1, 0), affine(0, 1)), "f32")
    out_ix = (affine(1, 0),)
    greater = Compare("gt", ld, Acc(0, "f32"))
    k = Kernel("argmax", (M, K), 1,
               (Binding("f32", (M, K), "read"), Binding("f32", (M,), "write"), Binding("i64", (M,), "write")),
               (Result(1, out_ix, Binary("max", Acc(0, "f32"), ld, "f32"), init=Const(-np.inf, "f32")),
                Result(2, out_ix, Select(greater, LoopIndex(1, "i64"), Acc(1, "i64"), "i64"),
                       init=Const(0, "i64"))))
    got = run(k, {0: x})
    np.testing.assert_array_equal(got[1], x.max(axis=1))
    np.testing.assert_array_equal(got[2], x.argmax(axis=1))
    ref = [np.zeros(M, np.float32), np.zeros(M, np.int64)]
    evaluate(k, [x] + ref)
    np.testing.assert_array_equal(got[2], ref[1])


def test_init_load_cast_and_empty_reduction():
    """out[i] = base[i] + sum_k f16(x[i,k]) as f32; then a reduction over zero elements."""
    rng = np.random.default_rng(14)
    x = random_array("f16", (37, 53), rng)
    base = random_array("f32", (37,), rng)
    ld = Cast("fpext", Load(0, (affine(1, 0), affine(0, 1)), "f16"), "f32")
    k = Kernel("acc_into", (37, 53), 1,
               (Binding("f16", (37, 53), "read"), Binding("f32", (37,), "read"), Binding("f32", (37,), "write")),
               (Result(2, (affine(1, 0),), Binary("add", Acc(0, "f32"), ld, "f32"),
                       init=Load(1, (affine(1, 0),), "f32"),
                       epilogue=Unary("neg", Acc(0, "f32"), "f32")),))
    got = run(k, {0: x, 1: base})[2]
    np.testing.assert_allclose(got, -(base + x.astype(np.float64).sum(axis=1)), rtol=1e-5, atol=1e-5)
    empty = sum_kernel((37, 0), 1)
    np.testing.assert_array_equal(run(empty, {0: np.zeros((37, 0), np.float32)})[1], np.zeros(37))
