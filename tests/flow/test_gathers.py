"""Pass fold-constant-gathers (flow/gathers.py): a gather whose indices are constants that one
affine map reproduces becomes a Load, so its producer can fuse; other gathers stay. The IR right
after the pass, then the numbers of the whole compile on local-task against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from pass_runs import after_pass, generics, run_local_task
from pyree.compiler.kernel import Gather, Load, walk


def take_rows(rows: int, cols: int, index: list[int], scale: bool = False) -> str:
    """r[i, j] = t'[index[i], j], ``index`` a constant; t' = t * 2 when ``scale`` (a producer)."""
    k = len(index)
    table = f"tensor<{rows}x{cols}xf32>"
    producer = f"""
  %te = tensor.empty() : {table}
  %t2 = linalg.generic {{indexing_maps = [#o, #o], iterator_types = ["parallel", "parallel"]}}
      ins(%t : {table}) outs(%te : {table}) {{
  ^bb0(%a: f32, %o: f32):
    %d = arith.addf %a, %a : f32
    linalg.yield %d : f32
  }} -> {table}""" if scale else ""
    return f"""
#m = affine_map<(d0, d1) -> (d0)>
#o = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%t: {table}) -> tensor<{k}x{cols}xf32> {{{producer}
  %idx = arith.constant dense<[{", ".join(map(str, index))}]> : tensor<{k}xi64>
  %e = tensor.empty() : tensor<{k}x{cols}xf32>
  %r = linalg.generic {{indexing_maps = [#m, #o], iterator_types = ["parallel", "parallel"]}}
      ins(%idx : tensor<{k}xi64>) outs(%e : tensor<{k}x{cols}xf32>) {{
  ^bb0(%i: i64, %o: f32):
    %row = arith.index_cast %i : i64 to index
    %col = linalg.index 1 : index
    %v = tensor.extract {"%t2" if scale else "%t"}[%row, %col] : {table}
    linalg.yield %v : f32
  }} -> tensor<{k}x{cols}xf32>
  return %r : tensor<{k}x{cols}xf32>
}}
"""


def _reads(function):
    (op,) = [g for g in generics(function) if g.results[0] is function.results[0]]
    return op, [e for r in op.outputs for e in walk(r.value) if isinstance(e, (Load, Gather))]


def test_rows_at_affine_constant_indices_become_a_load_and_the_indices_go_unread():
    function = after_pass(take_rows(9, 3, [2, 3, 4, 5, 6]), "fold-constant-gathers")
    op, (read,) = _reads(function)
    assert isinstance(read, Load) and op.inputs == function.arguments
    assert [ix.const for ix in read.index] == [2, 0]  # t[d0 + 2, d1]


def test_a_constant_permutation_stays_a_gather():
    function = after_pass(take_rows(9, 3, [3, 0, 4, 8, 2]), "fold-constant-gathers")
    _, reads = _reads(function)
    assert any(isinstance(e, Gather) for e in reads)


def test_the_folded_gather_lets_its_producer_fuse():
    """As a Load, t * 2 inlines into the read: one kernel; as a Gather it stays its own."""
    assert len(generics(after_pass(take_rows(9, 3, [2, 3, 4, 5, 6], True), "fuse-regions"))) == 1
    assert len(generics(after_pass(take_rows(9, 3, [3, 0, 4, 8, 2], True), "fuse-regions"))) == 2


@pytest.mark.parametrize("index", [[2, 3, 4, 5, 6], [3, 0, 4, 8, 2], [8, 7, 6, 5, 4, 3, 2]])
@pytest.mark.parametrize("scale", [False, True])
def test_gathered_rows_match_numpy(index, scale):
    t = np.random.default_rng(31).standard_normal((9, 3)).astype(np.float32)
    t[4, 1], t[6, 2] = np.nan, -0.0
    got = run_local_task(take_rows(9, 3, index, scale), t)
    want = (t + t if scale else t)[index]
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))
