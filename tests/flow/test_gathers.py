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


def computed_rows(n: int, index: str) -> str:
    """r[i] = x[index(i)] over i < n, the index written with steps PyTorch's exports use."""
    return f"""
func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %c0 = arith.constant 0 : index
  %cn = arith.constant {n} : index
  %c2 = arith.constant 2 : index
  %n64 = arith.constant {n} : i64
  %z64 = arith.constant 0 : i64
  %e = tensor.empty() : tensor<{n}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}}
      outs(%e : tensor<{n}xf32>) {{
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
{index}
    %v = tensor.extract %x[%at] : tensor<{n}xf32>
    linalg.yield %v : f32
  }} -> tensor<{n}xf32>
  return %r : tensor<{n}xf32>
}}
"""


INDEX_FORMS = {  # name: (the index's lines ending in %at, r as numpy, folds to a Load)
    "rem of the loop by its range": ("    %at = arith.remsi %i, %cn : index", lambda x: x, True),
    "wrap of a negative index that never is": ("""    %i64 = arith.index_cast %i : index to i64
    %neg = arith.cmpi slt, %i64, %z64 : i64
    %up = arith.addi %i64, %n64 : i64
    %w = arith.select %neg, %up, %i64 : i64
    %at = arith.index_cast %w : i64 to index""", lambda x: x, True),
    "reversed": ("""    %last = arith.subi %cn, %i : index
    %one = arith.constant 1 : index
    %at = arith.subi %last, %one : index""", lambda x: x[::-1], True),
    "rem that wraps": ("""    %d = arith.addi %i, %c2 : index
    %at = arith.remsi %d, %cn : index""", lambda x: np.roll(x, -2), False),
    "div": ("    %at = arith.divsi %i, %c2 : index", lambda x: x[np.arange(len(x)) // 2], False),
}


@pytest.mark.parametrize("name", sorted(INDEX_FORMS))
@pytest.mark.parametrize("n", [7, 100003])  # past the 16384 points the constant path evaluates
def test_gathers_at_symbolically_affine_indices(name, n):
    """An index whose every non-affine step is a no-op over the loop box (``kernel.affine_of``)
    becomes a Load at any size; a remainder that wraps and a halving stay gathers. Both right."""
    lines, reference, folds = INDEX_FORMS[name]
    program = computed_rows(n, lines)
    _, reads = _reads(after_pass(program, "fold-constant-gathers"))
    assert all(isinstance(e, Load) for e in reads) == folds
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    np.testing.assert_array_equal(run_local_task(program, x), reference(x))
