"""Loads through views (flow/views.py): a read of a reshape or a contiguous slice becomes a read of
its source wherever the index stays affine, and only there."""

import itertools

import numpy as np
import pytest
from pyree.compiler.flow.passes import form_dispatch_regions
from pyree.compiler.flow.views import source_index
from pyree.compiler.kernel import Acc, AffineExpr, Binary, Const, Load, Result, Unary
from pyree.compiler.tensor_program import Function, Generic, Value, View
from test_regions import ident, run


def affine(coeffs, const=0):
    return AffineExpr(tuple(coeffs), const)


def batch_matmul(x: Value, y: Value, out: Value) -> Generic:
    """out[h, i, j] = sum_k x[h, i, k] * y[h, k, j], f32."""
    (heads, m, k), n = x.shape, y.shape[2]
    product = Binary("mul", Load(0, (affine((1, 0, 0, 0)), affine((0, 1, 0, 0)),
                                     affine((0, 0, 0, 1))), "f32"),
                     Load(1, (affine((1, 0, 0, 0)), affine((0, 0, 0, 1)),
                              affine((0, 0, 1, 0))), "f32"), "f32")
    return Generic([x, y], [out], (Result(0, ident(4, 3), Binary("add", Acc(0, "f32"), product,
                                                                 "f32"), init=Const(0.0, "f32")),),
                   (heads, m, n, k), 3, origin="linalg.batch_matmul")


def elements(index, view_shape, offset, loop_ranges):
    """The linear element each loop point reads through the view (the reference)."""
    strides = np.cumprod((1, *view_shape[:0:-1]))[::-1]
    return [offset + sum(int(s) * ix(p) for s, ix in zip(strides, index))
            for p in itertools.product(*map(range, loop_ranges))]


def linear(index, shape, loop_ranges):
    return elements(index, shape, 0, loop_ranges)


def test_an_expanded_dim_splits_into_affine_digits():
    # (1, 128, 256) viewed as (1, 128, 4, 64) read at (0, d1, d0, d2): source (0, d1, 64*d0 + d2)
    index = (affine((0, 0, 0)), affine((0, 1, 0)), affine((1, 0, 0)), affine((0, 0, 1)))
    got = source_index(index, (1, 128, 4, 64), (1, 128, 256), 0, (4, 128, 64))
    assert got == (affine((0, 0, 0)), affine((0, 1, 0)), affine((64, 0, 1)))


def test_a_collapsed_dim_read_in_steps_that_fit_its_digits_folds():
    # (4, 64) collapsed to 256, read at 64*d0 + d1 (a split-K chunk walk): source (d0, d1)
    got = source_index((affine((64, 1)),), (256,), (4, 64), 0, (4, 64))
    assert got == (affine((1, 0)), affine((0, 1)))


def test_unit_loops_read_a_unit_dim_one_at_a_time():
    # (1, 3072) viewed as (1, 1, 3072) (a linear's output reshaped back to [batch, seq, n]), read
    # at (d0, d1, d2) over (1, 1, 3072): the source's unit dim 0 at d0 alone, not d0 + d1, so that
    # an activation after the reshape still fuses into the linear (one loop to a dim)
    got = source_index((affine((1, 0, 0)), affine((0, 1, 0)), affine((0, 0, 1))), (1, 1, 3072),
                       (1, 3072), 0, (1, 1, 3072))
    assert got == (affine((1, 0, 0)), affine((0, 0, 1)))


def test_an_activation_after_a_reshaped_linear_is_its_epilogue():
    """GPT-2's Conv1D at decode: x[1, 1, 768] collapsed, times W, expanded to [1, 1, 3072], then
    GELU: the GELU fuses into the product (one Generic), and the module's answer is PyTorch's."""
    torch = pytest.importorskip("torch")
    import pyree.runtime as rt
    from pyree.compiler import compile_str, import_torch
    from pyree.compiler.input import import_mlir

    class Linear(torch.nn.Module):
        def forward(self, x, w, b):
            y = torch.addmm(b, x.view(-1, 768), w).view(1, 1, 3072)
            return torch.nn.functional.gelu(y, approximate="tanh")
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((1, 1, 768), (768, 3072), (3072,))]
    text = import_torch(Linear(), *map(torch.from_numpy, args))
    (function,) = import_mlir(text).functions
    assert len([op for op in form_dispatch_regions(function).ops if isinstance(op, Generic)]) == 1
    got = rt.load_module(compile_str(text), device="local-task").main(*args).to_host()
    want = Linear()(*(torch.from_numpy(a).double() for a in args)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)  # 768-long f32 sums


