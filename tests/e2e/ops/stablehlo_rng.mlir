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
