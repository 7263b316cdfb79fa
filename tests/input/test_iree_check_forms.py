"""Forms IREE's e2e check files use: a bare tolerance (``, 1.0e-4``) on expect_almost_eq_const, in
linalg and TOSA input, and math.ctlz in a body; the checks run, and a wrong value still fails."""

import numpy as np
import pyree.runtime as rt
from pyree.compiler import compile_str

LINALG = """
func.func @near() {
  %a = util.unfoldable_constant dense<[1.0, 2.0]> : tensor<2xf32>
  %r = arith.addf %a, %a : tensor<2xf32>
  check.expect_almost_eq_const(%r, dense<[2.00005, 4.0]> : tensor<2xf32>, 1.0e-4) : tensor<2xf32>
  return
}
func.func @far() {
  %a = util.unfoldable_constant dense<[1.0, 2.0]> : tensor<2xf32>
  %r = arith.addf %a, %a : tensor<2xf32>
  check.expect_almost_eq_const(%r, dense<[2.001, 4.0]> : tensor<2xf32>, 1.0e-4) : tensor<2xf32>
  return
}
func.func @clz(%x: tensor<5xi32>) -> tensor<5xi32> {
  %e = tensor.empty() : tensor<5xi32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} ins(%x : tensor<5xi32>) outs(%e : tensor<5xi32>) {
  ^bb0(%in: i32, %o: i32):
    %c = math.ctlz %in : i32
    linalg.yield %c : i32
  } -> tensor<5xi32>
  return %r : tensor<5xi32>
}
"""

TOSA = """
func.func @near() {
  %0 = util.unfoldable_constant dense<[1.0, 2.0]> : tensor<2xf32>
  %r = tosa.abs %0 : (tensor<2xf32>) -> tensor<2xf32>
  check.expect_almost_eq_const(%r, dense<[1.00005, 2.0]> : tensor<2xf32>, 1.0e-4) : tensor<2xf32>
  return
}
"""


def test_a_bare_tolerance_is_the_absolute_tolerance():
    module = rt.load_module(compile_str(LINALG), device="local-task")
    assert module.near.run_checks() == []
    (failure,) = module.far.run_checks()
    assert failure.kind == "expect_almost_eq" and "atol=0.0001" in failure.message
    x = np.array([0, 1, -8, 256, 65535], np.int32)
    want = [32 - int(v).bit_length() if v >= 0 else 0 for v in x]
    np.testing.assert_array_equal(np.asarray(module.clz(x)), want)


def test_a_bare_tolerance_in_tosa_input():
    module = rt.load_module(compile_str(TOSA, input_type="tosa"), device="local-task")
    assert module.near.run_checks() == []


def test_a_function_marked_inline_never_is_called_as_any_other(rng):
    module = rt.load_module(compile_str("""
func.func private @twice(%x: tensor<3xf32>) -> tensor<3xf32> attributes {inline_policy = #util.inline.never} {
  %y = arith.addf %x, %x : tensor<3xf32>
  return %y : tensor<3xf32>
}
func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
  %a = func.call @twice(%x) : (tensor<3xf32>) -> tensor<3xf32>
  %b = func.call @twice(%a) : (tensor<3xf32>) -> tensor<3xf32>
  return %b : tensor<3xf32>
}"""), device="local-task")
    x = rng.standard_normal(3).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(module.f(x)), 4 * x)
