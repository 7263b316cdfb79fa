// StableHLO/CHLO elementwise ops; expected values follow the StableHLO spec's definitions.
func.func @float_arithmetic() {
  %a = util.unfoldable_constant dense<[1.0, -2.5, 7.0, -0.0]> : tensor<4xf32>
  %b = util.unfoldable_constant dense<[3.0, 2.0, -2.0, 1.0]> : tensor<4xf32>
  %add = stablehlo.add %a, %b : tensor<4xf32>
  check.expect_almost_eq_const(%add, dense<[4.0, -0.5, 5.0, 1.0]> : tensor<4xf32>) : tensor<4xf32>
  %rem = stablehlo.remainder %a, %b : tensor<4xf32>
  check.expect_almost_eq_const(%rem, dense<[1.0, -0.5, 1.0, -0.0]> : tensor<4xf32>) : tensor<4xf32>
  %max = stablehlo.maximum %a, %b : tensor<4xf32>
  check.expect_almost_eq_const(%max, dense<[3.0, 2.0, 7.0, 1.0]> : tensor<4xf32>) : tensor<4xf32>
  %pow = stablehlo.power %b, %b : tensor<4xf32>
  check.expect_almost_eq_const(%pow, dense<[27.0, 4.0, 0.25, 1.0]> : tensor<4xf32>) : tensor<4xf32>
  %generic = "stablehlo.multiply"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  check.expect_almost_eq_const(%generic, dense<[3.0, -5.0, -14.0, -0.0]> : tensor<4xf32>) : tensor<4xf32>
  return
}

