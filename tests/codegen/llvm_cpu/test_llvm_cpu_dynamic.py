"""llvm-cpu kernels with run-time sizes (issue 29): one compiled kernel run at sizes 0, 1, a
prime and large, against ``kernel.evaluate`` and numpy; the entry point's checks of push
constants, sizes and binding lengths; the export's SizeExprs."""

import ctypes

import ml_dtypes
import numpy as np
import pytest
from llvmcpu_harness import Compiled, affine, identity, matmul, random_array, size_expr_value
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.codegen.llvm_cpu import compile_executable
from pyree.compiler.codegen.llvm_cpu.entry import RECORD_SUFFIX
from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import (
    Acc,
    Binary,
    Binding,
    Cast,
    Compare,
    Const,
    Final,
    Gather,
    Kernel,
    Load,
    LoopIndex,
    Result,
    Select,
    SizeValue,
    Unary,
    bind_sizes,
    evaluate,
    has_run_time_sizes,
    within,
)
from pyree.compiler.module_writer import ModuleBuilder
from pyree.compiler.options import CompileOptions
from pyree.compiler.sizes import Size

P0, P1, P2 = (Size.symbol(f"p{k}") for k in range(3))
EVALUATED_POINTS = 3_000  # kernel.evaluate runs a point at a time: larger runs check numpy only


def dispatch(compiled: Compiled, kernel: Kernel, sizes: tuple[int, ...], inputs: dict, rtol=0.0,
             atol=0.0) -> list[np.ndarray]:
    """Runs export 0 at push constants ``sizes`` on ``inputs`` (outputs start as garbage) on two
    threads, checks it against ``kernel.evaluate`` where the kernel is small enough, and
    returns the buffers."""
    params = {f"p{k}": n for k, n in enumerate(sizes)}
    bound = bind_sizes(kernel, params)
    rng = np.random.default_rng(sum(sizes))
    buffers = [np.ascontiguousarray(inputs[i]) if i in inputs
               else random_array(b.dtype, b.shape, rng, 1e3, 2e3)
               for i, b in enumerate(bound.bindings)]
    before = [b.copy() for b in buffers]
    assert compiled.call(0, buffers, threads=2, push_constants=list(sizes)) == 0
    if np.prod(bound.loop_ranges) <= EVALUATED_POINTS:
        evaluate(kernel, before, params)
        for got, want in zip(buffers, before):
            if np.issubdtype(want.dtype, np.floating) or want.dtype == ml_dtypes.bfloat16:
                np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                           rtol=rtol, atol=atol)
            else:
                np.testing.assert_array_equal(got, want)
    return buffers


def broadcast_add(dtype: str) -> Kernel:
    """out[p0, p1] = x[p0, p1] + y[p1]."""
    ix = identity(2)
    return Kernel("bcast_add", (P0, P1), 2,
                  (Binding(dtype, (P0, P1), "read"), Binding(dtype, (P1,), "read"),
                   Binding(dtype, (P0, P1), "write")),
                  (Result(2, ix, Binary("add", Load(0, ix, dtype), Load(1, (affine(0, 1),), dtype),
                                        dtype)),))


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "i32"])
def test_broadcast_add_at_every_size(dtype):
    kernel = broadcast_add(dtype)
    compiled = Compiled([kernel])
    rng = np.random.default_rng(1)
    for m, n in [(0, 7), (7, 0), (1, 1), (7, 131), (131, 7), (1000, 131)]:
        x, y = random_array(dtype, (m, n), rng), random_array(dtype, (n,), rng)
        got = dispatch(compiled, kernel, (m, n), {0: x, 1: y})
        np.testing.assert_array_equal(got[2], x + y)


@pytest.mark.parametrize("dtype", ["f32", "i32"])
def test_transpose(dtype):
    """out[p1, p0] = x[p0, p1]: the store is contiguous, the load strided by a run-time size."""
    kernel = Kernel("transpose", (P1, P0), 2,
                    (Binding(dtype, (P0, P1), "read"), Binding(dtype, (P1, P0), "write")),
                    (Result(1, identity(2), Load(0, (affine(0, 1), affine(1, 0)), dtype)),))
    compiled = Compiled([kernel])
    rng = np.random.default_rng(2)
    for m, n in [(0, 5), (1, 1), (7, 131), (1000, 7), (131, 1000)]:
        x = random_array(dtype, (m, n), rng)
        np.testing.assert_array_equal(dispatch(compiled, kernel, (m, n), {0: x})[1], x.T)


