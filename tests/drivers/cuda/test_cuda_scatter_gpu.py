"""On an NVIDIA GPU: scatters at computed places (``kernel.Scatter``), whose threads combine into
shared places with atomics: every combine and dtype of tests/e2e/test_scatter_atomics.py, heavy
contention (50001 updates into 3 rows), a plain set whose repeated places keep the last update
on every run, and threads calling one module; compiled here for sm_90 (the host installs the
compiler), checked against numpy as the CPU test checks local-task."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e"))
from test_scatter_atomics import CASES, check, data, scatter_mlir  # noqa: E402

pytestmark = pytest.mark.cuda


def load(text: str):
    import pyree.runtime as rt
    from pyree.compiler import CompileOptions, compile_str
    return rt.load_module(compile_str(text, CompileOptions(target_backends=["cuda"],
                                                           cuda_target="sm_90")), device="cuda")


@pytest.mark.parametrize("dtype, op", CASES)
def test_scatter_on_cuda(dtype, op):
    rng = np.random.default_rng(sum(map(ord, dtype + op)))
    rows, cols, updates = 13, 7, 20000
    module = load(scatter_mlir((rows, cols), (updates, cols), (updates, 1), dtype, op))
    orig, upd = data((rows, cols), dtype, rng), data((updates, cols), dtype, rng)
    if op == "mul":
        upd = (np.sign(upd) + (upd == 0)).astype(upd.dtype)
    idx = rng.integers(-3, rows + 3, size=(updates, 1)).astype(np.int64)
    for _ in range(2):
        check(module.main(orig, upd, idx).to_host(), orig, upd, idx, op)


@pytest.mark.parametrize("dtype", ["f32", "f16", "f64", "i64"])
def test_heavy_contention_on_three_rows(dtype):
    rng = np.random.default_rng(3)
    updates = 50001
    module = load(scatter_mlir((3, 2), (updates, 2), (updates, 1), dtype, "add"))
    orig, upd = data((3, 2), dtype, rng), data((updates, 2), dtype, rng)
    if dtype == "f16":
        upd = (upd / 64).astype(np.float16)  # sums stay far from f16's range
    idx = rng.integers(0, 3, size=(updates, 1)).astype(np.int64)
    check(module.main(orig, upd, idx).to_host(), orig, upd, idx, "add")


def test_index_add_of_the_benchmark_shape():
    rng = np.random.default_rng(4)
    module = load(scatter_mlir((10000, 64), (50000, 64), (50000, 1), "f32", "add"))
    orig, upd = data((10000, 64), "f32", rng), data((50000, 64), "f32", rng)
    idx = rng.integers(0, 10000, size=(50000, 1)).astype(np.int64)
    check(module.main(orig, upd, idx).to_host(), orig, upd, idx, "add")


def test_plain_set_keeps_the_last_update_on_every_run():
    rng = np.random.default_rng(5)
    rows, updates = 64, 100000
    module = load(scatter_mlir((rows, 4), (updates, 4), (updates, 1), "f32", "set", unique=True))
    orig, upd = data((rows, 4), "f32", rng), data((updates, 4), "f32", rng)
    idx = rng.integers(-1, rows + 1, size=(updates, 1)).astype(np.int64)
    for _ in range(5):
        check(module.main(orig, upd, idx).to_host(), orig, upd, idx, "set")


def test_threads_calling_one_module():
    rng = np.random.default_rng(6)
    module = load(scatter_mlir((200, 8), (30000, 8), (30000, 1), "i32", "add"))
    inputs = [(data((200, 8), "i32", rng), data((30000, 8), "i32", rng),
               rng.integers(0, 200, size=(30000, 1)).astype(np.int64)) for _ in range(4)]
    results: dict[int, list] = {k: [] for k in range(4)}

    def call(k: int) -> None:
        for _ in range(5):
            results[k].append(module.main(*inputs[k]).to_host())

    threads = [threading.Thread(target=call, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, (orig, upd, idx) in enumerate(inputs):
        assert len(results[k]) == 5
        for got in results[k]:
            check(got, orig, upd, idx, "add")
