"""Sorts, top-k's and scans computed by walking each line on the CPU (codegen/llvm_cpu/
line_sort.py: quicksort with insertion and heap sort under it for a whole line, a heap of the
best k for a top-k; line_scan.py: one running fold), against numpy on local-task: lines of a
million (which the merging Generics took a minute to compile), the orders that break a naive
quicksort or make every element enter a top-k heap (sorted either way, all equal, organ pipes),
lengths around the insertion threshold, a top-k too large for the heap, scans exactly as numpy's
sequential accumulate rounds them, inclusive and exclusive, exact folds walked in chains of
chunks, and NaN, +-inf, -0.0 and ties."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from compiled import compiled
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.codegen.llvm_cpu.line_scan import CHAINS, MIN_CHUNK
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
        # one module per (n, dtype) for all six orders: compiled() memoizes it in this process
        module = rt.load_module(compiled(case.program, CompileOptions()), device="local-task")
        out = module["main"](x, index)
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


def _specials(shape, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[::97] = -0.0
    flat[5::331] = np.inf
    flat[7::503] = np.nan
    return x


@pytest.mark.parametrize("shape, dim", [((3, 8191), 1), ((5, 2), 1), ((2, 3, 1000), 2),
                                        ((4, 777, 1), 1), ((30011,), 0)])
def test_walked_scans_round_as_one_running_fold(shape, dim):
    """cumsum and cumprod along a contiguous line equal numpy's sequential accumulate bit for
    bit (no blocks: each element folded once, left to right), NaN and inf carried onwards."""
    torch = require_module("torch")
    x = _specials(shape, sum(shape))
    got, = run_torch(lambda t: torch.cumsum(t, dim), x)
    matches([got], [np.cumsum(x, axis=dim, dtype=np.float32)])
    factors = (1 + 1e-3 * np.random.default_rng(1).standard_normal(shape)).astype(np.float32)
    got, = run_torch(lambda t: torch.cumprod(t, dim), factors)
    matches([got], [np.cumprod(factors, axis=dim, dtype=np.float32)])
    ints = np.random.default_rng(2).integers(-2**40, 2**40, shape)
    got, = run_torch(lambda t: torch.cumsum(t, dim), ints)
    matches([got], [np.cumsum(ints, axis=dim)])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_walked_scans_of_narrow_floats_run_in_f32(dtype):
    """A cumsum or cumprod of f16/bf16 runs in f32, each output rounded once: PyTorch's answer
    exactly (summed in f16, 4099 halves in [0, 1) had ended 21 ulp off); a cummax of them
    stays exact in its own type. NaN and inf carried onwards."""
    torch = require_module("torch")
    narrow = getattr(torch, dtype)
    rng = np.random.default_rng(9)
    x = rng.uniform(0, 1, (3, 4099)).astype(np.float32)
    x[1, 7], x[2, 100] = np.nan, np.inf
    factors = (1 + 1e-2 * rng.standard_normal((2, 1001))).astype(np.float32)
    for op, values in ((lambda t: torch.cumsum(t, 1), x), (lambda t: torch.cumprod(t, 1), factors),
                       (lambda t: torch.cummax(t, 1)[0], x)):
        f = lambda t, op=op: op(t.to(narrow)).float()  # noqa: E731  (numpy has no bfloat16)
        got, = run_torch(f, values)
        want = f(torch.from_numpy(values)).numpy()
        np.testing.assert_array_equal(got, want)  # NaN payloads aside (PyTorch's bf16: -NaN)


def test_an_exclusive_scan_and_its_last_value_walked():
    """``inclusive(false)``: out[0] is the accumulator's start, out[i] folds x[0..i-1]; the
    accumulator result ends as out[n-1] (the op's reference loop, which leaves x[n-1] out)."""
    n = 4099
    text = f"""func.func @f(%x: tensor<3x{n}xf32>, %out: tensor<3x{n}xf32>, %acc: tensor<3xf32>) -> (tensor<3x{n}xf32>, tensor<3xf32>) {{
  %r:2 = iree_linalg_ext.scan dimension(1) inclusive(false) ins(%x : tensor<3x{n}xf32>) outs(%out, %acc : tensor<3x{n}xf32>, tensor<3xf32>) {{
  ^bb0(%p: f32, %e: f32):
    %s = arith.maximumf %p, %e : f32
    iree_linalg_ext.yield %s : f32
  }} -> tensor<3x{n}xf32>, tensor<3xf32>
  return %r#0, %r#1 : tensor<3x{n}xf32>, tensor<3xf32>
}}"""
    x = _specials((3, n), 4)
    start = np.array([-np.inf, 0.5, np.nan], np.float32)
    out, last = rt.load_module(compile_str(text), device="local-task")["f"](
        x, np.zeros_like(x), start)
    prefix = np.concatenate([start[:, None], x[:, :-1]], axis=1)
    want = np.maximum.accumulate(prefix, axis=1)  # NaN-propagating, as arith.maximumf
    matches([np.asarray(out), np.asarray(last)], [want, want[:, -1]])


_EXACT_FOLDS = {"arith.maximumf": np.maximum, "arith.minimumf": np.minimum,
                "arith.maxsi": np.maximum, "arith.minsi": np.minimum, "arith.addi": np.add,
                "arith.muli": np.multiply, "arith.xori": np.bitwise_xor}


@pytest.mark.parametrize("op", sorted(_EXACT_FOLDS))
@pytest.mark.parametrize("n", [CHAINS * MIN_CHUNK - 1, CHAINS * MIN_CHUNK, CHAINS * MIN_CHUNK + 3,
                               4099])
def test_exact_folds_walked_in_chains(op, n):
    """A fold that any grouping rounds alike (max, min, integer sums, products, xor) is walked in
    CHAINS chunks at once, each later chunk then folding in the output before it: exactly
    numpy's sequential accumulate, with the extremes, NaN and wrapping at the chunks' edges."""
    float_op = op.endswith("f")
    ty = "f32" if float_op else "i32"
    rng = np.random.default_rng(n)
    if float_op:
        x = _specials((3, n), n)
        edges = [c * (n // CHAINS) + k for c in range(CHAINS) for k in (-1, 0, 1)]
        x[0, edges] = np.inf if op.endswith("maximumf") else -np.inf
        x[1, n // CHAINS] = np.nan
    else:
        x = rng.integers(-2**31, 2**31, (3, n)).astype(np.int32)
        x[2] = rng.integers(-3, 4, n)  # small factors and signs: products that wrap and reach 0
    text = f"""func.func @f(%x: tensor<3x{n}x{ty}>, %out: tensor<3x{n}x{ty}>, %acc: tensor<3x{ty}>) -> tensor<3x{n}x{ty}> {{
  %r:2 = iree_linalg_ext.scan dimension(1) inclusive(true) ins(%x : tensor<3x{n}x{ty}>) outs(%out, %acc : tensor<3x{n}x{ty}>, tensor<3x{ty}>) {{
  ^bb0(%p: {ty}, %e: {ty}):
    %s = {op} %p, %e : {ty}
    iree_linalg_ext.yield %s : {ty}
  }} -> tensor<3x{n}x{ty}>, tensor<3x{ty}>
  return %r#0 : tensor<3x{n}x{ty}>
}}"""
    out = rt.load_module(compile_str(text), device="local-task")["f"](
        x, np.zeros_like(x), np.zeros(3, x.dtype))
    matches([np.asarray(out)], [_EXACT_FOLDS[op].accumulate(x, axis=1, dtype=x.dtype)])


def test_empty_batches_bools_and_a_top_k_of_all_but_one():
    """Lines walked where there are none (a batch of 0 rows: no workgroup runs), a sort of
    booleans (its scatter starts from False), a scan over an empty batch, and a top-k of
    n - 1 (a heap of all but one)."""
    torch = require_module("torch")
    empty = np.zeros((0, 9), np.float32)
    got = run_torch(lambda t: torch.sort(t, 1), empty)
    assert [g.shape for g in got] == [(0, 9), (0, 9)]
    got = run_torch(lambda t: torch.topk(t, 3, 1), empty)
    assert [g.shape for g in got] == [(0, 3), (0, 3)]
    got, = run_torch(lambda t: torch.cumsum(t, 1), empty)
    assert got.shape == (0, 9)
    flags = np.random.default_rng(3).random((5, 333)) < 0.3
    values, indices = run_torch(lambda t: torch.sort(t, dim=1, descending=True, stable=True), flags)
    order = stable_order(flags.astype(np.int8), 1, True)
    np.testing.assert_array_equal(values, np.take_along_axis(flags, order, 1))
    np.testing.assert_array_equal(indices, order)
    x = data((2, 4000), np.float32, np.random.default_rng(4))
    got = run_torch(lambda t: torch.topk(t, 3999, 1), x)
    matches(got, _topk_reference(x, 3999, 1, True))


def test_the_walks_are_marked_for_the_cpu_only():
    """``--compile-to=executable-sources`` names each walk an llvm-cpu kernel may take; a
    module for a GPU (or for the CPU and a GPU: one host program) keeps the counting, merging
    and blocked forms."""
    case = sort_case((3, 1000), 1, np.float32, False)
    scan = """func.func @f(%x: tensor<3x100xf32>, %out: tensor<3x100xf32>, %acc: tensor<3xf32>) -> tensor<3x100xf32> {
  %r:2 = iree_linalg_ext.scan dimension(1) inclusive(true) ins(%x : tensor<3x100xf32>) outs(%out, %acc : tensor<3x100xf32>, tensor<3xf32>) {
  ^bb0(%p: f32, %e: f32):
    %s = arith.addf %p, %e : f32
    iree_linalg_ext.yield %s : f32
  } -> tensor<3x100xf32>, tensor<3xf32>
  return %r#0 : tensor<3x100xf32>
}"""
    for program, walk in ((case.program, "by sorting (exact below 1000)"), (scan, "one running fold")):
        for targets, walked in ((["llvm-cpu"], True), (["vulkan-spirv"], False),
                                (["llvm-cpu", "vulkan-spirv"], False)):
            text = compile_str(program, target_backends=targets,
                               extra_args=["--compile-to=executable-sources"]).decode()
            assert (walk in text) == walked, (targets, walk)
