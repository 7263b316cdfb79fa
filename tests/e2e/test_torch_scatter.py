"""PyTorch's scatters (index_add, scatter_add, scatter_reduce, scatter, index_put; torch-mlir
emits tm_tensor.scatter) at odd shapes with repeated indices, f32/f16/i32/i64, through the
scatter kernels that write at computed places (input/scatter.py), on local-task and on Vulkan
(marker ``vulkan``: lavapipe, or $PYREE_VULKAN_TARGET's device; its f16 and i64 scatters stay the
fold), against PyTorch. Float sums run in no fixed order: within n * eps * sum|terms| of float64; the rest exactly."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str
from tooling import require_module

torch = require_module("torch")
require_module("torch_mlir")

DTYPES = {"f32": torch.float32, "f16": torch.float16, "i32": torch.int32, "i64": torch.int64}
BACKENDS = [  # (target, device, the dtypes it scatters at computed places)
    pytest.param(("llvm-cpu", "local-task", set(DTYPES.values())), id="llvm-cpu"),
    pytest.param(("vulkan-spirv", "vulkan", {torch.float32, torch.int32}), id="vulkan",
                 marks=pytest.mark.vulkan),
]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


class _Wrap(torch.nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x):
        return self.f(x)


def run(backend, f, x: torch.Tensor) -> np.ndarray:
    """``f(x)`` compiled for the backend's target (whose kernels must hold a scatter at computed
    places where it has atomics for x's dtype) and run on its device."""
    from pyree.compiler import import_torch
    target, device, atomic = backend
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = import_torch(_Wrap(f), x)
    options = CompileOptions(target_backends=[target], vulkan_target=os.environ.get(
        "PYREE_VULKAN_TARGET", "cpu-lavapipe-linux"))
    kernels = compile_str(text, options, extra_args=["--compile-to=executable-sources"]).decode()
    assert ("scatter b" in kernels) == (x.dtype in atomic)
    return rt.load_module(compile_str(text, options), device=device).main(x.numpy()).to_host()


def tensor(shape, dtype: str, seed: int) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    if dtype.startswith("f"):
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(DTYPES[dtype])
    return torch.from_numpy(rng.integers(-30, 30, size=shape)).to(DTYPES[dtype])


def close_sum(got: np.ndarray, f, x: torch.Tensor, terms) -> None:
    """Exact for ints; floats within n * eps * sum|terms| of ``f`` in float64 (``terms(x)``: the
    same scatter of |x| with every update counted once, in float64)."""
    want = f(x).numpy()
    if not x.dtype.is_floating_point:
        np.testing.assert_array_equal(got, want)
        return
    exact = f(x.double()).numpy()
    absolute, count = terms(x.double().abs())
    eps = np.finfo(np.float16 if x.dtype == torch.float16 else np.float32).eps
    assert got.dtype == want.dtype
    assert np.all(np.abs(got.astype(np.float64) - exact) <= (count + 1) * eps * absolute)


@pytest.mark.parametrize("dtype", ["f32", "f16", "i64"])  # i32: test_scatter_atomics.py
def test_index_add_of_repeated_rows(backend, dtype):
    picks = np.random.default_rng(1).integers(0, 7, size=1001).tolist()
    rows = torch.tensor(picks)
    src = tensor((1001, 5), dtype, 2)
    # index tensors are built inside the traced function: the FX importer takes them as constants
    f = lambda t: t.index_add(0, torch.tensor(picks), src.to(t.dtype))  # noqa: E731
    x = tensor((7, 5), dtype, 3)
    count = torch.zeros(7, 5, dtype=torch.float64).index_add(0, rows, torch.ones(1001, 5,
                                                                              dtype=torch.float64))
    close_sum(run(backend, f, x), f, x, lambda a: (a.index_add(0, rows, src.double().abs()).numpy(),
                                          count.numpy()))


def test_index_add_on_the_cpu_sums_in_update_order():
    """llvm-cpu's index_add cuts its tiles along the rows' columns only (``Scatter.disjoint``):
    each place summed by one thread in update order, so the f32 sums equal numpy's unbuffered
    ``np.add.at`` bit for bit, NaN and inf included."""
    rng = np.random.default_rng(8)
    picks = rng.integers(0, 13, size=20011).tolist()
    src = torch.from_numpy(rng.standard_normal((20011, 67)).astype(np.float32) * 1e3)
    src[5, 3], src[77, 60], src[901, 0] = float("nan"), float("inf"), -0.0
    f = lambda t: t.index_add(0, torch.tensor(picks), src)  # noqa: E731
    x = torch.from_numpy(rng.standard_normal((13, 67)).astype(np.float32))
    want = x.numpy().copy()
    np.add.at(want, np.array(picks), src.numpy())
    got = run(("llvm-cpu", "local-task", set(DTYPES.values())), f, x)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("dtype", ["f32", "i64"])
