// StableHLO data movement and contractions; expected values from the StableHLO spec's examples.
func.func @broadcast_transpose_reshape_reverse() {
  %a = util.unfoldable_constant dense<[1, 2, 3]> : tensor<3xi32>
  %b = stablehlo.broadcast_in_dim %a, dims = [1] : (tensor<3xi32>) -> tensor<2x3xi32>
  check.expect_eq_const(%b, dense<[[1, 2, 3], [1, 2, 3]]> : tensor<2x3xi32>) : tensor<2x3xi32>
  %row = util.unfoldable_constant dense<[[7], [8]]> : tensor<2x1xi32>
  %s = stablehlo.broadcast_in_dim %row, dims = [0, 2] : (tensor<2x1xi32>) -> tensor<2x2x3xi32>
  check.expect_eq_const(%s, dense<[[[7, 7, 7], [7, 7, 7]], [[8, 8, 8], [8, 8, 8]]]> : tensor<2x2x3xi32>) : tensor<2x2x3xi32>
  %m = util.unfoldable_constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
  %t = stablehlo.transpose %m, dims = [1, 0] : (tensor<2x3xi32>) -> tensor<3x2xi32>
  check.expect_eq_const(%t, dense<[[1, 4], [2, 5], [3, 6]]> : tensor<3x2xi32>) : tensor<3x2xi32>
  %r = stablehlo.reshape %m : (tensor<2x3xi32>) -> tensor<3x2xi32>
  check.expect_eq_const(%r, dense<[[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi32>) : tensor<3x2xi32>
  %v = stablehlo.reverse %m, dims = [1] : tensor<2x3xi32>
  check.expect_eq_const(%v, dense<[[3, 2, 1], [6, 5, 4]]> : tensor<2x3xi32>) : tensor<2x3xi32>
  %n = stablehlo.get_dimension_size %m, dim = 1 : (tensor<2x3xi32>) -> tensor<i32>
  %nb = stablehlo.broadcast_in_dim %n, dims = [] : (tensor<i32>) -> tensor<2xi32>
  check.expect_eq_const(%nb, dense<3> : tensor<2xi32>) : tensor<2xi32>
  return
}

func.func @slice_concatenate_iota() {
  %a = util.unfoldable_constant dense<[[0, 0, 1, 0, 0, 1], [0, 0, 0, 0, 0, 0], [0, 0, 1, 0, 0, 1]]> : tensor<3x6xi64>
  %s = stablehlo.slice %a [0:3:2, 2:6:3] : (tensor<3x6xi64>) -> tensor<2x2xi64>
  check.expect_eq_const(%s, dense<[[1, 1], [1, 1]]> : tensor<2x2xi64>) : tensor<2x2xi64>
  %x = util.unfoldable_constant dense<[[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi64>
  %y = util.unfoldable_constant dense<[[7, 8]]> : tensor<1x2xi64>
  %c = stablehlo.concatenate %x, %y, dim = 0 : (tensor<3x2xi64>, tensor<1x2xi64>) -> tensor<4x2xi64>
  check.expect_eq_const(%c, dense<[[1, 2], [3, 4], [5, 6], [7, 8]]> : tensor<4x2xi64>) : tensor<4x2xi64>
  %i = stablehlo.iota dim = 1 : tensor<2x3xi32>
  check.expect_eq_const(%i, dense<[[0, 1, 2], [0, 1, 2]]> : tensor<2x3xi32>) : tensor<2x3xi32>
  %f = stablehlo.iota dim = 0 : tensor<3x2xf32>
  check.expect_almost_eq_const(%f, dense<[[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]> : tensor<3x2xf32>) : tensor<3x2xf32>
  return
}

func.func @pad_interior_and_negative() {
  %a = util.unfoldable_constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %p = stablehlo.pad %a, %zero, low = [0, 1], high = [2, 1], interior = [1, 2] : (tensor<2x3xi32>, tensor<i32>) -> tensor<5x9xi32>
  check.expect_eq_const(%p, dense<[[0, 1, 0, 0, 2, 0, 0, 3, 0], [0, 0, 0, 0, 0, 0, 0, 0, 0], [0, 4, 0, 0, 5, 0, 0, 6, 0], [0, 0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0, 0]]> : tensor<5x9xi32>) : tensor<5x9xi32>
  %n = stablehlo.pad %a, %zero, low = [0, -1], high = [1, -1], interior = [0, 0] : (tensor<2x3xi32>, tensor<i32>) -> tensor<3x1xi32>
  check.expect_eq_const(%n, dense<[[2], [5], [0]]> : tensor<3x1xi32>) : tensor<3x1xi32>
  return
}

func.func @dynamic_slices_clamp() {
  %a = util.unfoldable_constant dense<[[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0]]> : tensor<4x4xi32>
  %i = util.unfoldable_constant dense<-1> : tensor<i64>
  %j = util.unfoldable_constant dense<3> : tensor<i64>
  %s = stablehlo.dynamic_slice %a, %i, %j, sizes = [2, 2] : (tensor<4x4xi32>, tensor<i64>, tensor<i64>) -> tensor<2x2xi32>
  check.expect_eq_const(%s, dense<[[1, 1], [1, 1]]> : tensor<2x2xi32>) : tensor<2x2xi32>
  %b = util.unfoldable_constant dense<[[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]]> : tensor<4x4xi32>
  %u = util.unfoldable_constant dense<[[1, 1], [1, 1]]> : tensor<2x2xi32>
  %d = stablehlo.dynamic_update_slice %b, %u, %i, %j : (tensor<4x4xi32>, tensor<2x2xi32>, tensor<i64>, tensor<i64>) -> tensor<4x4xi32>
  check.expect_eq_const(%d, dense<1> : tensor<4x4xi32>) : tensor<4x4xi32>
  return
}

func.func @dot_general_and_dot() {
  %l = util.unfoldable_constant dense<[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]> : tensor<2x2x2xi64>
  %r = util.unfoldable_constant dense<[[[1, 0], [0, 1]], [[1, 0], [0, 1]]]> : tensor<2x2x2xi64>
  %g = stablehlo.dot_general %l, %r, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<2x2x2xi64>, tensor<2x2x2xi64>) -> tensor<2x2x2xi64>
  check.expect_eq_const(%g, dense<[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]> : tensor<2x2x2xi64>) : tensor<2x2x2xi64>
  %a = util.unfoldable_constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %v = util.unfoldable_constant dense<[[5.0], [6.0]]> : tensor<2x1xf32>
  %d = stablehlo.dot %a, %v : (tensor<2x2xf32>, tensor<2x1xf32>) -> tensor<2x1xf32>
  check.expect_almost_eq_const(%d, dense<[[17.0], [39.0]]> : tensor<2x1xf32>) : tensor<2x1xf32>
  %u = util.unfoldable_constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %w = util.unfoldable_constant dense<[4.0, 5.0, 6.0]> : tensor<3xf32>
  %inner = stablehlo.dot %u, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<f32>
  %inner1 = stablehlo.reshape %inner : (tensor<f32>) -> tensor<1xf32>
  check.expect_almost_eq_const(%inner1, dense<[32.0]> : tensor<1xf32>) : tensor<1xf32>
  %t = "stablehlo.dot_general"(%a, %a) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]>} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  check.expect_almost_eq_const(%t, dense<[[10.0, 14.0], [14.0, 20.0]]> : tensor<2x2xf32>) : tensor<2x2xf32>
  return
}
