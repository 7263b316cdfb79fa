// stablehlo.rng_bit_generator with JAX's key layout (tensor<4xi32>: each 64-bit state word as
// (low, high), which i64 demotion leaves alone); expected values from JAX on CPU
// (jax.lax.rng_bit_generator, i.e. XLA), whose DEFAULT is PHILOX.
func.func @three_fry_even_dim() {
  %key = util.unfoldable_constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  %state, %bits = stablehlo.rng_bit_generator %key, algorithm = THREE_FRY : (tensor<4xi32>) -> (tensor<4xi32>, tensor<2x3xi32>)
  check.expect_eq_const(%bits, dense<[[1576285164, 740599976, -1858574781], [-2045306482, -1869284770, 1497962777]]> : tensor<2x3xi32>) : tensor<2x3xi32>
  check.expect_eq_const(%state, dense<[1, 2, 6, 4]> : tensor<4xi32>) : tensor<4xi32>
  return
}

func.func @three_fry_no_even_dim() {
  %key = util.unfoldable_constant dense<[-1640531527, 2135587861, -2, -1]> : tensor<4xi32>
  %state, %bits = stablehlo.rng_bit_generator %key, algorithm = THREE_FRY : (tensor<4xi32>) -> (tensor<4xi32>, tensor<3x5xi32>)
  check.expect_eq_const(%bits, dense<[[414847280, -665704846, 1991406142, 2128032998, 326130790], [-1441682160, 270130130, 28208466, 2138110724, -815916977], [1022447751, 884660391, 1015573650, 2017801033, -1521665567]]> : tensor<3x5xi32>) : tensor<3x5xi32>
  check.expect_eq_const(%state, dense<[-1640531527, 2135587861, 7, 0]> : tensor<4xi32>) : tensor<4xi32>
  return
}

func.func @philox_counter_carry() {
  %key = util.unfoldable_constant dense<[-559038737, 19088743, -1, -1]> : tensor<4xi32>
  %state, %bits = stablehlo.rng_bit_generator %key, algorithm = PHILOX : (tensor<4xi32>) -> (tensor<4xi32>, tensor<9xi32>)
  check.expect_eq_const(%bits, dense<[1070300643, 1779649978, 1115947419, 158828917, 903815339, -1039022800, -1856438382, 149210704, 1668352878]> : tensor<9xi32>) : tensor<9xi32>
  check.expect_eq_const(%state, dense<[-559038737, 19088743, 2, 0]> : tensor<4xi32>) : tensor<4xi32>
  return
}

func.func @default_is_philox() {
  %key = util.unfoldable_constant dense<[7, 0, 42, 0]> : tensor<4xi32>
  %state, %bits = stablehlo.rng_bit_generator %key, algorithm = DEFAULT : (tensor<4xi32>) -> (tensor<4xi32>, tensor<2x2xi32>)
  check.expect_eq_const(%bits, dense<[[1152053090, -1590245643], [-979048123, 1300955287]]> : tensor<2x2xi32>) : tensor<2x2xi32>
  check.expect_eq_const(%state, dense<[7, 0, 43, 0]> : tensor<4xi32>) : tensor<4xi32>
  return
}

// The state and output of IREE's tests/e2e/stablehlo_ops philox.mlir and three_fry.mlir, with
// XLA's bits for JAX's layout of that state (counter = 3 | 4 << 32). IREE's expected values there
// are XLA's for the counter 4 | 3 << 32: its lowering reads a 4xi32 state's counter words high
// first (and writes them back low first), which no XLA program reads.
func.func @philox_iree_state() {
  %key = util.unfoldable_constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  %state, %bits = stablehlo.rng_bit_generator %key, algorithm = PHILOX : (tensor<4xi32>) -> (tensor<4xi32>, tensor<8xi32>)
  check.expect_eq_const(%bits, dense<[512747620, 1298009047, 1267190206, 761827841, 1383286907, 1639995030, -1538759308, -2140153873]> : tensor<8xi32>) : tensor<8xi32>
  check.expect_eq_const(%state, dense<[1, 2, 5, 4]> : tensor<4xi32>) : tensor<4xi32>
  return
}

func.func @three_fry_iree_state() {
  %key = util.unfoldable_constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  %state, %bits = stablehlo.rng_bit_generator %key, algorithm = THREE_FRY : (tensor<4xi32>) -> (tensor<4xi32>, tensor<8xi32>)
  check.expect_eq_const(%bits, dense<[1576285164, -2045306482, 740599976, -1869284770, -1858574781, 1497962777, 1335360347, -2034731609]> : tensor<8xi32>) : tensor<8xi32>
  check.expect_eq_const(%state, dense<[1, 2, 7, 4]> : tensor<4xi32>) : tensor<4xi32>
  return
}

// 8- and 16-bit outputs: the low bits of the 32-bit ones (JAX's uint8 / uint16), a counter that
// wraps past 2**64 - 1, an odd last dim and a unit one.
func.func @narrow_outputs() {
  %key = util.unfoldable_constant dense<[-1640531527, 2135587861, -2, -1]> : tensor<4xi32>
  %ps, %p16 = stablehlo.rng_bit_generator %key, algorithm = PHILOX : (tensor<4xi32>) -> (tensor<4xi32>, tensor<3x5xi16>)
  %ps8, %p8 = stablehlo.rng_bit_generator %key, algorithm = PHILOX : (tensor<4xi32>) -> (tensor<4xi32>, tensor<2x7x1xi8>)
  %ts, %t16 = stablehlo.rng_bit_generator %key, algorithm = THREE_FRY : (tensor<4xi32>) -> (tensor<4xi32>, tensor<3x5xi16>)
  %ts8, %t8 = stablehlo.rng_bit_generator %key, algorithm = THREE_FRY : (tensor<4xi32>) -> (tensor<4xi32>, tensor<2x7x1xi8>)
  check.expect_eq_const(%p16, dense<[[-15515, 8029, -22969, 12884, 3441], [-32618, 39, -8202, 22558, 12457], [-20165, -937, 32656, 29270, 22557]]> : tensor<3x5xi16>) : tensor<3x5xi16>
  check.expect_eq_const(%p8, dense<[[[101], [93], [71], [84], [113], [-106], [39]], [[-10], [30], [-87], [59], [87], [-112], [86]]]> : tensor<2x7x1xi8>) : tensor<2x7x1xi8>
  check.expect_eq_const(%t16, dense<[[4400, 9842, 29246, 13542, 23654], [-21232, -9262, 27986, -1276, 6223], [20615, -10073, 27794, 13129, 14817]]> : tensor<3x5xi16>) : tensor<3x5xi16>
  check.expect_eq_const(%t8, dense<[[[48], [62], [102], [16], [82], [79], [-121]], [[114], [-26], [-105], [-46], [4], [-85], [-89]]]> : tensor<2x7x1xi8>) : tensor<2x7x1xi8>
  check.expect_eq_const(%ps, dense<[-1640531527, 2135587861, 2, 0]> : tensor<4xi32>) : tensor<4xi32>
  check.expect_eq_const(%ps8, dense<[-1640531527, 2135587861, 2, 0]> : tensor<4xi32>) : tensor<4xi32>
  check.expect_eq_const(%ts, dense<[-1640531527, 2135587861, 7, 0]> : tensor<4xi32>) : tensor<4xi32>
  check.expect_eq_const(%ts8, dense<[-1640531527, 2135587861, 5, 0]> : tensor<4xi32>) : tensor<4xi32>
  return
}
