// stablehlo.rng_bit_generator on tensor<4xi32> states, read as IREE's e2e philox and three_fry
// tests read them: the key's two words (low, high), the counter's (high, low); the new state is
// written back in the same order. Expected values from JAX on CPU (jax.lax.rng_bit_generator,
// i.e. XLA) on the same 64-bit key and counter; DEFAULT is PHILOX there. Counters that carry,
// odd and unit last dims, and 8- and 16-bit outputs (the low bits of the 32-bit ones).
func.func @three_fry_even_dim() {
  %key = util.unfoldable_constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  %s0, %b0 = stablehlo.rng_bit_generator %key, algorithm = THREE_FRY : (tensor<4xi32>) -> (tensor<4xi32>, tensor<2x3xi32>)
  check.expect_eq_const(%b0, dense<[[-1997982863, -1008514867, 1419974734], [-261361928, 1226850200, -277475325]]> : tensor<2x3xi32>) : tensor<2x3xi32>
  check.expect_eq_const(%s0, dense<[1, 2, 3, 7]> : tensor<4xi32>) : tensor<4xi32>
  return
}

func.func @three_fry_no_even_dim() {
  %key = util.unfoldable_constant dense<[-1640531527, 2135587861, -2, -1]> : tensor<4xi32>
  %s0, %b0 = stablehlo.rng_bit_generator %key, algorithm = THREE_FRY : (tensor<4xi32>) -> (tensor<4xi32>, tensor<3x5xi32>)
  check.expect_eq_const(%b0, dense<[[-207989337, 345234226, 781362995, -1304584557, -1233950313], [1060547709, 1799010323, -1014903671, 1860293919, 845333442], [-954004525, -148268809, 494108188, 1250414132, -1251066623]]> : tensor<3x5xi32>) : tensor<3x5xi32>
  check.expect_eq_const(%s0, dense<[-1640531527, 2135587861, -1, 8]> : tensor<4xi32>) : tensor<4xi32>
  return
}

func.func @philox_counter_carry() {
  %key = util.unfoldable_constant dense<[-559038737, 19088743, -1, -1]> : tensor<4xi32>
  %s0, %b0 = stablehlo.rng_bit_generator %key, algorithm = PHILOX : (tensor<4xi32>) -> (tensor<4xi32>, tensor<9xi32>)
  check.expect_eq_const(%b0, dense<[1070300643, 1779649978, 1115947419, 158828917, 903815339, -1039022800, -1856438382, 149210704, 1668352878]> : tensor<9xi32>) : tensor<9xi32>
  check.expect_eq_const(%s0, dense<[-559038737, 19088743, 0, 2]> : tensor<4xi32>) : tensor<4xi32>
  return
}

func.func @default_is_philox() {
  %key = util.unfoldable_constant dense<[7, 0, 0, 42]> : tensor<4xi32>
  %s0, %b0 = stablehlo.rng_bit_generator %key, algorithm = DEFAULT : (tensor<4xi32>) -> (tensor<4xi32>, tensor<2x2xi32>)
  check.expect_eq_const(%b0, dense<[[1152053090, -1590245643], [-979048123, 1300955287]]> : tensor<2x2xi32>) : tensor<2x2xi32>
  check.expect_eq_const(%s0, dense<[7, 0, 0, 43]> : tensor<4xi32>) : tensor<4xi32>
  return
}

func.func @philox_iree() {
  %key = util.unfoldable_constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  %s0, %b0 = stablehlo.rng_bit_generator %key, algorithm = PHILOX : (tensor<4xi32>) -> (tensor<4xi32>, tensor<8xi32>)
  check.expect_eq_const(%b0, dense<[-1788415499, 854201270, -855525523, 2043148971, 110723240, 146396481, -1258660138, -1968502964]> : tensor<8xi32>) : tensor<8xi32>
  check.expect_eq_const(%s0, dense<[1, 2, 3, 6]> : tensor<4xi32>) : tensor<4xi32>
  return
}

func.func @three_fry_iree() {
  %key = util.unfoldable_constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  %s0, %b0 = stablehlo.rng_bit_generator %key, algorithm = THREE_FRY : (tensor<4xi32>) -> (tensor<4xi32>, tensor<8xi32>)
  check.expect_eq_const(%b0, dense<[-1997982863, -261361928, -1008514867, 1226850200, 1419974734, -277475325, 1033030661, -1926332264]> : tensor<8xi32>) : tensor<8xi32>
  check.expect_eq_const(%s0, dense<[1, 2, 3, 8]> : tensor<4xi32>) : tensor<4xi32>
  return
}

func.func @narrow_outputs() {
  %key = util.unfoldable_constant dense<[-1640531527, 2135587861, -1, -2]> : tensor<4xi32>
  %s0, %b0 = stablehlo.rng_bit_generator %key, algorithm = PHILOX : (tensor<4xi32>) -> (tensor<4xi32>, tensor<3x5xi16>)
  %s1, %b1 = stablehlo.rng_bit_generator %key, algorithm = PHILOX : (tensor<4xi32>) -> (tensor<4xi32>, tensor<2x7x1xi8>)
  %s2, %b2 = stablehlo.rng_bit_generator %key, algorithm = THREE_FRY : (tensor<4xi32>) -> (tensor<4xi32>, tensor<3x5xi16>)
  %s3, %b3 = stablehlo.rng_bit_generator %key, algorithm = THREE_FRY : (tensor<4xi32>) -> (tensor<4xi32>, tensor<2x7x1xi8>)
  check.expect_eq_const(%b0, dense<[[-15515, 8029, -22969, 12884, 3441], [-32618, 39, -8202, 22558, 12457], [-20165, -937, 32656, 29270, 22557]]> : tensor<3x5xi16>) : tensor<3x5xi16>
  check.expect_eq_const(%s0, dense<[-1640531527, 2135587861, 0, 2]> : tensor<4xi32>) : tensor<4xi32>
  check.expect_eq_const(%b1, dense<[[[101], [93], [71], [84], [113], [-106], [39]], [[-10], [30], [-87], [59], [87], [-112], [86]]]> : tensor<2x7x1xi8>) : tensor<2x7x1xi8>
  check.expect_eq_const(%s1, dense<[-1640531527, 2135587861, 0, 2]> : tensor<4xi32>) : tensor<4xi32>
  check.expect_eq_const(%b2, dense<[[4400, 9842, 29246, 13542, 23654], [-21232, -9262, 27986, -1276, 6223], [20615, -10073, 27794, 13129, 14817]]> : tensor<3x5xi16>) : tensor<3x5xi16>
  check.expect_eq_const(%s2, dense<[-1640531527, 2135587861, 0, 7]> : tensor<4xi32>) : tensor<4xi32>
  check.expect_eq_const(%b3, dense<[[[48], [62], [102], [16], [82], [79], [-121]], [[114], [-26], [-105], [-46], [4], [-85], [-89]]]> : tensor<2x7x1xi8>) : tensor<2x7x1xi8>
  check.expect_eq_const(%s3, dense<[-1640531527, 2135587861, 0, 5]> : tensor<4xi32>) : tensor<4xi32>
  return
}
