"""Whole sorts on local-task against PyTorch's and numpy's stable sorts: lines long enough are
merge-sorted (input/merge_sort.py), at odd lengths, along the first, a middle and the last dim,
ascending and descending, with NaN, +-inf, -0.0 and many ties; a comparator that is no strict
weak order is still counted into a permutation; the lowering of a long line is O(n log^2 n)."""

from __future__ import annotations

import warnings

import numpy as np
import pyree.runtime as rt
import pytest
from compiled import compiled
from pyree.compiler import CompileOptions, compile_str
from sort_cases import CASES, data, matches, sort_case, stable_order
from tooling import require_module


@pytest.mark.parametrize("name", sorted(CASES))
def test_sort_case_on_local_task(name):
    case = CASES[name]
    inputs = case.inputs(np.random.default_rng(3))
    out = rt.load_module(compile_str(case.program), device="local-task")["main"](*inputs)
    matches([np.asarray(o) for o in out], case.reference(*inputs))


def run_torch(f, x: np.ndarray) -> list[np.ndarray]:
    torch = require_module("torch")
    require_module("torch_mlir")
    from pyree.compiler import import_torch

    class Wrap(torch.nn.Module):
        def forward(self, t):
            return f(t)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = import_torch(Wrap(), torch.from_numpy(x))
    # compiled(): one compile per program in this process (test_line_walks and
    # test_radix_sorts sort the same shapes in several orders, each through here)
    out = rt.load_module(compiled(text, CompileOptions()), device="local-task").main(x)
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("shape, dim, dtype, descending", [
    ((40000,), 0, np.float32, False), ((33, 4), 0, np.int32, True)])
def test_torch_sort_matches_torch(shape, dim, dtype, descending):
    torch = require_module("torch")
    x = data(shape, dtype, np.random.default_rng(len(shape) + shape[0]))
    values, indices = run_torch(lambda t: torch.sort(t, dim, descending=descending), x)
    want = torch.sort(torch.from_numpy(x), dim=dim, descending=descending, stable=True)
    matches([values, indices], [want.values.numpy(), want.indices.numpy()])


@pytest.mark.parametrize("largest", [True, False])
def test_a_topk_of_a_line_without_chunks_is_the_head_of_a_merge_sort(largest):
    """torch.topk over a long line of prime length (no chunks to split it in) keeps the first k
    of a merge sort: PyTorch's values, NaN as the largest, and each index holding its value,
    ties in index order."""
    torch = require_module("torch")
    from pyree.compiler.input.sort_scan import topk_plan
    plan = topk_plan(32003, 300, ordered=True, lines=2)
    assert plan.chunk is None and plan.merges
    x = data((2, 32003), np.float32, np.random.default_rng(13))
    values, indices = run_torch(lambda t: torch.topk(t, 300, 1, largest=largest), x)
    want = torch.topk(torch.from_numpy(x), 300, 1, largest=largest)
    matches([values], [want.values.numpy()])
    order = stable_order(x, 1, largest)[:, :300]
    np.testing.assert_array_equal(indices, order)


def test_torch_argsort_matches_numpy():
    torch = require_module("torch")
    x = data((1000, 3), np.float32, np.random.default_rng(11))
    indices, = run_torch(lambda t: torch.argsort(t, dim=0), x)
    np.testing.assert_array_equal(indices, stable_order(x, 0, False))


def test_jax_sorts_match_jax():
    """jnp.sort's comparator (StableHLO compares of keys with -0.0 and NaN made canonical) is a
    recognised order: its long lines merge, and match JAX's exactly, ties and NaN included."""
    jax = require_module("jax")
    jax.config.update("jax_platforms", "cpu")
    jnp = jax.numpy
    from pyree.compiler.options import CompileOptions

    def f(x):
        return jnp.sort(x, 1), jnp.argsort(x, 1), jnp.sort(x, 1, descending=True)

    x = data((3, 200), np.float32, np.random.default_rng(9))
    vmfb = compile_str(jax.jit(f).lower(x).as_text(), CompileOptions(target_backends=["llvm-cpu"]))
    got = [np.asarray(o.to_host()) for o in rt.load_module(vmfb, device="local-task")["main"](x)]
    matches(got, [np.asarray(o) for o in jax.jit(f)(x)])


