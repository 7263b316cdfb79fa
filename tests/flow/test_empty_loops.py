"""Pass settle-empty-loops (flow/empty_loops.py): an op over an empty parallel loop becomes an
empty constant; one over an empty reduction stores its starting value through its epilogue.
The IR right after the pass, then the numbers on local-task against numpy (a mean of nothing is
NaN, a sum 0, a max its initial value). tests/e2e/test_zero_size_ops.py runs JAX's forms on
every driver."""

from __future__ import annotations

import numpy as np
from pass_runs import after_pass, generics, run_local_task
from pyree.compiler.tensor_program import Constant

SCALE_NOTHING = """
func.func @main(%x: tensor<0x5xf32>) -> tensor<0x5xf32> {
  %r = arith.mulf %x, %x : tensor<0x5xf32>
  return %r : tensor<0x5xf32>
}
"""

MEAN_OF_NOTHING = """
func.func @main(%x: tensor<3x0xf32>) -> tensor<3xf32> {
  %c = arith.constant 0.0 : f32
  %n = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3xf32>
  %init = linalg.fill ins(%c : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                        affine_map<(d0, d1) -> (d0)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<3x0xf32>) outs(%init : tensor<3xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %a, %acc : f32
    linalg.yield %t : f32
  } -> tensor<3xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]}
      ins(%s : tensor<3xf32>) outs(%e : tensor<3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %q = arith.divf %a, %n : f32
    linalg.yield %q : f32
  } -> tensor<3xf32>
  return %m : tensor<3xf32>
}
"""

MATMUL_K0 = """
func.func @main(%a: tensor<4x0xf32>, %b: tensor<0x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<4x0xf32>, tensor<0x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %r : tensor<4x3xf32>
}
"""


def test_an_op_with_no_parallel_points_becomes_an_empty_constant():
    function = after_pass(SCALE_NOTHING, "settle-empty-loops")
    assert generics(function) == []
    assert [op.result.shape for op in function.ops if isinstance(op, Constant)] == [(0, 5)]
    assert run_local_task(SCALE_NOTHING, np.zeros((0, 5), np.float32)).shape == (0, 5)


def test_an_empty_reduction_stores_its_starting_value():
    ops = generics(after_pass(MEAN_OF_NOTHING, "settle-empty-loops"))
    assert all(op.loop_ranges == (3,) and op.num_parallel == 1 for op in ops)
    with np.errstate(invalid="ignore"):
        want = np.zeros((3, 0)).mean(axis=1)
    got = run_local_task(MEAN_OF_NOTHING, np.zeros((3, 0), np.float32))
    np.testing.assert_array_equal(got, want.astype(np.float32))  # NaN, NaN, NaN


def test_a_product_over_nothing_is_its_accumulator():
    (op,) = generics(after_pass(MATMUL_K0, "settle-empty-loops"))
    assert op.loop_ranges == (4, 3)
    c = np.arange(12, dtype=np.float32).reshape(4, 3)
    got = run_local_task(MATMUL_K0, np.zeros((4, 0), np.float32), np.zeros((0, 3), np.float32), c)
    np.testing.assert_array_equal(got, c)