def row_fold(op: str, dtype: str = "f32", acc: str = "f32") -> Kernel:
    """out[p0] = fold over p1 of x[p0, p1] (widened to ``acc``)."""
    x = Load(0, identity(2), dtype)
    if acc != dtype:
        x = Cast("fpext", x, acc)
    init = {"add": -0.0, "max": -np.inf}[op]
    return Kernel(f"row_{op}", (P0, P1), 1,
                  (Binding(dtype, (P0, P1), "read"), Binding(acc, (P0,), "write")),
                  (Result(1, (affine(1, 0),), Binary(op, Acc(0, acc), x, acc), init=Const(init, acc)),))


def test_row_sums():
    kernel = row_fold("add")
    compiled = Compiled([kernel])
    rng = np.random.default_rng(3)
    for m, n in [(0, 7), (7, 0), (1, 1), (7, 131), (131, 7), (3, 1000), (2, 100_003)]:
        x = random_array("f32", (m, n), rng)
        got = dispatch(compiled, kernel, (m, n), {0: x}, rtol=1e-5, atol=1e-5)[1]
        np.testing.assert_allclose(got, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)
        if n == 0:
            assert np.all(np.signbit(got)), "an empty sum is the fold's identity, -0.0"


def test_long_row_sum_stays_accurate():
    """The run-time cascade keeps a 2**20-term f32 sum within a few ulp, as numpy's pairwise
    sum is (a serial f32 sum is 1% off)."""
    kernel = row_fold("add")
    n = 1 << 20
    x = np.full((1, n), 0.1, np.float32)
    got = dispatch(Compiled([kernel]), kernel, (1, n), {0: x})[1]
    np.testing.assert_allclose(got[0], np.sum(x, dtype=np.float64), rtol=3e-7)


