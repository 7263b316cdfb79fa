// StableHLO reductions, windows, convolution, sort; expected values from the StableHLO spec.
func.func @reduce_sum_and_argmax() {
  %x = util.unfoldable_constant dense<[[0, 1, 2, 3, 4, 5]]> : tensor<1x6xi64>
  %zero = stablehlo.constant dense<0> : tensor<i64>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<1x6xi64>, tensor<i64>) -> tensor<1xi64>
  check.expect_eq_const(%s, dense<[15]> : tensor<1xi64>) : tensor<1xi64>
  %v = util.unfoldable_constant dense<[[3.0, 9.0, 9.0, 1.0], [-1.0, -5.0, -0.5, -2.0]]> : tensor<2x4xf32>
  %i = stablehlo.iota dim = 1 : tensor<2x4xi32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.reduce(%v init: %ninf), (%i init: %c0) across dimensions = [1] : (tensor<2x4xf32>, tensor<2x4xi32>, tensor<f32>, tensor<i32>) -> (tensor<2xf32>, tensor<2xi32>)
   reducer(%a: tensor<f32>, %b: tensor<f32>) (%ia: tensor<i32>, %ib: tensor<i32>) {
    %gt = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %eq = stablehlo.compare EQ, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %lt = stablehlo.compare LT, %ia, %ib, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %tie = stablehlo.and %eq, %lt : tensor<i1>
    %first = stablehlo.or %gt, %tie : tensor<i1>
    %m = stablehlo.select %gt, %a, %b : tensor<i1>, tensor<f32>
    %k = stablehlo.select %first, %ia, %ib : tensor<i1>, tensor<i32>
    stablehlo.return %m, %k : tensor<f32>, tensor<i32>
  }
  check.expect_almost_eq_const(%r#0, dense<[9.0, -0.5]> : tensor<2xf32>) : tensor<2xf32>
  check.expect_eq_const(%r#1, dense<[1, 2]> : tensor<2xi32>) : tensor<2xi32>
  return
}

func.func @reduce_window_padded() {
  %x = util.unfoldable_constant dense<[[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi64>
  %zero = stablehlo.constant dense<0> : tensor<i64>
  %r = "stablehlo.reduce_window"(%x, %zero) ({
    ^bb0(%a: tensor<i64>, %b: tensor<i64>):
      %s = stablehlo.add %a, %b : tensor<i64>
      stablehlo.return %s : tensor<i64>
  }) {window_dimensions = array<i64: 2, 1>, window_strides = array<i64: 1, 1>, padding = dense<[[1, 0], [0, 0]]> : tensor<2x2xi64>} : (tensor<3x2xi64>, tensor<i64>) -> tensor<3x2xi64>
  check.expect_eq_const(%r, dense<[[1, 2], [4, 6], [8, 10]]> : tensor<3x2xi64>) : tensor<3x2xi64>
  %d = "stablehlo.reduce_window"(%x, %zero) ({
    ^bb0(%a: tensor<i64>, %b: tensor<i64>):
      %s = stablehlo.maximum %a, %b : tensor<i64>
      stablehlo.return %s : tensor<i64>
  }) {window_dimensions = array<i64: 2, 2>, window_strides = array<i64: 2, 1>, window_dilations = array<i64: 2, 1>} : (tensor<3x2xi64>, tensor<i64>) -> tensor<1x1xi64>
  check.expect_eq_const(%d, dense<[[6]]> : tensor<1x1xi64>) : tensor<1x1xi64>
  %b = "stablehlo.reduce_window"(%x, %zero) ({
    ^bb0(%a: tensor<i64>, %c: tensor<i64>):
      %s = stablehlo.add %a, %c : tensor<i64>
      stablehlo.return %s : tensor<i64>
  }) {window_dimensions = array<i64: 2, 1>, window_strides = array<i64: 4, 1>, base_dilations = array<i64: 2, 1>, window_dilations = array<i64: 3, 1>, padding = dense<[[2, 1], [0, 0]]> : tensor<2x2xi64>} : (tensor<3x2xi64>, tensor<i64>) -> tensor<2x2xi64>
  check.expect_eq_const(%b, dense<[[0, 0], [3, 4]]> : tensor<2x2xi64>) : tensor<2x2xi64>
  return
}

func.func @convolution_lhs_dilation() {
  %lhs = util.unfoldable_constant dense<[[[[1.0], [2.0], [5.0], [6.0]], [[3.0], [4.0], [7.0], [8.0]], [[10.0], [11.0], [14.0], [15.0]], [[12.0], [13.0], [16.0], [17.0]]]]> : tensor<1x4x4x1xf32>
  %rhs = util.unfoldable_constant dense<1.0> : tensor<3x3x1x1xf32>
  %r = stablehlo.convolution(%lhs, %rhs) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [4, 4], pad = [[0, 0], [0, 0]], lhs_dilate = [2, 2], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<1x4x4x1xf32>, tensor<3x3x1x1xf32>) -> tensor<1x2x2x1xf32>
  check.expect_almost_eq_const(%r, dense<[[[[10.0], [26.0]], [[46.0], [62.0]]]]> : tensor<1x2x2x1xf32>) : tensor<1x2x2x1xf32>
  %x = util.unfoldable_constant dense<[[[1.0], [2.0], [3.0], [4.0]]]> : tensor<1x4x1xf32>
  %w = util.unfoldable_constant dense<[[[1.0]], [[10.0]], [[100.0]]]> : tensor<3x1x1xf32>
  %plain = "stablehlo.convolution"(%x, %w) {dimension_numbers = #stablehlo.conv<[b, 0, f]x[0, i, o]->[b, 0, f]>, feature_group_count = 1 : i64, batch_group_count = 1 : i64} : (tensor<1x4x1xf32>, tensor<3x1x1xf32>) -> tensor<1x2x1xf32>
  check.expect_almost_eq_const(%plain, dense<[[[321.0], [432.0]]]> : tensor<1x2x1xf32>) : tensor<1x2x1xf32>
  %flipped = "stablehlo.convolution"(%x, %w) {dimension_numbers = #stablehlo.conv<[b, 0, f]x[0, i, o]->[b, 0, f]>, window_reversal = array<i1: true>, feature_group_count = 1 : i64, batch_group_count = 1 : i64} : (tensor<1x4x1xf32>, tensor<3x1x1xf32>) -> tensor<1x2x1xf32>
  check.expect_almost_eq_const(%flipped, dense<[[[123.0], [234.0]]]> : tensor<1x2x1xf32>) : tensor<1x2x1xf32>
  return
}

func.func @select_and_scatter() {
  %operand = util.unfoldable_constant dense<[[1, 5], [2, 5], [3, 6], [4, 4]]> : tensor<4x2xi64>
  %source = util.unfoldable_constant dense<[[5, 6], [7, 8]]> : tensor<2x2xi64>
  %init = stablehlo.constant dense<0> : tensor<i64>
  %r = "stablehlo.select_and_scatter"(%operand, %source, %init) ({
    ^bb0(%a: tensor<i64>, %b: tensor<i64>):
      %ge = stablehlo.compare GE, %a, %b : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %ge : tensor<i1>
  }, {
    ^bb0(%a: tensor<i64>, %b: tensor<i64>):
      %s = stablehlo.add %a, %b : tensor<i64>
      stablehlo.return %s : tensor<i64>
  }) {window_dimensions = array<i64: 3, 1>, window_strides = array<i64: 2, 1>, padding = dense<[[0, 1], [0, 0]]> : tensor<2x2xi64>} : (tensor<4x2xi64>, tensor<2x2xi64>, tensor<i64>) -> tensor<4x2xi64>
  check.expect_eq_const(%r, dense<[[0, 0], [0, 0], [5, 14], [7, 0]]> : tensor<4x2xi64>) : tensor<4x2xi64>
  return
}

func.func @sort_two_operands() {
  %a = util.unfoldable_constant dense<[[1, 2, 3], [3, 2, 1]]> : tensor<2x3xi64>
  %b = util.unfoldable_constant dense<[[3, 2, 1], [1, 2, 3]]> : tensor<2x3xi64>
  %r:2 = "stablehlo.sort"(%a, %b) ({
    ^bb0(%x: tensor<i64>, %y: tensor<i64>, %u: tensor<i64>, %v: tensor<i64>):
      %gt = stablehlo.compare GT, %x, %y : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %gt : tensor<i1>
  }) {dimension = 0 : i64, is_stable = true} : (tensor<2x3xi64>, tensor<2x3xi64>) -> (tensor<2x3xi64>, tensor<2x3xi64>)
  check.expect_eq_const(%r#0, dense<[[3, 2, 3], [1, 2, 1]]> : tensor<2x3xi64>) : tensor<2x3xi64>
  check.expect_eq_const(%r#1, dense<[[1, 2, 1], [3, 2, 3]]> : tensor<2x3xi64>) : tensor<2x3xi64>
  return
}