def test_a_read_that_would_carry_keeps_the_view():
    # 256 consecutive elements of a (4, 64) source walk past its inner extent
    assert source_index((affine((1,)),), (256,), (4, 64), 0, (256,)) is None
    # a slice offset that pushes a digit past its extent
    assert source_index((affine((1,)),), (64,), (4, 64), 32, (64,)) is None


def test_a_slice_offset_lands_in_its_digits():
    # the contiguous 256 elements from column 512 of row 0 of a (2, 768) value
    got = source_index((affine((1,)),), (256,), (2, 768), 512, (256,))
    assert got == (affine((0,)), affine((1,), 512))
    # the same bytes seen as two rows of 256 cross into row 1 of the source: kept as a view
    assert source_index((affine((1, 0)), affine((0, 1))), (2, 256), (2, 768), 512,
                        (2, 256)) is None


@pytest.mark.parametrize("seed", range(200))
def test_every_folded_index_reads_the_same_element(seed):
    """Random reshapes, offsets and affine reads: where a source index is given, it reads exactly
    the element the view does at every loop point."""
    rng = np.random.default_rng(seed)
    size = int(rng.choice([12, 24, 30, 36, 60]))
    divisors = [d for d in range(1, size + 1) if size % d == 0]

    def shape():
        dims, rest = [], size
        while rest > 1 and len(dims) < 3:
            d = int(rng.choice([d for d in divisors if rest % d == 0 and d > 1]))
            dims.append(d)
            rest //= d
        return tuple(dims + ([rest] if rest > 1 else []))

    view_shape, source_shape = shape(), shape()
    loops = tuple(int(v) for v in rng.integers(1, 4, size=rng.integers(1, 4)))
    index = []
    for extent in view_shape:  # a random in-bounds affine index per view dim
        coeffs = [int(rng.integers(0, 3)) for _ in loops]
        top = sum(c * (r - 1) for c, r in zip(coeffs, loops))
        if top >= extent:
            coeffs, top = [0] * len(loops), 0
        index.append(affine(coeffs, int(rng.integers(0, extent - top))))
    got = source_index(tuple(index), view_shape, source_shape, 0, loops)
    if got is not None:
        assert linear(got, source_shape, loops) == elements(tuple(index), view_shape, 0, loops)
        assert all(0 <= ix(p) < n for p in itertools.product(*map(range, loops))
                   for ix, n in zip(got, source_shape))


