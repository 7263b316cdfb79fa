"""Scatter at computed places (``kernel.Scatter``, input/scatter.py), through the public API on
local-task and local-sync, and on Vulkan (marker ``vulkan``: lavapipe, or $PYREE_VULKAN_TARGET's
device), whose atomics take f32 and i32 and which keeps the fold for other dtypes: IREE's ``iree_linalg_ext.scatter`` with every combine the atomic
kernel takes, each dtype, 1 to 50001 updates, repeated, negative and out-of-range indices, an
index depth of 2 (scatter_nd), NaN and infinities, and several threads calling one module; against
numpy. Float sums and products are summed in no fixed order, so they are checked against float64
within n * eps * sum|terms| per element (n the terms there); everything else bit for bit."""

from __future__ import annotations

import os
import threading

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str

MLIR_TYPES = {"f32": "f32", "f16": "f16", "f64": "f64", "i32": "i32", "i64": "i64", "i8": "i8"}
NUMPY = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i32": np.int32,
         "i64": np.int64, "i8": np.int8}
REGION = {  # the combine, as the region spells it (update %u, current %o)
    ("add", "f"): "arith.addf %o, %u", ("add", "i"): "arith.addi %u, %o",
    ("mul", "f"): "arith.mulf %u, %o", ("mul", "i"): "arith.muli %o, %u",
    ("max", "f"): "arith.maximumf %u, %o", ("max", "i"): "arith.maxsi %u, %o",
    ("min", "f"): "arith.minimumf %o, %u", ("min", "i"): "arith.minsi %o, %u",
    ("or", "i"): "arith.ori %u, %o", ("xor", "i"): "arith.xori %o, %u",
    ("set", "f"): None, ("set", "i"): None,
}
UFUNC = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
         "or": np.bitwise_or, "xor": np.bitwise_xor}


def tensor(shape, dtype: str) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{dtype}>"


def scatter_mlir(orig, upd, idx, dtype: str, op: str, dimension_map=(0,), unique=False,
                 idx_type="i64") -> str:
    region = REGION[op, "f" if dtype.startswith("f") else "i"]
    o, u, i = tensor(orig, dtype), tensor(upd, dtype), tensor(idx, idx_type)
    body = (f"%s = {region} : {dtype}\n    iree_linalg_ext.yield %s : {dtype}" if region
            else f"iree_linalg_ext.yield %u : {dtype}")
    return f"""func.func @main(%orig: {o}, %upd: {u}, %idx: {i}) -> {o} {{
  %r = iree_linalg_ext.scatter dimension_map = [{', '.join(map(str, dimension_map))}] unique_indices({'true' if unique else 'false'}) ins(%upd, %idx : {u}, {i}) outs(%orig : {o}) {{
  ^bb0(%u: {dtype}, %o: {dtype}):
    {body}
  }} -> {o}
  return %r : {o}
}}"""


def places(orig_shape, upd, idx, dimension_map):
    """Each update element's target coordinates (one array per dim of the original) and
    whether it is inside."""
    batch = idx.ndim - 1
    m = upd.ndim - batch
    offset = len(orig_shape) - m
    grid = np.indices(upd.shape)
    coords = []
    for k in range(len(orig_shape)):
        c = grid[batch + k - offset].astype(np.int64) if k >= offset else np.zeros(upd.shape, np.int64)
        for i, d in enumerate(dimension_map):
            if d == k:
                c = c + idx[..., i].astype(np.int64).reshape(idx.shape[:batch] + (1,) * m)
        coords.append(np.broadcast_to(c, upd.shape))
    inside = np.ones(upd.shape, bool)
    for c, n in zip(coords, orig_shape):
        inside &= (c >= 0) & (c < n)
    return coords, inside


