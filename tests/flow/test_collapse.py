"""Pass collapse-loops (flow/collapse.py): adjacent loops of a reduction merge where every access
walks them as two adjacent dims in order, through free views; the IR right after the pass, then
the numbers of the whole compile on local-task against numpy at odd sizes."""

from __future__ import annotations

import numpy as np
from pass_runs import after_pass, generics, run_local_task
from pyree.compiler.tensor_program import View


def sum_last_two(a, b, c, perm="d0, d1, d2"):
    """r[i] = sum over j, k of x[i, j, k] (read at ``perm`` of the loops)."""
    return f"""
#in = affine_map<(d0, d1, d2) -> ({perm})>
#out = affine_map<(d0, d1, d2) -> (d0)>
func.func @main(%x: tensor<{a}x{b}x{c}xf32>) -> tensor<{a}xf32> {{
  %c = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{a}xf32>
  %init = linalg.fill ins(%c : f32) outs(%e : tensor<{a}xf32>) -> tensor<{a}xf32>
  %r = linalg.generic {{indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction", "reduction"]}}
      ins(%x : tensor<{a}x{b}x{c}xf32>) outs(%init : tensor<{a}xf32>) {{
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  }} -> tensor<{a}xf32>
  return %r : tensor<{a}xf32>
}}
"""
def rows_times_matrix(a, b, k, n):
    """r[i, j, :] = x[i, j, :] @ w: two m loops."""
    return f"""
#x = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#w = affine_map<(d0, d1, d2, d3) -> (d3, d2)>
#o = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
func.func @main(%x: tensor<{a}x{b}x{k}xf32>, %w: tensor<{k}x{n}xf32>) -> tensor<{a}x{b}x{n}xf32> {{
  %c = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{a}x{b}x{n}xf32>
  %init = linalg.fill ins(%c : f32) outs(%e : tensor<{a}x{b}x{n}xf32>) -> tensor<{a}x{b}x{n}xf32>
  %r = linalg.generic {{indexing_maps = [#x, #w, #o], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}}
      ins(%x, %w : tensor<{a}x{b}x{k}xf32>, tensor<{k}x{n}xf32>) outs(%init : tensor<{a}x{b}x{n}xf32>) {{
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  }} -> tensor<{a}x{b}x{n}xf32>
  return %r : tensor<{a}x{b}x{n}xf32>
}}
"""

def test_two_reduction_loops_merge_into_one_through_a_view():
    function = after_pass(sum_last_two(5, 7, 9), "collapse-loops")
    (op,) = generics(function)
    assert (op.loop_ranges, op.num_parallel) == ((5, 63), 1)
    (view,) = [v for v in function.ops if isinstance(v, View)]
    assert view.result.shape == (5, 63) and op.inputs == [view.result]
    x = np.random.default_rng(21).standard_normal((5, 7, 9)).astype(np.float32)
    np.testing.assert_allclose(run_local_task(sum_last_two(5, 7, 9), x),
                               x.astype(np.float64).sum(axis=(1, 2)), rtol=1e-5, atol=1e-5)


def test_loops_read_in_the_other_order_stay_apart():
    text = sum_last_two(5, 7, 9, perm="d0, d2, d1")
    function = after_pass(text, "collapse-loops")
    (op,) = generics(function)
    assert op.loop_ranges == (5, 9, 7) and not any(isinstance(v, View) for v in function.ops)
    x = np.random.default_rng(22).standard_normal((5, 7, 9)).astype(np.float32)
    np.testing.assert_allclose(run_local_task(text, x), x.astype(np.float64).sum(axis=(1, 2)),
                               rtol=1e-5, atol=1e-5)


def test_two_m_loops_of_a_product_merge_and_the_result_is_viewed_back():
    """x (3, 5, 11) @ w (11, 7): one m loop of 15, so every backend's matmul template takes it;
    the (15, 7) result is viewed back as (3, 5, 7)."""
    text = rows_times_matrix(3, 5, 11, 7)
    function = after_pass(text, "collapse-loops")
    (op,) = generics(function)
    assert (op.loop_ranges, op.num_parallel) == ((15, 7, 11), 2)
    assert op.results[0].shape == (15, 7)
    (back,) = [v for v in function.ops if isinstance(v, View) and v.source is op.results[0]]
    assert back.result is function.results[0] and back.result.shape == (3, 5, 7)
    rng = np.random.default_rng(23)
    x = rng.standard_normal((3, 5, 11)).astype(np.float32)
    w = rng.standard_normal((11, 7)).astype(np.float32)
    np.testing.assert_allclose(run_local_task(text, x, w), x.astype(np.float64) @ w,
                               rtol=1e-5, atol=1e-5)