def test_row_max_with_nan_and_infinities():
    kernel = row_fold("max")
    compiled = Compiled([kernel])
    rng = np.random.default_rng(4)
    for m, n in [(1, 1), (7, 131), (131, 7), (5, 1000)]:
        x = random_array("f32", (m, n), rng)
        x[0, n // 2] = np.nan
        x[-1, 0] = np.inf if m > 1 else x[-1, 0]
        got = dispatch(compiled, kernel, (m, n), {0: x})[1]
        np.testing.assert_array_equal(got, x.max(axis=1))
        assert np.isnan(got[0])


def test_f16_rows_summed_in_f32():
    kernel = row_fold("add", "f16", "f32")
    compiled = Compiled([kernel])
    rng = np.random.default_rng(5)
    for m, n in [(1, 1), (7, 131), (3, 1000)]:
        x = random_array("f16", (m, n), rng)
        got = dispatch(compiled, kernel, (m, n), {0: x}, rtol=1e-5, atol=1e-5)[1]
        np.testing.assert_allclose(got, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)


def test_column_sums_and_integer_sums():
    """Folds over the outer dim (loads strided by a run-time size along the fold) and i32 folds
    (wrapping, not cascaded)."""
    for dtype in ("f32", "i32"):
        x = Load(0, (affine(0, 1), affine(1, 0)), dtype)
        kernel = Kernel("col_sum", (P1, P0), 1,
                        (Binding(dtype, (P0, P1), "read"), Binding(dtype, (P1,), "write")),
                        (Result(1, (affine(1, 0),), Binary("add", Acc(0, dtype), x, dtype),
                                init=Const(0, dtype)),))
        compiled = Compiled([kernel])
        rng = np.random.default_rng(13)
        for m, n in [(0, 7), (7, 0), (1, 1), (131, 7), (1000, 131)]:
            xv = random_array(dtype, (m, n), rng)
            got = dispatch(compiled, kernel, (m, n), {0: xv}, rtol=1e-5, atol=1e-5)[1]
            np.testing.assert_allclose(got, xv.sum(axis=0, dtype=np.float64 if dtype == "f32" else None),
                                       rtol=1e-5, atol=1e-4)


def test_a_causal_mask_from_loop_indices():
    """out[i, j] = j <= i ? x[i, j] : -inf, a Select on LoopIndex at run-time extents."""
    x = Load(0, identity(2), "f32")
    keep = Compare("le", LoopIndex(1), LoopIndex(0))
    kernel = Kernel("causal", (P0, P1), 2, (Binding("f32", (P0, P1), "read"), Binding("f32", (P0, P1), "write")),
                    (Result(1, identity(2), Select(keep, x, Const(-np.inf, "f32"), "f32")),))
    compiled = Compiled([kernel])
    rng = np.random.default_rng(14)
    for m, n in [(0, 3), (1, 1), (7, 131), (131, 7), (1000, 1000)]:
        xv = random_array("f32", (m, n), rng)
        got = dispatch(compiled, kernel, (m, n), {0: xv})[1]
        np.testing.assert_array_equal(got, np.where(np.tril(np.ones((m, n), bool)), xv, -np.inf))


def test_a_size_read_as_a_value():
    """out[i, j] = x[i, j] * p1 + (p1 == 1 ? 100 : 0), the size a push constant read as an
    integer (torch-mlir's broadcast checks) in every lane, against ``kernel.evaluate``."""
    x = Load(0, identity(2), "f32")
    n = SizeValue(P1, "index")
    scaled = Binary("mul", x, Cast("sitofp", Cast("trunci", n, "i32"), "f32"), "f32")
    single = Select(Compare("eq", n, Const(1, "index")), Const(100.0, "f32"), Const(0.0, "f32"), "f32")
    kernel = Kernel("size_value", (P0, P1), 2,
                    (Binding("f32", (P0, P1), "read"), Binding("f32", (P0, P1), "write")),
                    (Result(1, identity(2), Binary("add", scaled, single, "f32")),))
    assert has_run_time_sizes(kernel)
    compiled = Compiled([kernel])
    rng = np.random.default_rng(15)
    for m, n_ in [(0, 3), (3, 0), (1, 1), (5, 1), (7, 131), (131, 7), (1000, 67)]:
        xv = random_array("f32", (m, n_), rng)
        got = dispatch(compiled, kernel, (m, n_), {0: xv})[1]
        np.testing.assert_array_equal(got, xv * np.float32(n_) + np.float32(100 if n_ == 1 else 0))


@pytest.mark.parametrize("dtype", ["f32", "i32"])
def test_matmul_with_every_dim_at_run_time(dtype):
    kernel = matmul(P0, P1, P2, in_dtype=dtype, acc=dtype)
    compiled = Compiled([kernel])
    rng = np.random.default_rng(6)
    for m, n, k in [(0, 3, 4), (3, 0, 4), (3, 4, 0), (1, 1, 1), (7, 13, 131), (131, 7, 1), (64, 131, 100)]:
        a, b = random_array(dtype, (m, k), rng), random_array(dtype, (k, n), rng)
        got = dispatch(compiled, kernel, (m, n, k), {0: a, 1: b}, rtol=1e-5, atol=1e-5)[2]
        if dtype == "i32":
            np.testing.assert_array_equal(got, a @ b)
        else:
            np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_static_and_run_time_dims_mixed():
    """y[p0, 5] = sum over a static 64 of x[p0, 5, 64] * w[5, 64], and z[3, p0, 5] = relu(y)
    broadcast: a static reduction inside a run-time batch, and a static outer loop."""
    x3 = (affine(1, 0, 0), affine(0, 1, 0), affine(0, 0, 1))
    w = Load(1, (affine(0, 1, 0), affine(0, 0, 1)), "f32")
    reduce = Kernel("batched_dot", (P0, 5, 64), 2,
                    (Binding("f32", (P0, 5, 64), "read"), Binding("f32", (5, 64), "read"),
                     Binding("f32", (P0, 5), "write")),
                    (Result(2, (affine(1, 0, 0), affine(0, 1, 0)),
                            Binary("add", Acc(0, "f32"), Binary("mul", Load(0, x3, "f32"), w, "f32"), "f32"),
                            init=Const(0.0, "f32")),))
    relu = Kernel("relu_bcast", (3, P0, 5), 3,
                  (Binding("f32", (P0, 5), "read"), Binding("f32", (3, P0, 5), "write")),
                  (Result(1, x3, Binary("max", Load(0, (affine(0, 1, 0), affine(0, 0, 1)), "f32"),
                                        Const(0.0, "f32"), "f32")),))
    compiled = [Compiled([reduce]), Compiled([relu])]
    rng = np.random.default_rng(7)
    for batch in (0, 1, 7, 131, 1000):
        x, wv = random_array("f32", (batch, 5, 64), rng), random_array("f32", (5, 64), rng)
        y = dispatch(compiled[0], reduce, (batch,), {0: x, 1: wv}, rtol=1e-5, atol=1e-5)[2]
        np.testing.assert_allclose(y, (x.astype(np.float64) * wv).sum(axis=2), rtol=1e-5, atol=1e-5)
        z = dispatch(compiled[1], relu, (batch,), {0: y})[1]
        np.testing.assert_array_equal(z, np.broadcast_to(np.maximum(y, 0), (3, batch, 5)))


def test_softmax_rows():
    """A row kernel: max, then the sum of exp(x - max), then every element divided by it."""
    x = Load(0, identity(2), "f32")
    shifted = Unary("exp", Binary("sub", x, Final(0, "f32"), "f32"), "f32")
    row = (affine(1, 0),)
    kernel = Kernel("softmax", (P0, P1), 1,
                    (Binding("f32", (P0, P1), "read"), Binding("f32", (P0,), "write"),
                     Binding("f32", (P0,), "write"), Binding("f32", (P0, P1), "write")),
                    (Result(1, row, Binary("max", Acc(0, "f32"), x, "f32"), init=Const(-np.inf, "f32")),
                     Result(2, row, Binary("add", Acc(1, "f32"), shifted, "f32"), init=Const(0.0, "f32")),
                     Result(3, identity(2), Binary("div", shifted, Final(1, "f32"), "f32"), row=True)))
    compiled = Compiled([kernel])
    rng = np.random.default_rng(8)
    for m, n in [(0, 7), (7, 0), (1, 1), (7, 131), (131, 7), (3, 1000)]:
        xv = random_array("f32", (m, n), rng, -30, 30)
        got = dispatch(compiled, kernel, (m, n), {0: xv}, rtol=1e-5, atol=1e-6)[3]
        e = np.exp(xv.astype(np.float64) - xv.max(axis=1, keepdims=True, initial=-np.inf))
        np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_gather_from_a_static_table_at_run_time_ids():
    """out[p0, 16] = table[clamp(ids[p0]), :], the ids past either end reading the edge rows."""
    ids = Load(0, (affine(1, 0),), "i32")
    kernel = Kernel("embed", (P0, 16), 2,
                    (Binding("i32", (P0,), "read"), Binding("f32", (10, 16), "read"),
                     Binding("f32", (P0, 16), "write")),
                    (Result(2, identity(2), Gather(1, (ids, LoopIndex(1)), "f32")),))
    compiled = Compiled([kernel])
    rng = np.random.default_rng(9)
    table = random_array("f32", (10, 16), rng)
    for n in (0, 1, 7, 131, 1000):
        idv = rng.integers(-3, 13, n).astype(np.int32)
        got = dispatch(compiled, kernel, (n,), {0: idv, 1: table})[2]
        np.testing.assert_array_equal(got, table[np.clip(idv, 0, 9)])


def test_gather_from_a_run_time_shaped_table():
    """out[p0, 3] = table[clamp(ids[p0]), :] of a table[p1, 3]: the clamp and the row stride
    are the dispatch's sizes (index_select along a dynamic sequence)."""
    ids = Load(0, (affine(1, 0),), "i32")
    kernel = Kernel("g", (P0, 3), 2, (Binding("i32", (P0,), "read"), Binding("f32", (P1, 3), "read"),
                                      Binding("f32", (P0, 3), "write")),
                    (Result(2, identity(2), Gather(1, (ids, LoopIndex(1)), "f32")),))
    compiled = Compiled([kernel])
    rng = np.random.default_rng(11)
    for n, rows in [(0, 5), (1, 1), (7, 13), (131, 2)]:
        table = random_array("f32", (rows, 3), rng)
        idv = rng.integers(-3, rows + 3, n).astype(np.int32)
        got = dispatch(compiled, kernel, (n, rows), {0: idv, 1: table})[2]
        np.testing.assert_array_equal(got, table[np.clip(idv, 0, rows - 1)])
    # an empty table and ids to read: refused per dispatch (element 0 is past its end)
    out = np.full((3, 3), 7.0, np.float32)
    assert compiled.call(0, [np.zeros(3, np.int32), np.zeros((0, 3), np.float32), out],
                         push_constants=[3, 0]) != 0
    np.testing.assert_array_equal(out, 7.0)


def slice_kernel() -> Kernel:
    """out[p1] = x[p2 + i] of x[p0]: an offset no compile-time proof keeps in range."""
    return Kernel("slice", (P1,), 1, (Binding("f32", (P0,), "read"), Binding("f32", (P1,), "write")),
                  (Result(1, (affine(1),), Load(0, (affine(1, const=P2),), "f32")),))


def test_an_access_proven_only_at_run_time_is_checked_per_dispatch():
    kernel = slice_kernel()
    compiled = Compiled([kernel])
    x = random_array("f32", (100,), np.random.default_rng(10))
    got = dispatch(compiled, kernel, (100, 31, 69), {0: x})[1]
    np.testing.assert_array_equal(got, x[69:])
    for p1, p2 in [(31, 70), (101, 0), (1, 100)]:
        out = np.full(p1, 7.0, np.float32)
        assert compiled.call(0, [x, out], push_constants=[100, p1, p2]) != 0
        np.testing.assert_array_equal(out, 7.0)
    empty = np.zeros(0, np.float32)
    assert compiled.call(0, [x, empty], push_constants=[100, 0, 5000]) == 0  # nothing to read


def test_sizes_bindings_and_push_constants_are_checked_before_anything_is_written():
    kernel = broadcast_add("f32")
    compiled = Compiled([kernel])
    rng = np.random.default_rng(11)
    x, y = random_array("f32", (7, 131), rng), random_array("f32", (131,), rng)
    out = np.full((7, 131), 7.0, np.float32)
    bufs = [x, y, out]
    lengths = [b.nbytes for b in bufs]
    count = compiled.workgroup_count(0, [7, 131])
    assert compiled.call(0, bufs, push_constants=[7], end=count) != 0  # too few push constants
    assert compiled.call(0, bufs, push_constants=[8, 131], end=count) != 0  # x and out too short
    short = list(lengths)
    short[1] -= 4
    assert compiled.call(0, bufs, push_constants=[7, 131], lengths=short) != 0
    # sizes whose byte length wraps to a small number: refused, not wrapped
    assert compiled.call(0, bufs, push_constants=[2**31, 2**31 + 1], end=1) != 0
    assert compiled.call(0, bufs, push_constants=[2**32 - 1, 2**32 - 1], end=1) != 0
    np.testing.assert_array_equal(out, 7.0)
    assert compiled.call(0, bufs, push_constants=[7, 131, 99]) == 0  # more are fine
    np.testing.assert_array_equal(out, x + y)


def test_workgroups_past_the_count_of_this_dispatch_do_nothing():
    kernel = broadcast_add("f32")
    compiled = Compiled([kernel])
    rng = np.random.default_rng(12)
    x, y = random_array("f32", (1000, 131), rng), random_array("f32", (131,), rng)
    out = np.full((1000, 131), 7.0, np.float32)
    count = compiled.workgroup_count(0, [1000, 131])
    assert count > 8, "a run-time size of 131k elements is split for several cores"
    assert compiled.call(0, [x, y, out], push_constants=[1000, 131], begin=count, end=2**63) == 0
    np.testing.assert_array_equal(out, 7.0)
    assert compiled.call(0, [x, y, out], push_constants=[1000, 131], end=2**63) == 0
    np.testing.assert_array_equal(out, x + y)
    assert compiled.workgroup_count(0, [0, 131]) == 0 and compiled.workgroup_count(0, [7, 0]) == 1


def test_the_export_table_holds_size_expressions():
    """Run-time lengths and counts are SizeExprs over the push constants; their static fields
    (and the export record the runtime holds the table to) are 0. A static binding of the same
    kernel keeps its static length."""
    kernel = broadcast_add("f32")
    kernel = Kernel(kernel.name, kernel.loop_ranges, 2, kernel.bindings[:1] + (
        Binding("f32", (5,), "read"),) + kernel.bindings[2:], kernel.results)
    compiled = Compiled([kernel])
    export = compiled.export(0)
    assert export.workgroupCount == 0
    assert [b.minLength for b in export.bindings] == [0, 20, 0]
    assert export.bindings[1].minLengthExpr is None
    for b in (export.bindings[0], export.bindings[2]):
        assert size_expr_value(list(b.minLengthExpr.code), [7, 131]) == 7 * 131 * 4
    assert size_expr_value(list(export.workgroupCountExpr.code), [0, 5]) == 0
    symbol = export.symbol.decode() if isinstance(export.symbol, bytes) else export.symbol
    record = (ctypes.c_uint64 * 9).in_dll(compiled.lib, symbol + RECORD_SUFFIX)
    assert list(record) == [1, 0, 3, 0, 0, 0, 20, 1, 0]


def test_static_kernels_are_not_dynamic():
    static = bind_sizes(broadcast_add("f32"), {"p0": 3, "p1": 4})
    assert not has_run_time_sizes(static) and has_run_time_sizes(broadcast_add("f32"))
    assert has_run_time_sizes(slice_kernel()) and not has_run_time_sizes(
        bind_sizes(slice_kernel(), {"p0": 9, "p1": 3, "p2": 1}))


def test_normalize_merges_loops_whose_strides_line_up_as_polynomials():
    ix = identity(3)
    kernel = Kernel("add3", (P0, P1, 7), 3, tuple(Binding("f32", (P0, P1, 7), a)
                                                  for a in ("read", "read", "write")),
                    (Result(2, ix, Binary("add", Load(0, ix, "f32"), Load(1, ix, "f32"), "f32")),))
    flat = normalize(kernel)
    assert flat.loop_ranges == (P0 * P1 * 7,) and flat.bindings[0].shape == (P0 * P1 * 7,)
    bcast = normalize(broadcast_add("f32"))
    assert bcast.loop_ranges == (P0, P1)
    assert bcast.results[0].index[0].coeffs == (P1, 1)


def test_accesses_are_proven_in_range_or_refused_or_left_to_the_run_time_check():
    assert within(affine(P1, 1), (P0, P1), P0 * P1) is True
    assert within(affine(1, const=P2), (P1,), P0) is None
    assert within(affine(1, const=-1), (P0,), P0) is False
    assert within(affine(P1 - P2, 0), (P0, 1), P0) is None  # sign of the coefficient unknown
    bad = Kernel("shifted", (P0,), 1, (Binding("f32", (P0,), "read"), Binding("f32", (P0,), "write")),
                 (Result(1, (affine(1),), Load(0, (affine(1, const=1),), "f32")),))
    with pytest.raises(CompileError, match="reaches index \\[1, p0\\] of dim 0 \\(size p0\\)"):
        Compiled([bad])


def test_elementwise_code_is_vectorized_with_a_scalar_tail():
    kernel = broadcast_add("f32")
    kernel = Kernel(kernel.name, kernel.loop_ranges, 2, (kernel.bindings[0],) * 2 + kernel.bindings[2:],
                    (Result(2, identity(2), Binary("add", Load(0, identity(2), "f32"),
                                                   Load(1, identity(2), "f32"), "f32")),))
    kept = {}
    compile_executable([kernel], CompileOptions(llvmcpu_target_cpu="haswell"),
                       ModuleBuilder("test", "tests/codegen_cpu"), keep=kept.__setitem__)
    optimized = "\n".join(kept["system_elf_x86_64.optimized.ll"])
    assert "fadd <8 x float>" in optimized and "fadd float" in optimized