def check(got, orig, upd, idx, op, dimension_map=(0,)):
    coords, inside = places(orig.shape, upd, idx, dimension_map)
    at = tuple(c[inside] for c in coords)
    if op == "set":
        want = orig.copy()
        want[at] = upd[inside]  # numpy's assignment: the last of a repeated place wins
        np.testing.assert_array_equal(got, want)
        return
    if orig.dtype.kind == "f" and op in ("add", "mul"):
        want = orig.astype(np.float64)
        with np.errstate(invalid="ignore"):  # inf + -inf
            UFUNC[op].at(want, at, upd[inside].astype(np.float64))
        terms = np.abs(orig).astype(np.float64)
        counts = np.ones(orig.shape)
        np.add.at(counts, at, 1)
        if op == "add":
            np.add.at(terms, at, np.abs(upd[inside]).astype(np.float64))
        else:
            terms = np.abs(want)
        bound = counts * np.finfo(orig.dtype).eps * terms
        finite = np.isfinite(want)
        with np.errstate(invalid="ignore"):
            assert np.all(np.abs(got[finite].astype(np.float64) - want[finite]) <= bound[finite])
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want.astype(orig.dtype)))
        np.testing.assert_array_equal(got[~finite], want[~finite].astype(orig.dtype))
        return
    want = orig.copy()
    with np.errstate(all="ignore"):
        UFUNC[op].at(want, at, upd[inside])
    np.testing.assert_array_equal(got, want)


def data(shape, dtype: str, rng) -> np.ndarray:
    if dtype.startswith("f"):
        return (rng.standard_normal(shape) * 3).astype(NUMPY[dtype])
    return rng.integers(-40, 40, size=shape).astype(NUMPY[dtype])


BACKENDS = [  # (target, devices)
    pytest.param(("llvm-cpu", ("local-task", "local-sync")), id="llvm-cpu"),
    pytest.param(("vulkan-spirv", ("vulkan",)), id="vulkan", marks=pytest.mark.vulkan),
]
# The dtypes whose scatters vulkan-spirv writes with 32-bit atomics; the others stay the fold.
VULKAN_ATOMIC = {"f32", "i32"}


def options(*targets: str) -> CompileOptions:
    return CompileOptions(target_backends=list(targets), vulkan_target=os.environ.get(
        "PYREE_VULKAN_TARGET", "cpu-lavapipe-linux"))


def compiled(text: str, target="llvm-cpu") -> bytes:
    return compile_str(text, options(target))


def kernels_text(text: str, *targets: str) -> str:
    return compile_str(text, options(*(targets or ("llvm-cpu",))),
                       extra_args=["--compile-to=executable-sources"]).decode()


def atomic(target: str, dtype: str) -> bool:
    """Whether ``target`` writes a scatter of ``dtype`` at computed places."""
    return target != "vulkan-spirv" or dtype in VULKAN_ATOMIC


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


def run(backend, text: str, *args) -> list[np.ndarray]:
    """``text``'s main on each of the backend's devices."""
    target, devices = backend
    vmfb = compiled(text, target)
    return [rt.load_module(vmfb, device=d).main(*args).to_host() for d in devices]


CASES = [("f32", "add"), ("f16", "add"), ("f64", "add"), ("i32", "add"), ("i64", "add"),
         ("i8", "add"), ("f32", "mul"), ("i32", "mul"), ("f32", "max"), ("f16", "min"),
         ("i64", "max"), ("i32", "min"), ("i32", "or"), ("i8", "xor")]


@pytest.mark.parametrize("dtype, op", CASES + [("f32", "min"), ("i32", "max"), ("i32", "xor"),
                                               ("f32", "set"), ("i64", "set")])
def test_scatter_rows_with_repeats_and_outside_indices(backend, dtype, op):
    rng = np.random.default_rng(sum(map(ord, dtype + op)))
    rows, cols, updates = 13, 7, 1000
    text = scatter_mlir((rows, cols), (updates, cols), (updates, 1), dtype, op)
    # at computed places where the target has the atomics, else the fold
    assert ("scatter b" in kernels_text(text, backend[0])) == atomic(backend[0], dtype)
    orig, upd = data((rows, cols), dtype, rng), data((updates, cols), dtype, rng)
    if op == "mul":
        upd = (np.sign(upd) + (upd == 0)).astype(upd.dtype)  # products of +-1 stay finite
    idx = rng.integers(-3, rows + 3, size=(updates, 1)).astype(np.int64)
    for got in run(backend, text, orig, upd, idx):
        check(got, orig, upd, idx, op)


