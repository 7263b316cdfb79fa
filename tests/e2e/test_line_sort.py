"""Sorts and top-k's ranked by sorting each line on the CPU (codegen/llvm_cpu/line_sort.py:
quicksort with insertion and heap sort under it for a whole line, a heap of the best k for a
top-k), against numpy's stable sort on local-task: lines of a million (which the merging
Generics took a minute to compile), the orders that break a naive quicksort or make every
element enter a top-k heap (sorted either way, all equal, organ pipes), lengths around the
insertion threshold, a top-k too large for the heap, and NaN, +-inf, -0.0 and ties everywhere."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import compile_str
from pyree.compiler.codegen.llvm_cpu.line_sort import SMALL, TOP_K_HEAP
from sort_cases import LONG_CASES, data, matches, sort_case, stable_order
from test_merge_sort import run_torch
from tooling import require_module


@pytest.mark.parametrize("name", sorted(LONG_CASES))
def test_a_line_of_a_million_sorts_on_the_cpu(name):
    case = LONG_CASES[name]
    inputs = case.inputs(np.random.default_rng(5))
    out = rt.load_module(compile_str(case.program), device="local-task")["main"](*inputs)
    matches([np.asarray(o) for o in out], case.reference(*inputs))


def _ordered_data(kind: str, n: int, dtype) -> np.ndarray:
    rng = np.random.default_rng(n)
    ramp = np.arange(n)
    x = {"ascending": ramp, "descending": ramp[::-1], "equal": np.zeros(n, np.int64),
         "organ pipe": np.minimum(ramp, n - 1 - ramp), "few values": rng.integers(0, 3, n),
         "random": rng.permutation(n)}[kind]
    return x.astype(dtype)


@pytest.mark.parametrize("kind", ["ascending", "descending", "equal", "organ pipe",
                                  "few values", "random"])
@pytest.mark.parametrize("n", [2, SMALL, SMALL + 1, 3 * SMALL + 2, 20011])
def test_orders_that_break_a_naive_quicksort(kind, n):
    for dtype, descending in ((np.float32, False), (np.int32, True)):
        case = sort_case((n,), 0, dtype, descending)
        x = _ordered_data(kind, n, dtype)
        index = np.arange(n, dtype=np.int32)
        out = rt.load_module(compile_str(case.program), device="local-task")["main"](x, index)
        matches([np.asarray(o) for o in out], case.reference(x, index))


def _topk_reference(x: np.ndarray, k: int, dim: int, largest: bool):
    order = np.take(stable_order(x, dim, largest), np.arange(k), axis=dim)
    return [np.take_along_axis(x, order, dim), order.astype(np.int64)]


@pytest.mark.parametrize("shape, k, dim", [
    ((64, 1000), 5, 1),            # classifier top-5: the heap, one line a row
    ((1, 30011), 1, 1),            # a top-1 (argmax by sorting)
    ((10007, 3), TOP_K_HEAP + 1, 0),  # past the heap: the whole line quicksorted, along dim 0
    ((3, 97, 2), 96, 1),           # k = n - 1 along a middle dim
])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_by_sorting_matches_a_stable_sort(shape, k, dim, largest):
    """Values and indices exactly: NaN as the largest, -0.0 tied with 0.0, ties by index."""
    torch = require_module("torch")
    x = data(shape, np.float32, np.random.default_rng(sum(shape) + k))
    got = run_torch(lambda t: torch.topk(t, k, dim, largest=largest), x)
    matches(got, _topk_reference(x, k, dim, largest))


@pytest.mark.parametrize("kind", ["ascending", "descending", "equal"])
def test_topk_heap_on_data_that_enters_it_every_step(kind):
    """Ascending data makes every element of a largest-k enter the heap (O(n log k)); all equal
    makes none after the first k, which must then be the first k indices."""
    torch = require_module("torch")
    x = _ordered_data(kind, 50000, np.float32).reshape(1, -1)
    got = run_torch(lambda t: torch.topk(t, 300, 1), x)
    matches(got, _topk_reference(x, 300, 1, True))


def test_int64_keys_and_a_payload():
    """An i64 sort of a million (keys past 32 bits, so no packed key): its indices too."""
    torch = require_module("torch")
    x = np.random.default_rng(9).integers(-2**40, 2**40, 1 << 20)
    x[::7] = x[3]  # ties
    values, indices = run_torch(lambda t: torch.sort(t, stable=True), x)
    order = np.argsort(x, kind="stable")
    np.testing.assert_array_equal(values, x[order])
    np.testing.assert_array_equal(indices, order)
