"""Constants (dense, splat, hex, dense_resource, unfoldable) and IREE check ops."""

import struct

import numpy as np
import pytest
from program_interpreter import run
from pyree.compiler.input import import_mlir
from pyree.compiler.tensor_program import Check, Constant


def test_constant_forms(rng):
    values = rng.uniform(-5, 5, 6).astype(np.float32)
    blob = "0x" + (struct.pack("<I", 4) + values.tobytes()).hex().upper()
    hexed = "0x" + values[:2].tobytes().hex().upper()
    text = f"""
func.func @f() -> (tensor<2x3xf32>, tensor<2x2xi32>, tensor<2xf32>, tensor<4xi8>, tensor<3xi1>, tensor<2x2xf16>) {{
  %r = arith.constant dense_resource<weights> : tensor<2x3xf32>
  %d = arith.constant dense<[[1, -2], [3, 4]]> : tensor<2x2xi32>
  %h = arith.constant dense<"{hexed}"> : tensor<2xf32>
  %s = arith.constant dense<-7> : tensor<4xi8>
  %b = util.unfoldable_constant dense<[true, false, true]> : tensor<3xi1>
  %u = util.unfoldable_constant dense<0.5> : tensor<2x2xf16>
  return %r, %d, %h, %s, %b, %u : tensor<2x3xf32>, tensor<2x2xi32>, tensor<2xf32>, tensor<4xi8>, tensor<3xi1>, tensor<2x2xf16>
}}
{{-#
  dialect_resources: {{
    builtin: {{
      weights: "{blob}"
    }}
  }}
#-}}"""
    fn = import_mlir(text).functions[0]
    assert all(isinstance(op, Constant) for op in fn.ops)
    splats = [op.splat for op in fn.ops]
    assert splats == [None, None, None, -7, None, 0.5]
    r, d, h, s, b, u = run(fn)
    np.testing.assert_array_equal(r, values.reshape(2, 3))
    np.testing.assert_array_equal(d, [[1, -2], [3, 4]])
    np.testing.assert_array_equal(h, values[:2])
    np.testing.assert_array_equal(s, np.full(4, -7, np.int8))
    np.testing.assert_array_equal(b, [True, False, True])
    assert u.dtype == np.float16 and np.all(u == 0.5)


def test_check_ops_lower_with_their_syntax(rng):
    text = """
func.func @checks(%x: tensor<2xf32>, %i: tensor<3xi32>) {
  %y = arith.addf %x, %x : tensor<2xf32>
  check.expect_almost_eq_const(%y, dense<[1.0, 2.0]> : tensor<2xf32>, atol 1.0e-02, rtol 1.0e-3) : tensor<2xf32>
  check.expect_almost_eq(%y, %y) : tensor<2xf32>
  check.expect_eq_const(%i, dense<[1, 2, 3]> : tensor<3xi32>) : tensor<3xi32>
  check.expect_eq(%i, %i) : tensor<3xi32>
  %t = arith.constant 1 : i32
  check.expect_true(%t) : i32
  %f = arith.constant 0 : i32
  check.expect_false(%f) : i32
  %c = arith.cmpi sgt, %i, %i : tensor<3xi32>
  %n = arith.constant dense<true> : tensor<3xi1>
  %all = arith.xori %c, %n : tensor<3xi1>
  check.expect_all_true(%all) : tensor<3xi1>
  return
}"""
    fn = import_mlir(text).functions[0]
    checks = [op for op in fn.ops if isinstance(op, Check)]
    assert [c.kind for c in checks] == ["expect_almost_eq", "expect_almost_eq", "expect_eq",
                                        "expect_eq", "expect_true", "expect_false",
                                        "expect_all_true"]
    assert checks[0].atol == pytest.approx(1e-2) and checks[0].rtol == pytest.approx(1e-3)
    assert checks[1].atol == 1e-4 and checks[1].rtol == 0.0  # IREE's defaults
    assert fn.results == []
    run(fn, np.array([0.5, 1.0], np.float32), np.array([1, 2, 3], np.int32))
    with pytest.raises(AssertionError):
        run(fn, np.array([0.5, 1.1], np.float32), np.array([1, 2, 3], np.int32))


def test_private_functions_are_not_exported():
    text = """
func.func private @helper(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}"""
    assert [f.name for f in import_mlir(text).functions] == ["main"]
