// linalg named ops and generics: contractions, reductions, transpose, broadcast.
func.func @matmul() {
  %a = util.unfoldable_constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %b = util.unfoldable_constant dense<[[1.0, 0.0], [0.0, 1.0], [2.0, -1.0]]> : tensor<3x2xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x2xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  %r = linalg.matmul ins(%a, %b : tensor<2x3xf32>, tensor<3x2xf32>) outs(%init : tensor<2x2xf32>) -> tensor<2x2xf32>
  check.expect_almost_eq_const(%r, dense<[[7.0, -1.0], [16.0, -1.0]]> : tensor<2x2xf32>) : tensor<2x2xf32>
  return
}

func.func @batch_matmul_accumulates_into_init() {
  %a = util.unfoldable_constant dense<[[[1.0, 2.0]], [[3.0, 4.0]]]> : tensor<2x1x2xf32>
  %b = util.unfoldable_constant dense<[[[1.0], [1.0]], [[2.0], [0.5]]]> : tensor<2x2x1xf32>
  %c = util.unfoldable_constant dense<[[[10.0]], [[20.0]]]> : tensor<2x1x1xf32>
  %r = linalg.batch_matmul ins(%a, %b : tensor<2x1x2xf32>, tensor<2x2x1xf32>) outs(%c : tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  check.expect_almost_eq_const(%r, dense<[[[13.0]], [[28.0]]]> : tensor<2x1x1xf32>) : tensor<2x1x1xf32>
  return
}

func.func @reduce_sum_rows() {
  %a = util.unfoldable_constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<2xf32>) -> tensor<2xf32>
  %r = linalg.reduce ins(%a : tensor<2x3xf32>) outs(%init : tensor<2xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  check.expect_almost_eq_const(%r, dense<[6.0, 15.0]> : tensor<2xf32>) : tensor<2xf32>
  return
}

func.func @generic_max_over_columns() {
  %a = util.unfoldable_constant dense<[[1.0, 9.0, 3.0], [4.0, -5.0, 6.0]]> : tensor<2x3xf32>
  %low = arith.constant -1.0e30 : f32
  %e = tensor.empty() : tensor<3xf32>
  %init = linalg.fill ins(%low : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<2x3xf32>) outs(%init : tensor<3xf32>) {
    ^bb0(%in: f32, %acc: f32):
      %m = arith.maximumf %in, %acc : f32
      linalg.yield %m : f32
  } -> tensor<3xf32>
  check.expect_almost_eq_const(%r, dense<[4.0, 9.0, 6.0]> : tensor<3xf32>) : tensor<3xf32>
  return
}

func.func @transpose_broadcast() {
  %a = util.unfoldable_constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %v = util.unfoldable_constant dense<[10.0, 20.0, 30.0]> : tensor<3xf32>
  %e = tensor.empty() : tensor<3x2xf32>
  %t = linalg.transpose ins(%a : tensor<2x3xf32>) outs(%e : tensor<3x2xf32>) permutation = [1, 0]
  %eb = tensor.empty() : tensor<3x2xf32>
  %b = linalg.broadcast ins(%v : tensor<3xf32>) outs(%eb : tensor<3x2xf32>) dimensions = [1]
  %s = arith.addf %t, %b : tensor<3x2xf32>
  check.expect_almost_eq_const(%s, dense<[[11.0, 14.0], [22.0, 25.0], [33.0, 36.0]]> : tensor<3x2xf32>) : tensor<3x2xf32>
  return
}
