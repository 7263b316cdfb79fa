"""Sort, top-k, cumulative and scatter ops from PyTorch (torch-mlir emits tm_tensor.sort / scan /
scatter) at odd shapes, with ties, -0.0, length-1 lines, repeated and negative indices and NaNs,
against PyTorch on local-task."""

from __future__ import annotations

import warnings

import numpy as np
import pyree.runtime as rt
import pytest
from compiled import compiled
from pyree.compiler import CompileOptions, compile_str
from tooling import require_module

torch = require_module("torch")
require_module("torch_mlir")


class _Wrap(torch.nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x):
        return self.f(x)


def run(f, x: np.ndarray):
    from pyree.compiler import import_torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = import_torch(_Wrap(f), torch.from_numpy(x))
    out = rt.load_module(compiled(text, CompileOptions()), device="local-task").main(x)
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


def data(shape, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, size=shape).astype(np.float32) / 2  # many ties
    x.reshape(-1)[:: 5] = -0.0
    return x


SHAPES = [((9, 13), 1), ((13, 9), 0), ((1, 17), 1), ((6, 1), 1), ((3, 4, 11), 2), ((29,), 0)]


@pytest.mark.parametrize("shape, dim", SHAPES)
def test_cumsum_and_cumprod_match_torch(shape, dim):
    x = data(shape)
    got_sum, = run(lambda t: torch.cumsum(t, dim), x)
    np.testing.assert_allclose(got_sum, torch.cumsum(torch.from_numpy(x), dim).numpy(), rtol=1e-6)
    got_prod, = run(lambda t: torch.cumprod(t, dim), x)
    np.testing.assert_allclose(got_prod, torch.cumprod(torch.from_numpy(x), dim).numpy(), rtol=1e-6)