def test_attention_reshapes_and_transposes_fuse_into_the_batch_matmul():
    """q (8, 12) viewed as 3 heads of 4 and transposed into (1, heads, s, d), then collapsed to
    (heads, s, d) for the batch matmul, and k likewise: the collapsing views no longer keep the
    transposes materialized; one kernel, same numbers."""
    s, heads, d = 8, 3, 4
    q, k = Value("f32", (s, heads * d), "q"), Value("f32", (s, heads * d), "k")
    q4, k4 = Value("f32", (s, heads, d), "q4"), Value("f32", (s, heads, d), "k4")
    qt4, kt4 = Value("f32", (1, heads, s, d), "qt4"), Value("f32", (1, heads, d, s), "kt4")
    qt, kt = Value("f32", (heads, s, d), "qt"), Value("f32", (heads, d, s), "kt")
    out = Value("f32", (heads, s, s), "scores")
    transpose_q = Generic([q4], [qt4], (Result(0, ident(4), Load(0, (
        affine((0, 0, 1, 0)), affine((0, 1, 0, 0)), affine((0, 0, 0, 1))), "f32")),),
        qt4.shape, 4)
    transpose_k = Generic([k4], [kt4], (Result(0, ident(4), Load(0, (
        affine((0, 0, 0, 1)), affine((0, 1, 0, 0)), affine((0, 0, 1, 0))), "f32")),),
        kt4.shape, 4)

    bmm = batch_matmul(qt, kt, out)
    function = Function("attention", [q, k], [View(q4, q), View(k4, k), transpose_q, transpose_k,
                                                View(qt, qt4), View(kt, kt4), bmm], [out])
    formed = form_dispatch_regions(function)
    assert sum(isinstance(op, Generic) for op in formed.ops) == 1
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((s, heads * d), np.float32), rng.standard_normal((s, heads * d),
                                                                                np.float32)
    qh, kh = a.reshape(s, heads, d).transpose(1, 0, 2), b.reshape(s, heads, d).transpose(1, 2, 0)
    np.testing.assert_allclose(run(formed, [a, b])[0], qh @ kh, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(run(function, [a, b])[0], qh @ kh, rtol=1e-5, atol=1e-5)


def test_a_generic_reading_two_views_reads_each_source_at_its_own_index():
    """A batch matmul over two reshaped copies (folding one input renumbers the others): with
    the views folded, both copies are loads of the matmul, which reads the arguments in place."""
    heads, s, d = 2, 5, 3
    x, y = Value("f32", (1, heads, s, d), "x"), Value("f32", (1, heads, d, s), "y")
    a, b = Value("f32", x.shape, "a"), Value("f32", y.shape, "b")
    a3, b3 = Value("f32", (heads, s, d), "a3"), Value("f32", (heads, d, s), "b3")
    out = Value("f32", (heads, s, s), "out")
    copies = [Generic([src], [dst], (Result(0, ident(4), Load(0, ident(4), "f32")),), src.shape, 4)
              for src, dst in ((x, a), (y, b))]
    bmm = batch_matmul(a3, b3, out)
    function = Function("bmm", [x, y], [*copies, View(a3, a), View(b3, b), bmm], [out])
    formed = form_dispatch_regions(function)
    (op,) = [op for op in formed.ops if isinstance(op, Generic)]
    assert [v.name for v in op.inputs] == ["x", "y"] and not any(isinstance(o, View)
                                                                  for o in formed.ops)
    rng = np.random.default_rng(1)
    p, q = rng.standard_normal(x.shape, np.float32), rng.standard_normal(y.shape, np.float32)
    np.testing.assert_allclose(run(formed, [p, q])[0], p[0] @ q[0], rtol=1e-5, atol=1e-5)


def test_a_view_of_an_argument_or_a_constant_stays():
    """Nothing can fuse into an argument or a constant: their views are left as they are."""
    x = Value("f32", (2, 6), "x")
    x3, out = Value("f32", (2, 2, 3), "x3"), Value("f32", (2, 2, 3), "out")
    negate = Generic([x3], [out], (Result(0, ident(3), Unary("neg", Load(0, ident(3), "f32"),
                                                              "f32")),), out.shape, 3)
    formed = form_dispatch_regions(Function("f", [x], [View(x3, x), negate], [out]))
    assert any(isinstance(o, View) for o in formed.ops)


def test_a_transposed_write_does_not_join_a_matmul():
    """``transpose(p @ v)`` as the function's result: the transpose stays a kernel of its own,
    so the product keeps m and n innermost and every backend's matmul template still takes it."""
    from pyree.compiler.codegen.common.normalize import normalize
    from pyree.compiler.codegen.llvm_cpu.matmul import plan as plan_matmul
    from pyree.compiler.codegen.llvm_cpu.targets import resolve_target
    from pyree.compiler.flow.kernels import outline

    heads, s, d = 3, 6, 4
    p, v = Value("f32", (heads, s, s), "p"), Value("f32", (heads, s, d), "v")
    pv, out = Value("f32", (heads, s, d), "pv"), Value("f32", (s, heads, d), "out")
    bmm = batch_matmul(p, v, pv)
    transpose = Generic([pv], [out], (Result(0, ident(3), Load(0, (
        affine((0, 1, 0)), affine((1, 0, 0)), affine((0, 0, 1))), "f32")),), out.shape, 3)
    formed = form_dispatch_regions(Function("pv", [p, v], [bmm, transpose], [out]))
    generics = [op for op in formed.ops if isinstance(op, Generic)]
    assert len(generics) == 2
    (product_op,) = [op for op in generics if op.num_parallel < len(op.loop_ranges)]
    assert plan_matmul(normalize(outline(product_op, "k")), resolve_target("host"))
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal(p.shape, np.float32), rng.standard_normal(v.shape, np.float32)
    np.testing.assert_allclose(run(formed, [a, b])[0], (a @ b).transpose(1, 0, 2), rtol=1e-5,
                               atol=1e-5)
