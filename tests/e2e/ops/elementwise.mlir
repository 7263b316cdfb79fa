// Elementwise arith/math ops, IREE e2e style: unfoldable inputs, expected values as constants.
func.func @addf() {
  %a = util.unfoldable_constant dense<[1.0, 2.0, 3.0, 4.0, 5.0]> : tensor<5xf32>
  %b = util.unfoldable_constant dense<[0.5, -2.0, 10.0, 0.25, -5.0]> : tensor<5xf32>
  %r = arith.addf %a, %b : tensor<5xf32>
  check.expect_almost_eq_const(%r, dense<[1.5, 0.0, 13.0, 4.25, 0.0]> : tensor<5xf32>) : tensor<5xf32>
  return
}

func.func @chain_sub_mul_max() {
  %a = util.unfoldable_constant dense<[[1.0, -2.0, 3.0], [4.0, -5.0, 6.0]]> : tensor<2x3xf32>
  %b = util.unfoldable_constant dense<[[2.0, 2.0, 2.0], [0.5, 0.5, 0.5]]> : tensor<2x3xf32>
  %z = arith.constant dense<0.0> : tensor<2x3xf32>
  %0 = arith.mulf %a, %b : tensor<2x3xf32>
  %1 = arith.subf %0, %b : tensor<2x3xf32>
  %2 = arith.maximumf %1, %z : tensor<2x3xf32>
  check.expect_almost_eq_const(%2, dense<[[0.0, 0.0, 4.0], [1.5, 0.0, 2.5]]> : tensor<2x3xf32>) : tensor<2x3xf32>
  return
}

func.func @math_exp_sqrt_abs() {
  %a = util.unfoldable_constant dense<[0.0, 1.0, -4.0, 9.0]> : tensor<4xf32>
  %e = math.exp %a : tensor<4xf32>
  %ab = math.absf %a : tensor<4xf32>
  %s = math.sqrt %ab : tensor<4xf32>
  check.expect_almost_eq_const(%e, dense<[1.0, 2.7182817, 0.0183156, 8103.0839]> : tensor<4xf32>, atol 1.0e-2) : tensor<4xf32>
  check.expect_almost_eq_const(%s, dense<[0.0, 1.0, 2.0, 3.0]> : tensor<4xf32>) : tensor<4xf32>
  return
}

func.func @integers_and_compare_select() {
  %a = util.unfoldable_constant dense<[7, -3, 12, 0]> : tensor<4xi32>
  %b = util.unfoldable_constant dense<[2, 5, -4, 9]> : tensor<4xi32>
  %m = arith.muli %a, %b : tensor<4xi32>
  %c = arith.cmpi slt, %a, %b : tensor<4xi32>
  %s = arith.select %c, %a, %b : tensor<4xi1>, tensor<4xi32>
  check.expect_eq_const(%m, dense<[14, -15, -48, 0]> : tensor<4xi32>) : tensor<4xi32>
  check.expect_eq_const(%s, dense<[2, -3, -4, 0]> : tensor<4xi32>) : tensor<4xi32>
  return
}

func.func @casts() {
  %a = util.unfoldable_constant dense<[1.75, -2.5, 300.0]> : tensor<3xf32>
  %i = arith.fptosi %a : tensor<3xf32> to tensor<3xi32>
  %h = arith.truncf %a : tensor<3xf32> to tensor<3xf16>
  %f = arith.extf %h : tensor<3xf16> to tensor<3xf32>
  check.expect_eq_const(%i, dense<[1, -2, 300]> : tensor<3xi32>) : tensor<3xi32>
  check.expect_almost_eq_const(%f, dense<[1.75, -2.5, 300.0]> : tensor<3xf32>) : tensor<3xf32>
  return
}

func.func @scalar_check() {
  %a = util.unfoldable_constant 3 : i32
  %b = util.unfoldable_constant 3 : i32
  %eq = arith.cmpi eq, %a, %b : i32
  %t = arith.extui %eq : i1 to i32
  check.expect_true(%t) : i32
  return
}

