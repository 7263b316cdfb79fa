"""llvm-cpu's scatter template (``kernel.Scatter``): every combine of tests/scatter_cases.py on
few updates run by one thread (bit for bit against ``kernel.evaluate``, whose order it keeps);
on 20000 updates into 11 rows whose columns are disjoint, cut along the columns only and run by
four threads at once with plain read-modify-writes (bit for bit against the reference order,
float sums too); and, where no loop is disjoint and the scatter is too large for one tile, over
many workgroups with atomic combines (order-free combines bit for bit, float sums within
n * eps * sum|terms|). Whether two threads ever meet at one place depends on the machine's
load; that every combine is one atomic instruction is checked in the code itself."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]
from llvmcpu_harness import Compiled  # noqa: E402
from pyree.compiler.codegen.llvm_cpu import scatter  # noqa: E402
from pyree.compiler.codegen.llvm_cpu.lowering import lower_kernels  # noqa: E402
from pyree.compiler.codegen.llvm_cpu.targets import resolve_variants  # noqa: E402
from pyree.compiler.kernel import evaluate  # noqa: E402
from scatter_cases import CASES, N, scatter_kernel, values  # noqa: E402


def buffers(kernel, rng):
    dtype, updates = kernel.bindings[0].dtype, kernel.bindings[0].shape[0]
    rows = rng.integers(-2, N + 2, size=(updates, 1)).astype(np.int32)  # repeats, some outside
    upd, start = values(dtype, kernel.bindings[0].shape, rng), values(dtype, kernel.bindings[2].shape, rng)
    if kernel.results[0].value.op == "mul" and dtype.startswith("f"):
        upd = (np.sign(upd) + (upd == 0)).astype(upd.dtype)  # long products stay finite
    return [upd, rows, start, start.copy()]


@pytest.mark.parametrize("dtype, op", CASES)
def test_scatter_keeps_the_reference_order_on_one_thread(dtype, op):
    kernel = scatter_kernel(dtype, op, first=op in ("max", "xor"))
    got = buffers(kernel, np.random.default_rng(3))
    want = [b.copy() for b in got]
    evaluate(kernel, want)
    assert Compiled([kernel]).call(0, got) == 0
    np.testing.assert_array_equal(got[3].view(np.uint8), want[3].view(np.uint8))


@pytest.mark.parametrize("dtype, op", [c for c in CASES if c[0] not in ("f16", "bf16")])
def test_scatter_of_many_updates_on_four_threads(dtype, op, monkeypatch):
    monkeypatch.setattr(scatter, "ONE_TILE_POINTS", 0)  # as if larger: atomics over many tiles
    kernel = scatter_kernel(dtype, op, updates=20000, disjoint=False)
    compiled = Compiled([kernel])
    assert compiled.workgroup_count(0) >= 4
    got = buffers(kernel, np.random.default_rng(4))
    upd, rows, start = got[0], got[1][:, 0], got[2]
    assert compiled.call(0, got, threads=4) == 0
    inside = (rows >= 0) & (rows < N)
    if dtype.startswith("f") and op in ("add", "mul"):
        ufunc = np.add if op == "add" else np.multiply
        want = start.astype(np.float64)
        ufunc.at(want, rows[inside], upd[inside].astype(np.float64))
        terms = np.abs(start).astype(np.float64)
        np.add.at(terms, rows[inside], np.abs(upd[inside]).astype(np.float64))
        count = np.bincount(rows[inside], minlength=N)[:, None] + 1
        bound = count * np.finfo(upd.dtype).eps * (terms if op == "add" else np.abs(want))
        assert np.all(np.abs(got[3] - want) <= bound)
        return
    ufunc = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
             "and": np.logical_and if dtype == "i1" else np.bitwise_and,
             "or": np.logical_or if dtype == "i1" else np.bitwise_or, "xor": np.bitwise_xor}[op]
    want = start.copy()
    with np.errstate(all="ignore"):
        ufunc.at(want, rows[inside], upd[inside])
    np.testing.assert_array_equal(got[3], want)


@pytest.mark.parametrize("dtype, op", [("f32", "add"), ("bf16", "add"), ("f32", "max"),
                                       ("i32", "mul"), ("i1", "or")])
@pytest.mark.parametrize("columns", [64, 37])
def test_disjoint_columns_are_cut_without_atomics(dtype, op, columns):
    """index_add's form (a row per index, the columns the loop itself): tiles cut along the
    columns only, each place combined by one thread in update order, bit for bit against the
    reference order even for float sums, with no atomic instruction in the code."""
    kernel = scatter_kernel(dtype, op, updates=2000, columns=columns)
    compiled = Compiled([kernel])
    assert compiled.workgroup_count(0) >= 4
    got = buffers(kernel, np.random.default_rng(6))
    want = [b.copy() for b in got]
    evaluate(kernel, want)
    assert compiled.call(0, got, threads=4) == 0
    np.testing.assert_array_equal(got[3].view(np.uint8), want[3].view(np.uint8))
    text = str(lower_kernels([kernel], resolve_variants("", "", ["x86-64"])[0])[0])
    assert "atomicrmw" not in text and "cmpxchg " not in text


def test_a_small_scatter_is_one_tile_in_update_order():
    """No disjoint loop (``d + 0``) and few updates: one tile, plain combines, the reference's
    order bit for bit."""
    kernel = scatter_kernel("f32", "add", updates=20000, disjoint=False)
    compiled = Compiled([kernel])
    assert compiled.workgroup_count(0) == 1
    got = buffers(kernel, np.random.default_rng(7))
    want = [b.copy() for b in got]
    evaluate(kernel, want)
    assert compiled.call(0, got) == 0
    np.testing.assert_array_equal(got[3], want[3])


def test_scatter_combines_are_atomic_instructions(monkeypatch):
    """Each update is one ``atomicrmw`` where LLVM has the op, else a compare-exchange loop."""
    monkeypatch.setattr(scatter, "ONE_TILE_POINTS", 0)
    target = resolve_variants("", "", ["x86-64"])[0]
    for (dtype, op), atomic in {("f32", "add"): "atomicrmw fadd", ("i32", "max"): "atomicrmw max",
                                ("ui8", "min"): "atomicrmw umin", ("f32", "mul"): "cmpxchg",
                                ("bf16", "add"): "cmpxchg", ("i1", "or"): "cmpxchg"}.items():
        module, _ = lower_kernels([scatter_kernel(dtype, op, disjoint=False)], target)
        text = str(module)
        assert atomic in text and text.count("atomicrmw") + text.count("cmpxchg ") == 1
