// tensor ops: slices, pads, reshapes, extraction.
func.func @extract_and_insert_slice() {
  %a = util.unfoldable_constant dense<[[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]> : tensor<3x4xi32>
  %s = tensor.extract_slice %a[1, 1] [2, 2] [1, 2] : tensor<3x4xi32> to tensor<2x2xi32>
  check.expect_eq_const(%s, dense<[[6, 8], [10, 12]]> : tensor<2x2xi32>) : tensor<2x2xi32>
  %z = util.unfoldable_constant dense<0> : tensor<3x4xi32>
  %i = tensor.insert_slice %s into %z[0, 2] [2, 2] [1, 1] : tensor<2x2xi32> into tensor<3x4xi32>
  check.expect_eq_const(%i, dense<[[0, 0, 6, 8], [0, 0, 10, 12], [0, 0, 0, 0]]> : tensor<3x4xi32>) : tensor<3x4xi32>
  return
}

func.func @pad() {
  %a = util.unfoldable_constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %c = arith.constant -1.0 : f32
  %p = tensor.pad %a low[1, 0] high[0, 1] {
    ^bb0(%i: index, %j: index):
      tensor.yield %c : f32
  } : tensor<2x2xf32> to tensor<3x3xf32>
  check.expect_almost_eq_const(%p, dense<[[-1.0, -1.0, -1.0], [1.0, 2.0, -1.0], [3.0, 4.0, -1.0]]> : tensor<3x3xf32>) : tensor<3x3xf32>
  return
}

func.func @collapse_expand() {
  %a = util.unfoldable_constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %c = tensor.collapse_shape %a [[0, 1]] : tensor<2x3xf32> into tensor<6xf32>
  %d = arith.addf %c, %c : tensor<6xf32>
  %e = tensor.expand_shape %d [[0, 1]] output_shape [3, 2] : tensor<6xf32> into tensor<3x2xf32>
  check.expect_almost_eq_const(%e, dense<[[2.0, 4.0], [6.0, 8.0], [10.0, 12.0]]> : tensor<3x2xf32>) : tensor<3x2xf32>
  return
}