// Signed remainder takes the dividend's sign (C, arith.remsi). Vulkan leaves OpSRem undefined for
// negative operands, so this runs on every GPU driver too (tests/frontends).
func.func @signed_remainder() {
  %a = util.unfoldable_constant dense<[-5, 5, -5, 5, 7, -2147483648, 0, -7]> : tensor<8xi32>
  %b = util.unfoldable_constant dense<[4, -4, -4, 4, 3, 3, -3, 7]> : tensor<8xi32>
  %r = arith.remsi %a, %b : tensor<8xi32>
  check.expect_eq_const(%r, dense<[-1, 1, -1, 1, 1, -2, 0, 0]> : tensor<8xi32>) : tensor<8xi32>
  %a8 = util.unfoldable_constant dense<[-128, 127, -7]> : tensor<3xi8>
  %b8 = util.unfoldable_constant dense<[3, -5, 2]> : tensor<3xi8>
  %r8 = arith.remsi %a8, %b8 : tensor<3xi8>
  check.expect_eq_const(%r8, dense<[-2, 2, -1]> : tensor<3xi8>) : tensor<3xi8>
  return
}

// math.erfc (declared by pyree: xDSL lacks it); erfc(3) is accurate in the tail, not 1 - erf(3).
func.func @erfc_tail() {
  %x = util.unfoldable_constant dense<[0.0, -0.0, 1.0, -1.0, 3.0, 0x7F800000, 0xFF800000]> : tensor<7xf32>
  %r = math.erfc %x : tensor<7xf32>
  check.expect_almost_eq_const(%r, dense<[1.0, 1.0, 0.15729920705028513, 1.8427007929497148, 2.209049699858544e-05, 0.0, 2.0]> : tensor<7xf32>, atol 1.0e-6) : tensor<7xf32>
  return
}

// Integer casts act on bits, as arith defines them: a signed i1's true is -1, trunci keeps the low
// bits. The same on the device (unfoldable), folded on tensors and folded on scalars.
func.func @i1_and_narrowing_casts() {
  %b = util.unfoldable_constant dense<[true, false]> : tensor<2xi1>
  %bc = arith.constant dense<[true, false]> : tensor<2xi1>
  %f = arith.sitofp %b : tensor<2xi1> to tensor<2xf32>
  %fc = arith.sitofp %bc : tensor<2xi1> to tensor<2xf32>
  %u = arith.uitofp %b : tensor<2xi1> to tensor<2xf32>
  %s = arith.extsi %b : tensor<2xi1> to tensor<2xi32>
  check.expect_eq_const(%f, dense<[-1.0, 0.0]> : tensor<2xf32>) : tensor<2xf32>
  check.expect_eq_const(%fc, dense<[-1.0, 0.0]> : tensor<2xf32>) : tensor<2xf32>
  check.expect_eq_const(%u, dense<[1.0, 0.0]> : tensor<2xf32>) : tensor<2xf32>
  check.expect_eq_const(%s, dense<[-1, 0]> : tensor<2xi32>) : tensor<2xi32>
  %x = util.unfoldable_constant dense<[300, -129, 2, 255, -1]> : tensor<5xi32>
  %t8 = arith.trunci %x : tensor<5xi32> to tensor<5xi8>
  %e8 = arith.extui %t8 : tensor<5xi8> to tensor<5xi32>
  %t1 = arith.trunci %x : tensor<5xi32> to tensor<5xi1>
  %e1 = arith.extui %t1 : tensor<5xi1> to tensor<5xi32>
  check.expect_eq_const(%t8, dense<[44, 127, 2, -1, -1]> : tensor<5xi8>) : tensor<5xi8>
  check.expect_eq_const(%e8, dense<[44, 127, 2, 255, 255]> : tensor<5xi32>) : tensor<5xi32>
  check.expect_eq_const(%e1, dense<[0, 1, 0, 1, 1]> : tensor<5xi32>) : tensor<5xi32>
  %true = arith.constant true
  %c300 = arith.constant 300 : i32
  %sf = arith.sitofp %true : i1 to f32
  %st = arith.trunci %c300 : i32 to i8
  %se = arith.extsi %true : i1 to i32
  %folded = tensor.from_elements %sf : tensor<1xf32>
  %folded8 = tensor.from_elements %st : tensor<1xi8>
  %folded32 = tensor.from_elements %se : tensor<1xi32>
  check.expect_eq_const(%folded, dense<[-1.0]> : tensor<1xf32>) : tensor<1xf32>
  check.expect_eq_const(%folded8, dense<[44]> : tensor<1xi8>) : tensor<1xi8>
  check.expect_eq_const(%folded32, dense<[-1]> : tensor<1xi32>) : tensor<1xi32>
  return
}