@pytest.mark.parametrize("updates", [1, 7, 50001])
def test_scatter_of_many_or_few_updates(backend, updates):
    rng = np.random.default_rng(updates)
    n = 1000
    text = scatter_mlir((n, 3), (updates, 3), (updates, 1), "f32", "add", idx_type="i32")
    orig, upd = data((n, 3), "f32", rng), data((updates, 3), "f32", rng)
    idx = rng.integers(0, n, size=(updates, 1)).astype(np.int32)
    for got in run(backend, text, orig, upd, idx):
        check(got, orig, upd, idx, "add")


@pytest.mark.parametrize("dtype, op", [("f32", "add"), ("f32", "max"), ("i32", "add"),
                                       ("i32", "min")])
def test_heavy_contention_on_three_rows(backend, dtype, op):
    """50001 updates into 6 places: a compare-exchange loop retries, and still adds each once."""
    rng = np.random.default_rng(3)
    updates = 50001
    text = scatter_mlir((3, 2), (updates, 2), (updates, 1), dtype, op)
    orig, upd = data((3, 2), dtype, rng), data((updates, 2), dtype, rng)
    idx = rng.integers(0, 3, size=(updates, 1)).astype(np.int64)
    for got in run(backend, text, orig, upd, idx):
        check(got, orig, upd, idx, op)


@pytest.mark.parametrize("backend", BACKENDS[1:])  # llvm-cpu: the cases above
def test_index_add_of_the_benchmark_shape(backend):
    """bench/kernels/cases.py's "index_add rows f32 10000x64 from 50000", which the fold ran in
    (output) x (updates) steps."""
    rng = np.random.default_rng(4)
    text = scatter_mlir((10000, 64), (50000, 64), (50000, 1), "f32", "add")
    orig, upd = data((10000, 64), "f32", rng), data((50000, 64), "f32", rng)
    idx = rng.integers(0, 10000, size=(50000, 1)).astype(np.int64)
    for got in run(backend, text, orig, upd, idx):
        check(got, orig, upd, idx, "add")


@pytest.mark.parametrize("op", ["add", "set"])
def test_scatter_of_no_updates_or_into_nothing(backend, op):
    rng = np.random.default_rng(17)
    x = data((5, 3), "f32", rng)
    text = scatter_mlir((5, 3), (0, 3), (0, 1), "f32", op)
    for got in run(backend, text, x, np.zeros((0, 3), np.float32), np.zeros((0, 1), np.int64)):
        np.testing.assert_array_equal(got, x)
    text = scatter_mlir((0, 3), (4, 3), (4, 1), "f32", op)
    for got in run(backend, text, np.zeros((0, 3), np.float32), data((4, 3), "f32", rng),
                   np.zeros((4, 1), np.int64)):
        assert got.shape == (0, 3)


def test_scatter_nd_with_index_depth_two_and_slices(backend):
    """indices [U, 2] on dims (2, 0) of a 3-d original, each update a slice along dim 1 shorter
    than it (the slice's place is the original's own, from 0)."""
    rng = np.random.default_rng(11)
    orig_shape, upd_shape, idx_shape = (6, 5, 9), (40, 4), (40, 2)
    text = scatter_mlir(orig_shape, upd_shape, idx_shape, "f32", "add", dimension_map=(2, 0))
    assert "scatter b" in kernels_text(text, backend[0])
    orig, upd = data(orig_shape, "f32", rng), data(upd_shape, "f32", rng)
    idx = np.stack([rng.integers(-1, 10, 40), rng.integers(0, 7, 40)], axis=1).astype(np.int64)
    for got in run(backend, text, orig, upd, idx):
        check(got, orig, upd, idx, "add", dimension_map=(2, 0))


@pytest.mark.parametrize("op", ["add", "mul", "max", "min"])
def test_scatter_of_nan_and_infinities(backend, op):
    rng = np.random.default_rng(12)
    text = scatter_mlir((5, 4), (30, 4), (30, 1), "f32", op)
    orig, upd = data((5, 4), "f32", rng), data((30, 4), "f32", rng)
    idx = rng.integers(0, 5, size=(30, 1)).astype(np.int64)
    upd[0, 0], upd[1, 1], upd[2, 1], orig[3, 2] = np.nan, np.inf, -np.inf, np.inf
    idx[2, 0] = idx[1, 0]  # inf + -inf at one place: NaN (inf * -inf: -inf)
    upd[3, 2] = -0.0
    for got in run(backend, text, orig, upd, idx):
        check(got, orig, upd, idx, op)
        assert np.isnan(got[idx[0, 0], 0])


