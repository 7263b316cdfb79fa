// Host-program control flow in IREE's check format: checks run on the host between the loop's
// command buffers, so a check inside a loop body sees each iteration's value.

func.func @for_accumulates() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %x = util.unfoldable_constant dense<[1.5, -2.0, 0.0, 3.0, -0.0]> : tensor<5xf32>
  %init = util.unfoldable_constant dense<0.0> : tensor<5xf32>
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %init) -> (tensor<5xf32>) {
    %n = arith.addf %acc, %x : tensor<5xf32>
    %pos = arith.cmpf oge, %n, %n : tensor<5xf32>
    check.expect_all_true(%pos) : tensor<5xi1>
    scf.yield %n : tensor<5xf32>
  }
  check.expect_eq_const(%r, dense<[6.0, -8.0, 0.0, 12.0, 0.0]> : tensor<5xf32>) : tensor<5xf32>
  return
}

func.func @while_counts_halvings() {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %start = util.unfoldable_constant dense<1000> : tensor<i32>
  %two = arith.constant 2 : i32
  %v = tensor.extract %start[] : tensor<i32>
  %r:2 = scf.while (%a = %v, %k = %c0) : (i32, i32) -> (i32, i32) {
    %more = arith.cmpi sgt, %a, %c1 : i32
    scf.condition(%more) %a, %k : i32, i32
  } do {
  ^bb0(%a2: i32, %k2: i32):
    %h = arith.divsi %a2, %two : i32
    %k3 = arith.addi %k2, %c1 : i32
    scf.yield %h, %k3 : i32, i32
  }
  %count = tensor.from_elements %r#1 : tensor<i32>
  check.expect_eq_const(%count, dense<9> : tensor<i32>) : tensor<i32>
  %last = tensor.from_elements %r#0 : tensor<i32>
  check.expect_eq_const(%last, dense<1> : tensor<i32>) : tensor<i32>
  return
}

func.func @if_picks_by_device_value() {
  %x = util.unfoldable_constant dense<[-1.0, 4.0, -0.0]> : tensor<3xf32>
  %y = util.unfoldable_constant dense<[0x7FC00001, -0.0]> : tensor<2xf32>
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %e = tensor.extract %x[%c1] : tensor<3xf32>
  %p = arith.cmpf ogt, %e, %zero : f32
  %r = scf.if %p -> (tensor<3xf32>) {
    %s = arith.mulf %x, %x : tensor<3xf32>
    scf.yield %s : tensor<3xf32>
  } else {
    scf.yield %x : tensor<3xf32>
  }
  check.expect_eq_const(%r, dense<[1.0, 16.0, 0.0]> : tensor<3xf32>) : tensor<3xf32>
  // a value passed through a branch keeps its bits: NaN payload and -0.0
  %q = scf.if %p -> (tensor<2xf32>) {
    scf.yield %y : tensor<2xf32>
  } else {
    %n = arith.negf %y : tensor<2xf32>
    scf.yield %n : tensor<2xf32>
  }
  check.expect_eq(%q, %y) : tensor<2xf32>
  return
}
