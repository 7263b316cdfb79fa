// IREE's sort / scan / topk / scatter (iree_linalg_ext), and torch-mlir's spelling (tm_tensor),
// in IREE's check format. Expected values by hand from the ops' reference semantics: sort keeps
// equal elements in input order; an inclusive scan starts from x[0], an exclusive one from the
// accumulator's initial value; top-k returns the first k by the comparator with their indices;
// scatter combines updates into the original in update order (repeats accumulate, or the last
// one wins for a plain set).

func.func @sort_1d_with_ties() {
  %x = util.unfoldable_constant dense<[3, -1, 7, 3, 0, -5, 7]> : tensor<7xi32>
  %s = iree_linalg_ext.sort dimension(0) outs(%x : tensor<7xi32>) {
  ^bb0(%a: i32, %b: i32):
    %lt = arith.cmpi slt, %a, %b : i32
    iree_linalg_ext.yield %lt : i1
  } -> tensor<7xi32>
  check.expect_eq_const(%s, dense<[-5, -1, 0, 3, 3, 7, 7]> : tensor<7xi32>) : tensor<7xi32>
  return
}

func.func @sort_rows_descending_with_payload() {
  %x = util.unfoldable_constant dense<[[1.0, 4.0, -2.0, 4.0], [0.5, -0.0, 9.0, 0.0]]> : tensor<2x4xf32>
  %i = util.unfoldable_constant dense<[[0, 1, 2, 3], [0, 1, 2, 3]]> : tensor<2x4xi64>
  %s:2 = tm_tensor.sort dimension(1) outs(%x, %i : tensor<2x4xf32>, tensor<2x4xi64>) {
  ^bb0(%a: f32, %b: f32, %ia: i64, %ib: i64):
    %ge = arith.cmpf oge, %a, %b : f32
    tm_tensor.yield %ge : i1
  } -> tensor<2x4xf32>, tensor<2x4xi64>
  check.expect_eq_const(%s#0, dense<[[4.0, 4.0, 1.0, -2.0], [9.0, 0.5, -0.0, 0.0]]> : tensor<2x4xf32>) : tensor<2x4xf32>
  check.expect_eq_const(%s#1, dense<[[1, 3, 0, 2], [2, 0, 1, 3]]> : tensor<2x4xi64>) : tensor<2x4xi64>
  return
}

func.func @scan_inclusive_and_exclusive() {
  %x = util.unfoldable_constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0], [-1.0, 0.5, 0.25, 8.0, -2.0]]> : tensor<2x5xf32>
  %out = util.unfoldable_constant dense<0.0> : tensor<2x5xf32>
  %acc = util.unfoldable_constant dense<[10.0, 20.0]> : tensor<2xf32>
  %inc:2 = iree_linalg_ext.scan dimension(1) inclusive(true) ins(%x : tensor<2x5xf32>) outs(%out, %acc : tensor<2x5xf32>, tensor<2xf32>) {
  ^bb0(%p: f32, %e: f32):
    %s = arith.addf %p, %e : f32
    iree_linalg_ext.yield %s : f32
  } -> tensor<2x5xf32>, tensor<2xf32>
  check.expect_eq_const(%inc#0, dense<[[1.0, 3.0, 6.0, 10.0, 15.0], [-1.0, -0.5, -0.25, 7.75, 5.75]]> : tensor<2x5xf32>) : tensor<2x5xf32>
  check.expect_eq_const(%inc#1, dense<[15.0, 5.75]> : tensor<2xf32>) : tensor<2xf32>
  %exc:2 = tm_tensor.scan dimension(1) inclusive(false) ins(%x : tensor<2x5xf32>) outs(%out, %acc : tensor<2x5xf32>, tensor<2xf32>) {
  ^bb0(%p: f32, %e: f32):
    %s = arith.mulf %p, %e : f32
    tm_tensor.yield %s : f32
  } -> tensor<2x5xf32>, tensor<2xf32>
  check.expect_eq_const(%exc#0, dense<[[10.0, 10.0, 20.0, 60.0, 240.0], [20.0, -20.0, -10.0, -2.5, -20.0]]> : tensor<2x5xf32>) : tensor<2x5xf32>
  check.expect_eq_const(%exc#1, dense<[240.0, -20.0]> : tensor<2xf32>) : tensor<2xf32>
  return
}

func.func @topk_largest_three() {
  %v = util.unfoldable_constant dense<[[5.0, 1.0, 9.0, -3.0, 9.5, 0.0, 2.0], [0.0, 0.0, -1.0, 3.0, 2.0, 1.0, 0.0]]> : tensor<2x7xf32>
  %ov = util.unfoldable_constant dense<0.0> : tensor<2x3xf32>
  %oi = util.unfoldable_constant dense<0> : tensor<2x3xi32>
  %t:2 = iree_linalg_ext.topk dimension(1) ins(%v : tensor<2x7xf32>) outs(%ov, %oi : tensor<2x3xf32>, tensor<2x3xi32>) {
  ^bb0(%a: f32, %b: f32):
    %gt = arith.cmpf ogt, %a, %b : f32
    iree_linalg_ext.yield %gt : i1
  } -> tensor<2x3xf32>, tensor<2x3xi32>
  check.expect_eq_const(%t#0, dense<[[9.5, 9.0, 5.0], [3.0, 2.0, 1.0]]> : tensor<2x3xf32>) : tensor<2x3xf32>
  check.expect_eq_const(%t#1, dense<[[4, 2, 0], [3, 4, 5]]> : tensor<2x3xi32>) : tensor<2x3xi32>
  return
}

func.func @scatter_rows_accumulate() {
  %orig = util.unfoldable_constant dense<[[1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [3.0, 3.0, 3.0], [4.0, 4.0, 4.0]]> : tensor<4x3xf32>
  %upd = util.unfoldable_constant dense<[[[10.0, 20.0, 30.0]], [[0.5, 0.5, 0.5]], [[100.0, 200.0, 300.0]]]> : tensor<3x1x3xf32>
  %idx = util.unfoldable_constant dense<[[2], [0], [2]]> : tensor<3x1xi64>
  %r = iree_linalg_ext.scatter dimension_map = [0] unique_indices(false) ins(%upd, %idx : tensor<3x1x3xf32>, tensor<3x1xi64>) outs(%orig : tensor<4x3xf32>) {
  ^bb0(%u: f32, %o: f32):
    %s = arith.addf %o, %u : f32
    iree_linalg_ext.yield %s : f32
  } -> tensor<4x3xf32>
  check.expect_eq_const(%r, dense<[[1.5, 1.5, 1.5], [2.0, 2.0, 2.0], [113.0, 223.0, 333.0], [4.0, 4.0, 4.0]]> : tensor<4x3xf32>) : tensor<4x3xf32>
  return
}

func.func @scatter_points_last_wins() {
  %orig = util.unfoldable_constant dense<0> : tensor<3x4xi32>
  %upd = util.unfoldable_constant dense<[7, 8, 9, 5]> : tensor<4xi32>
  %idx = util.unfoldable_constant dense<[[0, 3], [2, 1], [0, 3], [5, 0]]> : tensor<4x2xi32>
  %r = tm_tensor.scatter {dimension_map = array<i64: 0, 1>} unique_indices(false) ins(%upd, %idx : tensor<4xi32>, tensor<4x2xi32>) outs(%orig : tensor<3x4xi32>) {
  ^bb0(%u: i32, %o: i32):
    tm_tensor.yield %u : i32
  } -> tensor<3x4xi32>
  check.expect_eq_const(%r, dense<[[0, 0, 0, 9], [0, 0, 0, 0], [0, 8, 0, 0]]> : tensor<3x4xi32>) : tensor<3x4xi32>
  return
}