func.func @rounding_and_predicates() {
  %x = util.unfoldable_constant dense<[-2.5, 0.5, 1.5, 2.5]> : tensor<4xf32>
  %afz = stablehlo.round_nearest_afz %x : tensor<4xf32>
  check.expect_almost_eq_const(%afz, dense<[-3.0, 1.0, 2.0, 3.0]> : tensor<4xf32>) : tensor<4xf32>
  %even = stablehlo.round_nearest_even %x : tensor<4xf32>
  check.expect_almost_eq_const(%even, dense<[-2.0, 0.0, 2.0, 2.0]> : tensor<4xf32>) : tensor<4xf32>
  %s = util.unfoldable_constant dense<[0x7FC00000, 0x7F800000, 0xFF800000, 0.0]> : tensor<4xf32>
  %finite = stablehlo.is_finite %s : (tensor<4xf32>) -> tensor<4xi1>
  check.expect_eq_const(%finite, dense<[false, false, false, true]> : tensor<4xi1>) : tensor<4xi1>
  %logistic = stablehlo.logistic %x : tensor<4xf32>
  check.expect_almost_eq_const(%logistic, dense<[0.0758582, 0.6224593, 0.8175745, 0.9241418]> : tensor<4xf32>) : tensor<4xf32>
  %lo = stablehlo.constant dense<0.0> : tensor<f32>
  %hi = stablehlo.constant dense<1.0> : tensor<f32>
  %clamp = stablehlo.clamp %lo, %x, %hi : (tensor<f32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  check.expect_almost_eq_const(%clamp, dense<[0.0, 0.5, 1.0, 1.0]> : tensor<4xf32>) : tensor<4xf32>
  %erf = chlo.erf %x : tensor<4xf32> -> tensor<4xf32>
  check.expect_almost_eq_const(%erf, dense<[-0.9995930, 0.5204999, 0.9661051, 0.9995930]> : tensor<4xf32>) : tensor<4xf32>
  return
}

func.func @compare_types() {
  %x = util.unfoldable_constant dense<[0x7FC00000, -0.0, 1.0, 0xFF800000]> : tensor<4xf32>
  %y = util.unfoldable_constant dense<[1.0, 0.0, 1.0, 0x7F800000]> : tensor<4xf32>
  %eq = stablehlo.compare EQ, %x, %y, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  check.expect_eq_const(%eq, dense<[false, true, true, false]> : tensor<4xi1>) : tensor<4xi1>
  %ne = stablehlo.compare NE, %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  check.expect_eq_const(%ne, dense<[true, false, false, true]> : tensor<4xi1>) : tensor<4xi1>
  %lt = stablehlo.compare LT, %x, %y, TOTALORDER : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  check.expect_eq_const(%lt, dense<[false, true, false, true]> : tensor<4xi1>) : tensor<4xi1>
  %ge = "stablehlo.compare"(%x, %y) {comparison_direction = #stablehlo<comparison_direction GE>, compare_type = #stablehlo<comparison_type TOTALORDER>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  check.expect_eq_const(%ge, dense<[true, false, true, false]> : tensor<4xi1>) : tensor<4xi1>
  %i = util.unfoldable_constant dense<[-1, 1, 5, 0]> : tensor<4xi32>
  %j = util.unfoldable_constant dense<[1, -1, 5, 1]> : tensor<4xi32>
  %slt = stablehlo.compare LT, %i, %j, SIGNED : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  check.expect_eq_const(%slt, dense<[true, false, false, true]> : tensor<4xi1>) : tensor<4xi1>
  %ult = stablehlo.compare LT, %i, %j, UNSIGNED : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  check.expect_eq_const(%ult, dense<[false, true, false, true]> : tensor<4xi1>) : tensor<4xi1>
  %pick = stablehlo.select %ult, %i, %j : tensor<4xi1>, tensor<4xi32>
  check.expect_eq_const(%pick, dense<[1, 1, 5, 0]> : tensor<4xi32>) : tensor<4xi32>
  return
}

func.func @integer_ops() {
  %i = util.unfoldable_constant dense<[-7, 7, -1, 100]> : tensor<4xi32>
  %j = util.unfoldable_constant dense<[2, -2, 33, 3]> : tensor<4xi32>
  %div = stablehlo.divide %i, %j : tensor<4xi32>
  check.expect_eq_const(%div, dense<[-3, -3, 0, 33]> : tensor<4xi32>) : tensor<4xi32>
  %rem = stablehlo.remainder %i, %j : tensor<4xi32>
  check.expect_eq_const(%rem, dense<[-1, 1, -1, 1]> : tensor<4xi32>) : tensor<4xi32>
  %shl = stablehlo.shift_left %i, %j : tensor<4xi32>
  check.expect_eq_const(%shl, dense<[-28, 0, 0, 800]> : tensor<4xi32>) : tensor<4xi32>
  %sra = stablehlo.shift_right_arithmetic %i, %j : tensor<4xi32>
  check.expect_eq_const(%sra, dense<[-2, 0, -1, 12]> : tensor<4xi32>) : tensor<4xi32>
  %srl = stablehlo.shift_right_logical %i, %j : tensor<4xi32>
  check.expect_eq_const(%srl, dense<[1073741822, 0, 0, 12]> : tensor<4xi32>) : tensor<4xi32>
  %pop = stablehlo.popcnt %i : tensor<4xi32>
  check.expect_eq_const(%pop, dense<[30, 3, 32, 3]> : tensor<4xi32>) : tensor<4xi32>
  %clz = stablehlo.count_leading_zeros %i : tensor<4xi32>
  check.expect_eq_const(%clz, dense<[0, 29, 0, 25]> : tensor<4xi32>) : tensor<4xi32>
  %not = stablehlo.not %i : tensor<4xi32>
  check.expect_eq_const(%not, dense<[6, -8, 0, -101]> : tensor<4xi32>) : tensor<4xi32>
  %n = util.unfoldable_constant dense<[5, -2147483648, -2147483648, -9]> : tensor<4xi32>
  %d = util.unfoldable_constant dense<[0, -1, 0, 4]> : tensor<4xi32>
  %div0 = stablehlo.divide %n, %d : tensor<4xi32>
  check.expect_eq_const(%div0, dense<[-1, -2147483648, -1, -2]> : tensor<4xi32>) : tensor<4xi32>
  %rem0 = stablehlo.remainder %n, %d : tensor<4xi32>
  check.expect_eq_const(%rem0, dense<[5, 0, -2147483648, -1]> : tensor<4xi32>) : tensor<4xi32>
  %t = util.unfoldable_constant dense<[true, true, false, false]> : tensor<4xi1>
  %f = util.unfoldable_constant dense<[true, false, true, false]> : tensor<4xi1>
  %or = stablehlo.add %t, %f : tensor<4xi1>
  check.expect_eq_const(%or, dense<[true, true, true, false]> : tensor<4xi1>) : tensor<4xi1>
  %and = stablehlo.multiply %t, %f : tensor<4xi1>
  check.expect_eq_const(%and, dense<[true, false, false, false]> : tensor<4xi1>) : tensor<4xi1>
  %bmax = stablehlo.maximum %t, %f : tensor<4xi1>
  check.expect_eq_const(%bmax, dense<[true, true, true, false]> : tensor<4xi1>) : tensor<4xi1>
  %sign = stablehlo.sign %i : tensor<4xi32>
  check.expect_eq_const(%sign, dense<[-1, 1, -1, 1]> : tensor<4xi32>) : tensor<4xi32>
  return
}

func.func @conversions() {
  %f = util.unfoldable_constant dense<[-2.7, 2.7, 0.5, 0x7FC00000]> : tensor<4xf32>
  %toint = stablehlo.convert %f : (tensor<4xf32>) -> tensor<4xi32>
  %first3 = stablehlo.slice %toint [0:3] : (tensor<4xi32>) -> tensor<3xi32>
  check.expect_eq_const(%first3, dense<[-2, 2, 0]> : tensor<3xi32>) : tensor<3xi32>
  %tobool = stablehlo.convert %f : (tensor<4xf32>) -> tensor<4xi1>
  check.expect_eq_const(%tobool, dense<[true, true, true, true]> : tensor<4xi1>) : tensor<4xi1>
  %i = util.unfoldable_constant dense<[-1, 0, 2, 300]> : tensor<4xi32>
  %narrow = stablehlo.convert %i : (tensor<4xi32>) -> tensor<4xi8>
  check.expect_eq_const(%narrow, dense<[-1, 0, 2, 44]> : tensor<4xi8>) : tensor<4xi8>
  %b = stablehlo.convert %i : (tensor<4xi32>) -> tensor<4xi1>
  %back = stablehlo.convert %b : (tensor<4xi1>) -> tensor<4xf32>
  check.expect_almost_eq_const(%back, dense<[1.0, 0.0, 1.0, 1.0]> : tensor<4xf32>) : tensor<4xf32>
  %one = util.unfoldable_constant dense<[1.0, -2.0]> : tensor<2xf32>
  %bits = stablehlo.bitcast_convert %one : (tensor<2xf32>) -> tensor<2xi32>
  check.expect_eq_const(%bits, dense<[1065353216, -1073741824]> : tensor<2xi32>) : tensor<2xi32>
  return
}

func.func @chlo_broadcast() {
  %a = util.unfoldable_constant dense<[[1.0], [2.0]]> : tensor<2x1xf32>
  %b = util.unfoldable_constant dense<[10.0, 20.0, 30.0]> : tensor<3xf32>
  %r = chlo.broadcast_add %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  check.expect_almost_eq_const(%r, dense<[[11.0, 21.0, 31.0], [12.0, 22.0, 32.0]]> : tensor<2x3xf32>) : tensor<2x3xf32>
  %c = util.unfoldable_constant dense<[1.0, 2.0]> : tensor<2xf32>
  %m = chlo.broadcast_multiply %c, %r {broadcast_dimensions = array<i64: 0>} : (tensor<2xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  check.expect_almost_eq_const(%m, dense<[[11.0, 21.0, 31.0], [24.0, 44.0, 64.0]]> : tensor<2x3xf32>) : tensor<2x3xf32>
  return
}

func.func @map_and_batch_norm_inference() {
  %a = util.unfoldable_constant dense<[[0.0, 1.0], [2.0, 3.0]]> : tensor<2x2xf32>
  %b = util.unfoldable_constant dense<[[4.0, 5.0], [6.0, 7.0]]> : tensor<2x2xf32>
  %m = "stablehlo.map"(%a, %b) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %p = stablehlo.multiply %x, %y : tensor<f32>
      %s = stablehlo.subtract %p, %x : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {dimensions = array<i64: 0, 1>} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  check.expect_almost_eq_const(%m, dense<[[0.0, 4.0], [10.0, 18.0]]> : tensor<2x2xf32>) : tensor<2x2xf32>
  %scale = util.unfoldable_constant dense<[1.0, 2.0]> : tensor<2xf32>
  %offset = util.unfoldable_constant dense<[1.0, 1.0]> : tensor<2xf32>
  %mean = util.unfoldable_constant dense<[1.0, 2.0]> : tensor<2xf32>
  %var = util.unfoldable_constant dense<[4.0, 1.0]> : tensor<2xf32>
  %n = "stablehlo.batch_norm_inference"(%a, %scale, %offset, %mean, %var) {epsilon = 0.0 : f32, feature_index = 1 : i64} : (tensor<2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  check.expect_almost_eq_const(%n, dense<[[0.5, -1.0], [1.5, 3.0]]> : tensor<2x2xf32>) : tensor<2x2xf32>
  return
}