def test_a_jax_sort_by_two_keys_merges_and_matches_jax():
    """lax.sort with num_keys=2 (an integer key with many ties, then a float one with NaN and
    -0.0) is a lexicographic order: merged, not counted, and JAX's answer exactly."""
    jax = require_module("jax")
    jax.config.update("jax_platforms", "cpu")
    from pyree.compiler.input import import_mlir
    from pyree.compiler.options import CompileOptions
    from pyree.compiler.tensor_program import Generic

    def f(k, x):
        return jax.lax.sort((k, x, -x), dimension=1, num_keys=2)

    rng = np.random.default_rng(2)
    keys = rng.integers(0, 4, (3, 200)).astype(np.int32)
    x = data((3, 200), np.float32, rng)
    text = jax.jit(f).lower(keys, x).as_text()
    (function,) = import_mlir(text).functions
    reductions = [op.loop_ranges for op in function.ops if isinstance(op, Generic)
                  and len(op.loop_ranges) == 3]
    assert reductions and all(r[-1] < 200 for r in reductions), reductions  # no 200x200
    vmfb = compile_str(text, CompileOptions(target_backends=["llvm-cpu"]))
    got = rt.load_module(vmfb, device="local-task")["main"](keys, x)
    matches([np.asarray(o.to_host()) for o in got], [np.asarray(o) for o in jax.jit(f)(keys, x)])


UNORDERED = """
func.func @main(%x: tensor<3x300xf32>, %i: tensor<3x300xi32>) -> (tensor<3x300xf32>, tensor<3x300xi32>) {
  %s:2 = iree_linalg_ext.sort dimension(1) outs(%x, %i : tensor<3x300xf32>, tensor<3x300xi32>) {
  ^bb0(%a: f32, %b: f32, %ia: i32, %ib: i32):
    %d = arith.subf %a, %b : f32
    %c = arith.cmpf olt, %d, %cst : f32
    iree_linalg_ext.yield %c : i1
  } -> tensor<3x300xf32>, tensor<3x300xi32>
  return %s#0, %s#1 : tensor<3x300xf32>, tensor<3x300xi32>
}"""


def test_a_comparator_that_is_no_strict_weak_order_still_gives_a_permutation():
    """``a - b < 0`` is no key comparison (and inf - inf is NaN): the sort is counted, and every
    line comes out a rearrangement of the input, each element once."""
    program = UNORDERED.replace("%d = arith.subf", "%cst = arith.constant 0.0 : f32\n    %d = arith.subf")
    x = data((3, 300), np.float32, np.random.default_rng(5))
    index = np.broadcast_to(np.arange(300, dtype=np.int32), (3, 300)).copy()
    values, indices = rt.load_module(compile_str(program), device="local-task")["main"](x, index)
    values, indices = np.asarray(values), np.asarray(indices)
    for line in range(3):
        np.testing.assert_array_equal(np.sort(indices[line]), np.arange(300))
        np.testing.assert_array_equal(values[line].view(np.uint32), x[line, indices[line]].view(np.uint32))


def test_a_long_sort_is_lowered_in_n_log2_n_steps():
    """A 1-D sort of a million is Generics whose loop boxes sum to under n log2(n)^2 points
    (runs counted over 31 offsets, then the merges' binary searches), none near n^2."""
    from pyree.compiler.input import import_mlir
    from pyree.compiler.tensor_program import Generic
    n = 1_000_000
    (function,) = import_mlir(sort_case((n,), 0, np.float32, True).program).functions
    boxes = [int(np.prod(op.loop_ranges)) for op in function.ops if isinstance(op, Generic)]
    assert sum(boxes) <= n * np.log2(n) ** 2 and max(boxes) <= 64 * n, boxes
