"""Syntax as IREE's e2e tests write it (tests/e2e/linalg, tests/e2e/tensor_ops), smaller sizes."""

import numpy as np
from program_interpreter import run
from pyree.compiler.input import import_mlir
from pyree.compiler.tensor_program import Check

ARGMAX = """
func.func @argmax_1d() {
  %seven = arith.constant 7.0 : f32
  %input_init = tensor.empty() : tensor<1031xf32>
  %input_filled = linalg.fill ins(%seven : f32) outs(%input_init : tensor<1031xf32>) -> tensor<1031xf32>

  %large = arith.constant 53.0 : f32
  %index = arith.constant 1030 : index
  %input = tensor.insert %large into %input_filled[%index] : tensor<1031xf32>

  %neg_inf = arith.constant 0xFF800000 : f32  // -inf
  %c0_i32 = arith.constant 0 : i32
  %init_val_buf = tensor.empty() : tensor<f32>
  %init_idx_buf = tensor.empty() : tensor<i32>
  %init_val = linalg.fill ins(%neg_inf : f32) outs(%init_val_buf : tensor<f32>) -> tensor<f32>
  %init_idx = linalg.fill ins(%c0_i32 : i32) outs(%init_idx_buf : tensor<i32>) -> tensor<i32>

  %result:2 = linalg.generic {
      indexing_maps = [
        affine_map<(d0) -> (d0)>,
        affine_map<(d0) -> ()>,
        affine_map<(d0) -> ()>
      ],
      iterator_types = ["reduction"]
    } ins(%input : tensor<1031xf32>)
      outs(%init_val, %init_idx : tensor<f32>, tensor<i32>) {
    ^bb0(%in: f32, %val: f32, %idx: i32):
      %i = linalg.index 0 : index
      %i_cast = arith.index_cast %i : index to i32
      %maxval = arith.maximumf %in, %val : f32
      %cmp = arith.cmpf ogt, %in, %val : f32
      %sel_idx = arith.select %cmp, %i_cast, %idx : i32
      linalg.yield %maxval, %sel_idx : f32, i32
  } -> (tensor<f32>, tensor<i32>)

  check.expect_almost_eq_const(%result#0, dense<53.0> : tensor<f32>) : tensor<f32>
  check.expect_eq_const(%result#1, dense<1030> : tensor<i32>) : tensor<i32>

  return
}
"""

INDEX = """
func.func @extract_slice_strided() {
  %0 = tensor.empty() : tensor<50x75xi32>
  %1 = linalg.generic {
      indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>],
      iterator_types = ["parallel", "parallel"]}
      outs(%0 : tensor<50x75xi32>) {
      ^bb0(%arg0 : i32):
        %2 = linalg.index 0 : index
        %3 = linalg.index 1 : index
        %4 = arith.index_cast %2 : index to i32
        %c75_i32 = arith.constant 75 : i32
        %5 = arith.muli %4, %c75_i32 : i32
        %6 = arith.index_cast %3 : index to i32
        %7 = arith.addi %5, %6 : i32
        linalg.yield %7 : i32
      } -> tensor<50x75xi32>
  %2 = tensor.extract_slice %1[20, 30] [5, 7] [2, 3]
      : tensor<50x75xi32> to tensor<5x7xi32>
  %3 = tensor.empty() : tensor<5x7xi32>
  %4 = linalg.generic {
      indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>],
      iterator_types = ["parallel", "parallel"]}
      outs(%3 : tensor<5x7xi32>) {
      ^bb0(%arg0 : i32) :
        %5 = linalg.index 0 : index
        %6 = linalg.index 1 : index
        %c20_i32 = arith.constant 20 : i32
        %c30_i32 = arith.constant 30 : i32
        %c2_i32 = arith.constant 2 : i32
        %c3_i32 = arith.constant 3 : i32
        %7 = arith.index_cast %6 : index to i32
        %8 = arith.muli %7, %c3_i32 : i32
        %9 = arith.addi %c30_i32, %8 : i32
        %10 = arith.index_cast %5 : index to i32
        %11 = arith.muli %10, %c2_i32 : i32
        %12 = arith.addi %c20_i32, %11 : i32
        %c75_i32 = arith.constant 75 : i32
        %13 = arith.muli %12, %c75_i32 : i32
        %14 = arith.addi %13, %9 : i32
        linalg.yield %14 : i32
     } -> tensor<5x7xi32>
  check.expect_eq(%2, %4) : tensor<5x7xi32>
  return
}
"""


def test_argmax_multi_result_reduction_with_insert():
    fn = import_mlir(ARGMAX, "argmax.mlir").functions[0]
    assert [c.kind for c in fn.ops if isinstance(c, Check)] == ["expect_almost_eq", "expect_eq"]
    (argmax,) = [op for op in fn.ops if getattr(op, "origin", "") == "linalg.generic"]
    assert argmax.num_parallel == 0 and len(argmax.outputs) == 2
    run(fn)  # raises unless the max is 53.0 at index 1030


def test_generated_indices_and_strided_slice():
    fn = import_mlir(INDEX, "index.mlir").functions[0]
    run(fn)  # raises unless the strided slice equals the recomputed indices


def test_optimization_barrier_and_expect_eq_const():
    text = """
func.func public @extract_slice_i32_offset1_size2_stride2() {
  %1 = arith.constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  %2 = util.optimization_barrier %1 : tensor<4xi32>
  %extracted_slice = tensor.extract_slice %2[1] [2] [2] : tensor<4xi32> to tensor<2xi32>
  check.expect_eq_const(%extracted_slice, dense<[2, 4]> : tensor<2xi32>) : tensor<2xi32>
  return
}"""
    fn = import_mlir(text).functions[0]
    (check,) = [op for op in fn.ops if isinstance(op, Check)]
    (expected,) = [op for op in fn.ops if getattr(op, "result", None) is check.rhs]
    np.testing.assert_array_equal(expected.data, [2, 4])
    run(fn)  # raises if the slice differs from [2, 4]