@pytest.mark.parametrize("unique", [False, True])
def test_plain_set_keeps_the_last_update_of_a_repeated_place(backend, unique):
    """Two passes (the winner of each place, then the winners' stores) keep the fold's answer
    whatever the threads do, even where the op declares its indices unique and they are not
    (torch-mlir's index_put)."""
    rng = np.random.default_rng(13)
    rows, updates = 300, 20000
    text = scatter_mlir((rows, 3), (updates, 3), (updates, 1), "i32", "set", unique=unique)
    assert kernels_text(text, backend[0]).count("scatter b") == 2
    orig, upd = data((rows, 3), "i32", rng), data((updates, 3), "i32", rng)
    idx = rng.integers(-2, rows + 2, size=(updates, 1)).astype(np.int64)
    module = rt.load_module(compiled(text, backend[0]), device=backend[1][0])
    for _ in range(3):
        check(module.main(orig, upd, idx).to_host(), orig, upd, idx, "set")


@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_plain_set_of_slices_with_index_depth_two(backend, dtype):
    rng = np.random.default_rng(16)
    text = scatter_mlir((7, 4, 5), (33, 3), (33, 2), dtype, "set", dimension_map=(0, 2),
                        idx_type="i32")
    orig, upd = data((7, 4, 5), dtype, rng), data((33, 3), dtype, rng)
    idx = np.stack([rng.integers(0, 7, 33), rng.integers(-1, 6, 33)], axis=1).astype(np.int32)
    for got in run(backend, text, orig, upd, idx):
        check(got, orig, upd, idx, "set", dimension_map=(0, 2))


def test_a_region_that_is_no_single_combine_stays_the_fold():
    """``o * 0.5 + u`` depends on the order of updates: the fold keeps it exact."""
    text = scatter_mlir((4, 3), (9, 3), (9, 1), "f32", "add").replace(
        "%s = arith.addf %o, %u : f32",
        "%h = arith.constant 0.5 : f32\n    %p = arith.mulf %o, %h : f32\n"
        "    %s = arith.addf %p, %u : f32")
    assert "scatter b" not in kernels_text(text)
    rng = np.random.default_rng(14)
    orig, upd = data((4, 3), "f32", rng), data((9, 3), "f32", rng)
    idx = rng.integers(0, 4, size=(9, 1)).astype(np.int64)
    got = rt.load_module(compiled(text), device="local-task").main(orig, upd, idx).to_host()
    want = orig.copy()
    for u in range(9):
        want[idx[u, 0]] = want[idx[u, 0]] * np.float32(0.5) + upd[u]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["f16", "i64", "f64", "i8"])
def test_vulkan_without_atomics_for_a_dtype_keeps_the_fold_on_every_target(dtype):
    """A module's scatter is lowered once for all its targets: what vulkan-spirv cannot combine
    atomically is the fold on llvm-cpu too, and what it can is the scatter kernel on both."""
    text = scatter_mlir((13, 7), (100, 7), (100, 1), dtype, "add")
    assert "scatter b" not in kernels_text(text, "vulkan-spirv")
    assert "scatter b" not in kernels_text(text, "llvm-cpu", "vulkan-spirv")
    f32 = scatter_mlir((13, 7), (100, 7), (100, 1), "f32", "add")
    assert "scatter b" in kernels_text(f32, "llvm-cpu", "vulkan-spirv")


def test_threads_calling_one_module_get_their_own_sums():
    rng = np.random.default_rng(15)
    text = scatter_mlir((200, 8), (5000, 8), (5000, 1), "i64", "add")
    module = rt.load_module(compiled(text), device="local-task")
    inputs = [(data((200, 8), "i64", rng), data((5000, 8), "i64", rng),
               rng.integers(0, 200, size=(5000, 1)).astype(np.int64)) for _ in range(4)]
    results: dict[int, np.ndarray] = {}

    def call(k: int) -> None:
        for _ in range(3):
            results[k] = module.main(*inputs[k]).to_host()

    threads = [threading.Thread(target=call, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, (orig, upd, idx) in enumerate(inputs):
        check(results[k], orig, upd, idx, "add")