@pytest.mark.parametrize("shape, dim", [((3, 8192), 1), ((1000, 2), 0), ((2, 5, 840), 2)])
def test_long_scans_run_in_blocks(shape, dim):
    """Lines long enough to scan in blocks (each block's scan, the blocks' offsets, their sum;
    on the CPU only a line along an outer dim, a contiguous one is walked: line_scan.py):
    cumsum against float64 within a two-level sum's rounding of the running sums of |x|, cumprod
    of factors near 1, and NaN, +inf and -0.0 carried from where they stand to the line's end."""
    from pyree.compiler.input.sort_scan import scan_chunk
    assert scan_chunk(shape[dim])
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    got, = run(lambda t: torch.cumsum(t, dim), x)
    x64 = torch.from_numpy(x).double()
    bound = torch.cumsum(x64.abs(), dim).numpy() * 1e-6 + 1e-30
    assert np.all(np.abs(got - torch.cumsum(x64, dim).numpy()) <= bound)
    factors = (1 + rng.standard_normal(shape) * 1e-3).astype(np.float32)
    got, = run(lambda t: torch.cumprod(t, dim), factors)
    want = torch.cumprod(torch.from_numpy(factors).double(), dim).numpy()
    running = np.cumprod(factors, axis=dim, dtype=np.float32)  # one running product in f32
    assert np.abs(got - want).max() <= 2 * np.abs(running - want).max() + 1e-7
    special = np.moveaxis(x.copy(), dim, -1)
    special[..., :] = -0.0
    lines = special.reshape(-1, special.shape[-1])
    n = lines.shape[1]
    lines[0, n // 3] = np.nan
    lines[-1, n - n // 4] = np.inf
    lines[-1, 7] = 1.5
    special = np.moveaxis(special, -1, dim)
    got, = run(lambda t: torch.cumsum(t, dim), special)
    want = torch.cumsum(torch.from_numpy(special), dim).numpy()
    np.testing.assert_array_equal(got, want)  # NaN and +inf where torch has them
    # a line of -0.0 sums to -0.0 in the op's reference loop (out[0] = x[0]), as numpy's does;
    # PyTorch's CPU kernel starts from +0.0
    assert np.array_equal(np.signbit(got), np.signbit(np.cumsum(special, axis=dim)))


def test_a_scan_over_a_run_time_length():
    """cumsum along a dim whose length is known only at run time (a prompt's positions): one
    module at lengths 2, 7 and 40, the scan's last value included (its accumulator result)."""
    from pyree.compiler import import_torch

    class Positions(torch.nn.Module):
        def forward(self, mask):
            positions = mask.cumsum(-1)
            return positions, positions[:, -1]
    seq = torch.export.Dim("seq", min=2, max=64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = import_torch(Positions(), torch.ones(2, 5, dtype=torch.int64),
                            dynamic_shapes={"mask": {1: seq}})
    main = rt.load_module(compile_str(text), device="local-task").main
    rng = np.random.default_rng(4)
    for n in (2, 7, 40):
        mask = rng.integers(0, 2, (2, n)).astype(np.int64)
        got = [np.asarray(o.to_host()) for o in main(mask)]
        np.testing.assert_array_equal(got[0], np.cumsum(mask, -1))
        np.testing.assert_array_equal(got[1], np.cumsum(mask, -1)[:, -1])


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("shape, dim", SHAPES)
def test_sort_is_torchs_stable_sort(shape, dim, descending):
    x = data(shape, seed=1)
    values, indices = run(lambda t: torch.sort(t, dim, descending=descending), x)
    want = torch.sort(torch.from_numpy(x), stable=True, dim=dim, descending=descending)
    np.testing.assert_array_equal(values, want.values.numpy())
    np.testing.assert_array_equal(indices, want.indices.numpy())


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("shape, dim", [s for s in SHAPES if s[0][s[1]] >= 3])
def test_topk_values_and_their_indices(shape, dim, k):
    x = data(shape, seed=2)
    values, indices = run(lambda t: torch.topk(t, k, dim), x)
    np.testing.assert_array_equal(values, torch.topk(torch.from_numpy(x), k, dim).values.numpy())
    np.testing.assert_array_equal(np.take_along_axis(x, indices, dim), values)  # ties: any index


@pytest.mark.parametrize("shape, dim, k, largest", [((3, 12000), 1, 7, True), ((9600, 2), 0, 5, False),
                                                    ((2, 3, 8400), 2, 40, True),
                                                    ((1, 262144), 1, 1000, True)])
def test_topk_over_long_lines_in_chunks(shape, dim, k, largest):
    """Lines long enough that top-k runs in two passes (each chunk's top k, counted or, for
    the longest, merged; then theirs): the values and, with many ties, the same indices as one
    pass takes (the lowest first, as PyTorch's on this CPU), with infinities and -0.0."""
    from pyree.compiler.input.sort_scan import topk_plan
    assert topk_plan(shape[dim], k, ordered=True, lines=int(np.prod(shape)) // shape[dim]).chunk
    x = data(shape, seed=6)
    x.reshape(-1)[3::97] = np.inf
    x.reshape(-1)[5::89] = -np.inf
    values, indices = run(lambda t: torch.topk(t, k, dim, largest=largest), x)
    want = torch.topk(torch.from_numpy(x), k, dim, largest=largest)
    np.testing.assert_array_equal(values, want.values.numpy())
    np.testing.assert_array_equal(np.take_along_axis(x, indices, dim), values)
    lines = np.moveaxis(indices, dim, -1).reshape(-1, k)
    line_values = np.moveaxis(values, dim, -1).reshape(-1, k)
    for idx, vals in zip(lines, line_values):  # ties in index order
        for a in range(k - 1):
            if vals[a] == vals[a + 1]:
                assert idx[a] < idx[a + 1]


def test_topk_compares_only_within_chunks():
    """torch.topk reaches the compiler as a whole sort whose results are only sliced to their
    first k: it is lowered as a top-k, in chunks, so that no pass compares every pair of a
    32000-long line (a billion comparisons: 1.7 ms on an H200)."""
    from pyree.compiler import import_torch
    from pyree.compiler.input import import_mlir
    from pyree.compiler.tensor_program import Generic
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = import_torch(_Wrap(lambda t: torch.topk(t, 50, 1)), torch.zeros(2, 32000))
    assert "tm_tensor.sort" in text
    (function,) = import_mlir(text).functions
    ranges = [op.loop_ranges for op in function.ops if isinstance(op, Generic)]
    pairs = [np.prod(r) for r in ranges]  # comparisons of a counting pass
    assert max(pairs) <= 2 * 64 * 500 * 500 and (2, 64, 500, 500) in ranges, ranges


SORT_SLICED_DYNAMIC = """
func.func @top3(%a: tensor<4x?xf32>) -> tensor<4x3xf32> {
  %r = tm_tensor.sort dimension(1) outs(%a : tensor<4x?xf32>) {
  ^bb0(%x: f32, %y: f32):
    %c = arith.cmpf ogt, %x, %y : f32
    tm_tensor.yield %c : i1
  } -> tensor<4x?xf32>
  %s = tensor.extract_slice %r[0, 0] [4, 3] [1, 1] : tensor<4x?xf32> to tensor<4x3xf32>
  return %s : tensor<4x3xf32>
}"""


def test_a_sort_of_a_run_time_length_sliced_to_its_first_k_stays_a_sort():
    """Only a line of known length becomes a top-k: one of run-time length keeps its sort (and
    the slice's check of the length)."""
    module = rt.load_module(compile_str(SORT_SLICED_DYNAMIC), device="local-task")
    for n in (3, 11, 50):
        x = np.random.default_rng(n).standard_normal((4, n)).astype(np.float32)
        np.testing.assert_array_equal(module.top3(x).to_host(), -np.sort(-x, axis=1)[:, :3])


def test_sort_with_nans_is_a_permutation():
    """torch-mlir's comparator leaves NaN unordered; the result still holds every input value
    exactly once (the positions are a permutation), never a value that was not there."""
    x = data((7, 11), seed=3)
    x[2, 3] = x[4, 0] = x[4, 10] = np.nan
    values, indices = run(lambda t: torch.sort(t, 1), x)
    for row in range(7):
        np.testing.assert_array_equal(np.sort(indices[row]), np.arange(11))
        np.testing.assert_array_equal(values[row], x[row, indices[row]])
        finite = values[row][~np.isnan(values[row])]
        np.testing.assert_array_equal(np.sort(finite), np.sort(x[row][~np.isnan(x[row])]))


ROWS = [4, 0, 4, 8, 1]  # repeated (torch-mlir passes negative indices through unwrapped)


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_rows(accumulate):
    x = data((9, 13), seed=4)
    values = data((5, 13), seed=5)
    # index tensors are built inside the traced function: the FX importer takes them as constants
    f = lambda t: t.index_put((torch.tensor(ROWS),), torch.tensor(values),  # noqa: E731
                              accumulate=accumulate)
    got, = run(f, x)
    want = f(torch.from_numpy(x)).numpy()
    if accumulate:
        np.testing.assert_allclose(got, want, rtol=1e-6)
    else:  # torch leaves the winner of a repeated index unspecified; pyree's is the last
        np.testing.assert_array_equal(np.delete(got, [4], 0), np.delete(want, [4], 0))
        np.testing.assert_array_equal(got[4], values[2])


@pytest.mark.parametrize("reduce", ["sum", "amax", "amin", "prod"])
def test_scatter_reduce_along_columns(reduce):
    x = data((6, 11), seed=6)
    index = np.random.default_rng(7).integers(0, 5, size=(6, 11)).tolist()
    f = lambda t: torch.full((6, 5), 0.5).scatter_reduce(1, torch.tensor(index), t, reduce)  # noqa: E731
    got, = run(f, x)
    np.testing.assert_allclose(got, f(torch.from_numpy(x)).numpy(), rtol=1e-6)


def test_index_add_and_scatter_add():
    x = data((7, 10), seed=8)
    f = lambda t: t.index_add(0, torch.tensor([6, 0, 6, 3]), torch.ones(4, 10)) + torch.zeros(  # noqa: E731
        7, 10).scatter_add(
            0, torch.tensor([[1, 2, 3, 4, 5, 6, 0, 1, 2, 3]] * 7), t)
    got, = run(f, x)
    np.testing.assert_allclose(got, f(torch.from_numpy(x)).numpy(), rtol=1e-6)


def test_a_long_scan_whose_combiner_ignores_the_element_stays_exact():
    """``prev + 0.0``: one op of the running value and a constant, not of the element, so no
    associative fold of the line; blocking it would start each block from the fold's identity.
    Every element of the result is the line's first (the reference loop's answer)."""
    n = 1024
    text = f"""func.func @f(%x: tensor<3x{n}xf32>, %out: tensor<3x{n}xf32>, %acc: tensor<3xf32>) -> tensor<3x{n}xf32> {{
  %zero = arith.constant 0.0 : f32
  %r:2 = iree_linalg_ext.scan dimension(1) inclusive(true) ins(%x : tensor<3x{n}xf32>) outs(%out, %acc : tensor<3x{n}xf32>, tensor<3xf32>) {{
  ^bb0(%p: f32, %e: f32):
    %s = arith.addf %p, %zero : f32
    iree_linalg_ext.yield %s : f32
  }} -> tensor<3x{n}xf32>, tensor<3xf32>
  return %r#0 : tensor<3x{n}xf32>
}}"""
    x = np.random.default_rng(6).standard_normal((3, n)).astype(np.float32)
    out = rt.load_module(compile_str(text), device="local-task")["f"](
        x, np.zeros_like(x), np.zeros(3, np.float32)).to_host()
    np.testing.assert_array_equal(out, np.repeat(x[:, :1], n, axis=1))
