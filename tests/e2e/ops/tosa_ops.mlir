// TOSA ops (auto-detected input type: lowered to linalg by MLIR's TOSA passes), expected values
// from the TOSA 1.0 specification's pseudocode.

func.func @add_sub() {
  %a = util.unfoldable_constant dense<[[1.0, -2.0, 3.5, 0.25]]> : tensor<1x4xf32>
  %b = util.unfoldable_constant dense<[[0.5], [2.0]]> : tensor<2x1xf32>
  %s = tosa.add %a, %b : (tensor<1x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %d = tosa.sub %s, %b : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  check.expect_almost_eq_const(%s, dense<[[1.5, -1.5, 4.0, 0.75], [3.0, 0.0, 5.5, 2.25]]> : tensor<2x4xf32>) : tensor<2x4xf32>
  check.expect_almost_eq_const(%d, dense<[[1.0, -2.0, 3.5, 0.25], [1.0, -2.0, 3.5, 0.25]]> : tensor<2x4xf32>) : tensor<2x4xf32>
  return
}

func.func @mul_with_shift() {
  %a = util.unfoldable_constant dense<[10, 7, -9, 100]> : tensor<4xi32>
  %b = util.unfoldable_constant dense<3> : tensor<4xi32>
  %shift = "tosa.const"() <{values = dense<1> : tensor<1xi8>}> : () -> tensor<1xi8>
  %no_shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %r = tosa.mul %a, %b, %shift : (tensor<4xi32>, tensor<4xi32>, tensor<1xi8>) -> tensor<4xi32>
  %p = tosa.mul %a, %b, %no_shift : (tensor<4xi32>, tensor<4xi32>, tensor<1xi8>) -> tensor<4xi32>
  // (a * b + (1 << (shift - 1))) >> shift
  check.expect_eq_const(%r, dense<[15, 11, -13, 150]> : tensor<4xi32>) : tensor<4xi32>
  check.expect_eq_const(%p, dense<[30, 21, -27, 300]> : tensor<4xi32>) : tensor<4xi32>
  return
}

func.func @maximum_minimum_abs() {
  %a = util.unfoldable_constant dense<[1.0, -2.0, 3.5, -0.25]> : tensor<4xf32>
  %b = util.unfoldable_constant dense<[0.5, -1.0, 4.0, -3.0]> : tensor<4xf32>
  %max = tosa.maximum %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %min = tosa.minimum %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %abs = tosa.abs %a : (tensor<4xf32>) -> tensor<4xf32>
  check.expect_almost_eq_const(%max, dense<[1.0, -1.0, 4.0, -0.25]> : tensor<4xf32>) : tensor<4xf32>
  check.expect_almost_eq_const(%min, dense<[0.5, -2.0, 3.5, -3.0]> : tensor<4xf32>) : tensor<4xf32>
  check.expect_almost_eq_const(%abs, dense<[1.0, 2.0, 3.5, 0.25]> : tensor<4xf32>) : tensor<4xf32>
  return
}

func.func @transcendentals() {
  %a = util.unfoldable_constant dense<[-2.0, -0.5, 0.5, 3.0]> : tensor<4xf32>
  %p = util.unfoldable_constant dense<[0.25, 1.0, 4.0, 16.0]> : tensor<4xf32>
  %exp = tosa.exp %a : (tensor<4xf32>) -> tensor<4xf32>
  %log = tosa.log %p : (tensor<4xf32>) -> tensor<4xf32>
  %tanh = tosa.tanh %a : (tensor<4xf32>) -> tensor<4xf32>
  %sigmoid = tosa.sigmoid %a : (tensor<4xf32>) -> tensor<4xf32>
  %erf = tosa.erf %a : (tensor<4xf32>) -> tensor<4xf32>
  %reciprocal = tosa.reciprocal %p : (tensor<4xf32>) -> tensor<4xf32>
  %rsqrt = tosa.rsqrt %p : (tensor<4xf32>) -> tensor<4xf32>
  check.expect_almost_eq_const(%exp, dense<[0.135335, 0.606531, 1.648721, 20.085537]> : tensor<4xf32>) : tensor<4xf32>
  check.expect_almost_eq_const(%log, dense<[-1.386294, 0.0, 1.386294, 2.772589]> : tensor<4xf32>) : tensor<4xf32>
  check.expect_almost_eq_const(%tanh, dense<[-0.964028, -0.462117, 0.462117, 0.995055]> : tensor<4xf32>) : tensor<4xf32>
  check.expect_almost_eq_const(%sigmoid, dense<[0.119203, 0.377541, 0.622459, 0.952574]> : tensor<4xf32>) : tensor<4xf32>
  check.expect_almost_eq_const(%erf, dense<[-0.995322, -0.520500, 0.520500, 0.999978]> : tensor<4xf32>) : tensor<4xf32>
  check.expect_almost_eq_const(%reciprocal, dense<[4.0, 1.0, 0.25, 0.0625]> : tensor<4xf32>) : tensor<4xf32>
  check.expect_almost_eq_const(%rsqrt, dense<[2.0, 1.0, 0.5, 0.25]> : tensor<4xf32>) : tensor<4xf32>
  return
}

func.func @clamp() {
  %a = util.unfoldable_constant dense<[-3.0, 0.5, 6.5, 2.0]> : tensor<4xf32>
  %r = tosa.clamp %a {min_val = 0.0 : f32, max_val = 6.0 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  check.expect_almost_eq_const(%r, dense<[0.0, 0.5, 6.0, 2.0]> : tensor<4xf32>) : tensor<4xf32>
  return
}

func.func @reductions() {
  %a = util.unfoldable_constant dense<[[1.0, 5.0, -2.0], [4.0, -1.0, 0.5]]> : tensor<2x3xf32>
  %sum = tosa.reduce_sum %a {axis = 1 : i32} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  %max = tosa.reduce_max %a {axis = 0 : i32} : (tensor<2x3xf32>) -> tensor<1x3xf32>
  %arg = tosa.argmax %a {axis = 1 : i32} : (tensor<2x3xf32>) -> tensor<2xi32>
  check.expect_almost_eq_const(%sum, dense<[[4.0], [3.5]]> : tensor<2x1xf32>) : tensor<2x1xf32>
  check.expect_almost_eq_const(%max, dense<[[4.0, 5.0, 0.5]]> : tensor<1x3xf32>) : tensor<1x3xf32>
  check.expect_eq_const(%arg, dense<[1, 0]> : tensor<2xi32>) : tensor<2xi32>
  return
}

func.func @matmul() {
  %a = util.unfoldable_constant dense<[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]> : tensor<1x2x3xf32>
  %b = util.unfoldable_constant dense<[[[1.0, 0.0], [0.0, 1.0], [2.0, -1.0]]]> : tensor<1x3x2xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.matmul %a, %b, %zp, %zp : (tensor<1x2x3xf32>, tensor<1x3x2xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x2x2xf32>
  check.expect_almost_eq_const(%r, dense<[[[7.0, -1.0], [16.0, -1.0]]]> : tensor<1x2x2xf32>) : tensor<1x2x2xf32>
  return
}

func.func @conv2d() {
  %x = util.unfoldable_constant dense<[[[[0.0], [1.0], [2.0], [3.0]], [[4.0], [5.0], [6.0], [7.0]], [[8.0], [9.0], [10.0], [11.0]], [[12.0], [13.0], [14.0], [15.0]]]]> : tensor<1x4x4x1xf32>
  %w = "tosa.const"() <{values = dense<[[[[1.0], [0.0], [-1.0]], [[2.0], [0.0], [-2.0]], [[1.0], [0.0], [-1.0]]]]> : tensor<1x3x3x1xf32>}> : () -> tensor<1x3x3x1xf32>
  %bias = "tosa.const"() <{values = dense<0.5> : tensor<1xf32>}> : () -> tensor<1xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.conv2d %x, %w, %bias, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>} : (tensor<1x4x4x1xf32>, tensor<1x3x3x1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x1xf32>
  check.expect_almost_eq_const(%r, dense<[[[[-6.5], [-5.5], [-5.5], [10.5]], [[-19.5], [-7.5], [-7.5], [24.5]], [[-35.5], [-7.5], [-7.5], [40.5]], [[-34.5], [-5.5], [-5.5], [38.5]]]]> : tensor<1x4x4x1xf32>) : tensor<1x4x4x1xf32>
  return
}

func.func @depthwise_conv2d() {
  // Channel c of the 3x3 image holds (c + 1) * (3 * h + w); the 2x2 filters are all ones
  // (channel 0) and [[1, 0], [0, -1]] (channel 1), stride 1, no padding.
  %x = util.unfoldable_constant dense<[[[[0.0, 0.0], [1.0, 2.0], [2.0, 4.0]], [[3.0, 6.0], [4.0, 8.0], [5.0, 10.0]], [[6.0, 12.0], [7.0, 14.0], [8.0, 16.0]]]]> : tensor<1x3x3x2xf32>
  %w = "tosa.const"() <{values = dense<[[[[1.0], [1.0]], [[1.0], [0.0]]], [[[1.0], [0.0]], [[1.0], [-1.0]]]]> : tensor<2x2x2x1xf32>}> : () -> tensor<2x2x2x1xf32>
  %bias = "tosa.const"() <{values = dense<0.0> : tensor<2xf32>}> : () -> tensor<2xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.depthwise_conv2d %x, %w, %bias, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x3x3x2xf32>, tensor<2x2x2x1xf32>, tensor<2xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x2x2x2xf32>
  check.expect_almost_eq_const(%r, dense<[[[[8.0, -8.0], [12.0, -8.0]], [[20.0, -8.0], [24.0, -8.0]]]]> : tensor<1x2x2x2xf32>) : tensor<1x2x2x2xf32>
  return
}

func.func @pooling() {
  %x = util.unfoldable_constant dense<[[[[0.0], [1.0], [2.0], [3.0]], [[4.0], [5.0], [6.0], [7.0]], [[8.0], [9.0], [10.0], [11.0]], [[12.0], [13.0], [14.0], [15.0]]]]> : tensor<1x4x4x1xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %avg = tosa.avg_pool2d %x, %zp, %zp {acc_type = f32, kernel = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>} : (tensor<1x4x4x1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x2x2x1xf32>
  %max = tosa.max_pool2d %x {kernel = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>} : (tensor<1x4x4x1xf32>) -> tensor<1x2x2x1xf32>
  check.expect_almost_eq_const(%avg, dense<[[[[2.5], [4.5]], [[10.5], [12.5]]]]> : tensor<1x2x2x1xf32>) : tensor<1x2x2x1xf32>
  check.expect_almost_eq_const(%max, dense<[[[[5.0], [7.0]], [[13.0], [15.0]]]]> : tensor<1x2x2x1xf32>) : tensor<1x2x2x1xf32>
  return
}

func.func @data_movement() {
  %a = util.unfoldable_constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %t = tosa.transpose %a {perms = array<i32: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %shape = tosa.const_shape {values = dense<[3, 2]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %r = tosa.reshape %a, %shape : (tensor<2x3xf32>, !tosa.shape<2>) -> tensor<3x2xf32>
  %start = tosa.const_shape {values = dense<[0, 1]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %size = tosa.const_shape {values = dense<[2, 2]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %s = tosa.slice %a, %start, %size : (tensor<2x3xf32>, !tosa.shape<2>, !tosa.shape<2>) -> tensor<2x2xf32>
  %c = tosa.concat %a, %a {axis = 0 : i32} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %padding = tosa.const_shape {values = dense<[1, 0, 0, 1]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %pad_value = "tosa.const"() <{values = dense<-1.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %p = tosa.pad %a, %padding, %pad_value : (tensor<2x3xf32>, !tosa.shape<4>, tensor<1xf32>) -> tensor<3x4xf32>
  check.expect_almost_eq_const(%t, dense<[[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]> : tensor<3x2xf32>) : tensor<3x2xf32>
  check.expect_almost_eq_const(%r, dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>) : tensor<3x2xf32>
  check.expect_almost_eq_const(%s, dense<[[2.0, 3.0], [5.0, 6.0]]> : tensor<2x2xf32>) : tensor<2x2xf32>
  check.expect_almost_eq_const(%c, dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<4x3xf32>) : tensor<4x3xf32>
  check.expect_almost_eq_const(%p, dense<[[-1.0, -1.0, -1.0, -1.0], [1.0, 2.0, 3.0, -1.0], [4.0, 5.0, 6.0, -1.0]]> : tensor<3x4xf32>) : tensor<3x4xf32>
  return
}

func.func @gather() {
  %values = util.unfoldable_constant dense<[[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]]> : tensor<1x3x2xf32>
  %indices = util.unfoldable_constant dense<[[2, 0, 2, 1]]> : tensor<1x4xi32>
  %r = tosa.gather %values, %indices : (tensor<1x3x2xf32>, tensor<1x4xi32>) -> tensor<1x4x2xf32>
  check.expect_almost_eq_const(%r, dense<[[[5.0, 6.0], [1.0, 2.0], [5.0, 6.0], [3.0, 4.0]]]> : tensor<1x4x2xf32>) : tensor<1x4x2xf32>
  return
}

func.func @cast() {
  %a = util.unfoldable_constant dense<[1.25, -2.75, 3.5, 2.5]> : tensor<4xf32>
  %i = util.unfoldable_constant dense<[7, -3, 0, 100]> : tensor<4xi32>
  // float -> int rounds to nearest, ties to even
  %r = tosa.cast %a : (tensor<4xf32>) -> tensor<4xi32>
  %f = tosa.cast %i : (tensor<4xi32>) -> tensor<4xf32>
  check.expect_eq_const(%r, dense<[1, -3, 4, 2]> : tensor<4xi32>) : tensor<4xi32>
  check.expect_almost_eq_const(%f, dense<[7.0, -3.0, 0.0, 100.0]> : tensor<4xf32>) : tensor<4xf32>
  return
}

func.func @rescale() {
  %a = util.unfoldable_constant dense<[100, -50, 7, 0]> : tensor<4xi32>
  // scale = multiplier * 2^-shift = 2^30 * 2^-31 = 0.5, rounding half up
  %multiplier = "tosa.const"() <{values = dense<1073741824> : tensor<1xi32>}> : () -> tensor<1xi32>
  %shift = "tosa.const"() <{values = dense<31> : tensor<1xi8>}> : () -> tensor<1xi8>
  %izp = "tosa.const"() <{values = dense<0> : tensor<1xi32>}> : () -> tensor<1xi32>
  %ozp = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %r = tosa.rescale %a, %multiplier, %shift, %izp, %ozp {scale32 = true, rounding_mode = SINGLE_ROUND, per_channel = false, input_unsigned = false, output_unsigned = false} : (tensor<4xi32>, tensor<1xi32>, tensor<1xi8>, tensor<1xi32>, tensor<1xi8>) -> tensor<4xi8>
  %w = tosa.cast %r : (tensor<4xi8>) -> tensor<4xi32>
  check.expect_eq_const(%w, dense<[50, -25, 4, 0]> : tensor<4xi32>) : tensor<4xi32>
  return
}

func.func @compare_select() {
  %a = util.unfoldable_constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %b = util.unfoldable_constant dense<[4.0, 2.0, 1.0, 4.5]> : tensor<4xf32>
  %eq = tosa.equal %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %gt = tosa.greater %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %sel = tosa.select %gt, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %eq_i32 = tosa.cast %eq : (tensor<4xi1>) -> tensor<4xi32>
  %gt_i32 = tosa.cast %gt : (tensor<4xi1>) -> tensor<4xi32>
  check.expect_eq_const(%eq_i32, dense<[0, 1, 0, 0]> : tensor<4xi32>) : tensor<4xi32>
  check.expect_eq_const(%gt_i32, dense<[0, 0, 1, 0]> : tensor<4xi32>) : tensor<4xi32>
  check.expect_almost_eq_const(%sel, dense<[4.0, 2.0, 3.0, 4.5]> : tensor<4xf32>) : tensor<4xf32>
  return
}

func.func @table() {
  %x = util.unfoldable_constant dense<[-128, -1, 0, 127, 5]> : tensor<5xi8>
  // out = table[x + 128]; entry i of the table is (7 * i) mod 251 - 125
  %table = "tosa.const"() <{values = dense<[
      -125, -118, -111, -104, -97, -90, -83, -76, -69, -62, -55, -48, -41, -34, -27, -20,
      -13, -6, 1, 8, 15, 22, 29, 36, 43, 50, 57, 64, 71, 78, 85, 92,
      99, 106, 113, 120, -124, -117, -110, -103, -96, -89, -82, -75, -68, -61, -54, -47,
      -40, -33, -26, -19, -12, -5, 2, 9, 16, 23, 30, 37, 44, 51, 58, 65,
      72, 79, 86, 93, 100, 107, 114, 121, -123, -116, -109, -102, -95, -88, -81, -74,
      -67, -60, -53, -46, -39, -32, -25, -18, -11, -4, 3, 10, 17, 24, 31, 38,
      45, 52, 59, 66, 73, 80, 87, 94, 101, 108, 115, 122, -122, -115, -108, -101,
      -94, -87, -80, -73, -66, -59, -52, -45, -38, -31, -24, -17, -10, -3, 4, 11,
      18, 25, 32, 39, 46, 53, 60, 67, 74, 81, 88, 95, 102, 109, 116, 123,
      -121, -114, -107, -100, -93, -86, -79, -72, -65, -58, -51, -44, -37, -30, -23, -16,
      -9, -2, 5, 12, 19, 26, 33, 40, 47, 54, 61, 68, 75, 82, 89, 96,
      103, 110, 117, 124, -120, -113, -106, -99, -92, -85, -78, -71, -64, -57, -50, -43,
      -36, -29, -22, -15, -8, -1, 6, 13, 20, 27, 34, 41, 48, 55, 62, 69,
      76, 83, 90, 97, 104, 111, 118, 125, -119, -112, -105, -98, -91, -84, -77, -70,
      -63, -56, -49, -42, -35, -28, -21, -14, -7, 0, 7, 14, 21, 28, 35, 42,
      49, 56, 63, 70, 77, 84, 91, 98, 105, 112, 119, -125, -118, -111, -104, -97]> : tensor<256xi8>}> : () -> tensor<256xi8>
  %r = tosa.table %x, %table : (tensor<5xi8>, tensor<256xi8>) -> tensor<5xi8>
  %w = tosa.cast %r : (tensor<5xi8>) -> tensor<5xi32>
  check.expect_eq_const(%w, dense<[-125, 11, 18, -97, 53]> : tensor<5xi32>) : tensor<5xi32>
  return
}
