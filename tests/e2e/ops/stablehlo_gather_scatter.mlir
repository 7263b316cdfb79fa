// StableHLO gather and scatter; expected values from the spec's definitions (start indices
// clamp in gather; a scatter window out of bounds is skipped; repeated indices combine).
func.func @gather_rows_clamped() {
  %x = util.unfoldable_constant dense<[[1, 2, 3], [4, 5, 6], [7, 8, 9]]> : tensor<3x3xi32>
  %i = util.unfoldable_constant dense<[[2], [0], [5]]> : tensor<3x1xi32>
  %g = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 3>}> : (tensor<3x3xi32>, tensor<3x1xi32>) -> tensor<3x3xi32>
  check.expect_eq_const(%g, dense<[[7, 8, 9], [1, 2, 3], [7, 8, 9]]> : tensor<3x3xi32>) : tensor<3x3xi32>
  %j = util.unfoldable_constant dense<[[1, 1], [0, 2]]> : tensor<2x2xi32>
  %w = "stablehlo.gather"(%x, %j) <{dimension_numbers = #stablehlo.gather<offset_dims = [1, 2], start_index_map = [0, 1], index_vector_dim = 1>, slice_sizes = array<i64: 2, 2>}> : (tensor<3x3xi32>, tensor<2x2xi32>) -> tensor<2x2x2xi32>
  check.expect_eq_const(%w, dense<[[[5, 6], [8, 9]], [[2, 3], [5, 6]]]> : tensor<2x2x2xi32>) : tensor<2x2x2xi32>
  return
}

func.func @scatter_add_repeated_and_out_of_bounds() {
  %x = util.unfoldable_constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]> : tensor<3x3xf32>
  %i = util.unfoldable_constant dense<[[0], [2], [0], [3]]> : tensor<4x1xi32>
  %u = util.unfoldable_constant dense<[[10.0, 10.0, 10.0], [20.0, 20.0, 20.0], [1.0, 1.0, 1.0], [100.0, 100.0, 100.0]]> : tensor<4x3xf32>
  %s = "stablehlo.scatter"(%x, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %sum = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %sum : tensor<f32>
  }) : (tensor<3x3xf32>, tensor<4x1xi32>, tensor<4x3xf32>) -> tensor<3x3xf32>
  check.expect_almost_eq_const(%s, dense<[[12.0, 13.0, 14.0], [4.0, 5.0, 6.0], [27.0, 28.0, 29.0]]> : tensor<3x3xf32>) : tensor<3x3xf32>
  return
}

func.func @scatter_set_elements() {
  %x = util.unfoldable_constant dense<0> : tensor<2x3xi32>
  %i = util.unfoldable_constant dense<[[1, 2], [0, 0]]> : tensor<2x2xi32>
  %u = util.unfoldable_constant dense<[5, 7]> : tensor<2xi32>
  %s = "stablehlo.scatter"(%x, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0, 1], scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 1>}> ({
    ^bb0(%a: tensor<i32>, %b: tensor<i32>):
      stablehlo.return %b : tensor<i32>
  }) : (tensor<2x3xi32>, tensor<2x2xi32>, tensor<2xi32>) -> tensor<2x3xi32>
  check.expect_eq_const(%s, dense<[[7, 0, 0], [0, 0, 5]]> : tensor<2x3xi32>) : tensor<2x3xi32>
  return
}

func.func @scatter_two_operands() {
  %x = util.unfoldable_constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  %y = util.unfoldable_constant dense<[10, 20, 30, 40]> : tensor<4xi32>
  %i = util.unfoldable_constant dense<[[3], [1], [3]]> : tensor<3x1xi32>
  %u = util.unfoldable_constant dense<[5, 6, 7]> : tensor<3xi32>
  %v = util.unfoldable_constant dense<[1, 1, 1]> : tensor<3xi32>
  %r:2 = "stablehlo.scatter"(%x, %y, %i, %u, %v) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
    ^bb0(%a: tensor<i32>, %b: tensor<i32>, %c: tensor<i32>, %d: tensor<i32>):
      %s = stablehlo.add %a, %c : tensor<i32>
      %m = stablehlo.multiply %b, %d : tensor<i32>
      %t = stablehlo.add %m, %a : tensor<i32>
      stablehlo.return %s, %t : tensor<i32>, tensor<i32>
  }) : (tensor<4xi32>, tensor<4xi32>, tensor<3x1xi32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<4xi32>, tensor<4xi32>)
  check.expect_eq_const(%r#0, dense<[1, 8, 3, 16]> : tensor<4xi32>) : tensor<4xi32>
  check.expect_eq_const(%r#1, dense<[10, 22, 30, 53]> : tensor<4xi32>) : tensor<4xi32>
  return
}