def test_scatter_add_along_columns(backend, dtype):
    index = torch.tensor(np.random.default_rng(4).integers(0, 3, size=(6, 11)))
    f = lambda t: torch.zeros(6, 3, dtype=t.dtype).scatter_add(1, index, t)  # noqa: E731
    x = tensor((6, 11), dtype, 5)
    ones = torch.ones(6, 11, dtype=torch.float64)
    count = torch.zeros(6, 3, dtype=torch.float64).scatter_add(1, index, ones).numpy()
    close_sum(run(backend, f, x), f, x, lambda a: (
        torch.zeros(6, 3, dtype=torch.float64).scatter_add(1, index, a).numpy(), count))


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin"])
def test_scatter_reduce_of_repeated_places(backend, reduce):
    index = torch.tensor(np.random.default_rng(6).integers(0, 4, size=(5, 13)))
    f = lambda t: torch.full((5, 4), 0.75).scatter_reduce(1, index, t, reduce)  # noqa: E731
    x = tensor((5, 13), "f32", 7)
    got = run(backend, f, x)
    want = f(x).numpy()
    if reduce in ("amax", "amin"):
        np.testing.assert_array_equal(got, want)
    else:  # a few terms a place: within n roundings
        np.testing.assert_allclose(got, want, rtol=14 * np.finfo(np.float32).eps, atol=1e-6)


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_of_repeated_rows(backend, accumulate):
    values = tensor((6, 7), "f32", 8)
    f = lambda t: t.index_put((torch.tensor([5, 0, 5, 2, 5, 8]),), values,  # noqa: E731
                              accumulate=accumulate)
    x = tensor((9, 7), "f32", 9)
    got = run(backend, f, x)
    want = f(x).numpy()
    if accumulate:
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(np.float32).eps)
    else:  # torch leaves a repeated row's winner unspecified; pyree's is the last
        np.testing.assert_array_equal(np.delete(got, [5], 0), np.delete(want, [5], 0))
        np.testing.assert_array_equal(got[5], values[4].numpy())


def test_scatter_without_reduce_keeps_the_last_update(backend):
    index = torch.tensor(np.random.default_rng(10).integers(0, 4, size=(3, 9)))
    f = lambda t: torch.zeros(3, 4).scatter(1, index, t)  # noqa: E731
    x = tensor((3, 9), "f32", 11)
    got = run(backend, f, x)
    want = np.zeros((3, 4), np.float32)
    for i in range(3):
        for j in range(9):
            want[i, index[i, j]] = x[i, j]
    np.testing.assert_array_equal(got, want)


def _sources(backend, f, x: torch.Tensor) -> str:
    from pyree.compiler import import_torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = import_torch(_Wrap(f), x)
    options = CompileOptions(target_backends=[backend[0]], vulkan_target=os.environ.get(
        "PYREE_VULKAN_TARGET", "cpu-lavapipe-linux"))
    return compile_str(text, options, extra_args=["--compile-to=executable-sources"]).decode()


@pytest.mark.parametrize("case", ["fold", "index_put_2d", "index_put_2d_accumulate"])
def test_flattened_index_tensors_stay_unmaterialized(backend, case):
    """torch-mlir flattens index_put's updates and index tensors to one dim (F.fold's col2im,
    ``x[rows[:, None], cols[None, :]] = v``): the scatter loops over their unflattened shape
    (flow/scatter_loops.py), so index tensors computed from aranges and broadcasts (F.fold's)
    are recomputed at each place instead of written as int64 tensors; against PyTorch."""
    rows, cols = torch.tensor([0, 4, 2, 4, 6]), torch.tensor([1, 3, 4, 0, 5, 2])
    values = tensor((5, 6), "f32", 12)
    if case == "fold":
        def f(t):
            return torch.nn.functional.fold(t, (9, 11), 3, padding=1, stride=(1, 2))
        x = tensor((2, 3 * 9, 9 * 6), "f32", 13)
    else:
        accumulate = case.endswith("accumulate")

        def f(t):
            return t.index_put((rows[:, None], cols[None, :]), values, accumulate=accumulate)
        x = tensor((7, 6), "f32", 14)
    sources = _sources(backend, f, x)
    if case == "fold":  # no index tensor is written: every place comes from the loops
        assert "scatter b" in sources and "xi64>" not in sources, sources
    else:  # the index tensors are constants here, the updates' loops unflattened
        assert "_f32 loops(5, 6, 1, 1)" in sources, sources
    got, want = run(backend, f, x), f(x).numpy()
    if case == "index_put_2d":  # row 4 is written twice: pyree's winner is the last
        np.testing.assert_array_equal(got[[0, 1, 2, 3, 5, 6]], want[[0, 1, 2, 3, 5, 6]])
        np.testing.assert_array_equal(got[4, cols.numpy()], values[3].numpy())
    else:
        np.testing.assert_allclose(got, want, rtol=8 * np.finfo(np.float32).eps, atol=1e-6)


def test_max_unpool_puts_each_max_back_where_it_was(backend):
    def f(t):
        values, indices = torch.nn.functional.max_pool2d(t, 2, return_indices=True)
        return torch.nn.functional.max_unpool2d(values, indices, 2, output_size=t.shape[-2:])
    x = tensor((2, 3, 10, 7), "f32", 15)
    x[0, 0, 0, 0], x[1, 2, 4, 4] = float("nan"), float("inf")
    np.testing.assert_array_equal(run(backend, f, x), f(x).numpy())
