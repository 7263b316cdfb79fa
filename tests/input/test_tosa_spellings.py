"""TOSA as other MLIR versions spell it (IREE's e2e files carry both): newer custom forms
(``values(...)``, ``min_val(...) max_val(...)``, ``axis(n)``, ``perms([...])``) and older
attributes (``tosa.const {value = ...}``, ``kernel = [2, 2]``, ``tosa.mul {shift}``, ``tosa.fully_connected``),
compiled and run against numpy."""

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import compile_str
from tooling import require_module

require_module("torch_mlir")

TOSA = """
func.func @newer(%x: tensor<3x5xf32>) -> (tensor<1x5xf32>, tensor<5x3xf32>, tensor<3x5xf32>, tensor<7x7xf32>, tensor<2xf32>) {
  %m = tosa.reduce_max %x axis(0) : (tensor<3x5xf32>) -> tensor<1x5xf32>
  %t = tosa.transpose %x perms([1, 0]) : (tensor<3x5xf32>) -> tensor<5x3xf32>
  %c = tosa.clamp %x min_val(-0.5 : f32) max_val(0.75 : f32) : (tensor<3x5xf32>) -> tensor<3x5xf32>
  %p = tosa.const_shape values(dense<[1, 1, 2, 2]> : tensor<4xindex>) : () -> !tosa.shape<4>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %padded = tosa.pad %t, %p, %z : (tensor<5x3xf32>, !tosa.shape<4>, tensor<1xf32>) -> tensor<7x7xf32>
  %old = "tosa.const"() {value = dense<[1.5, -2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  return %m, %t, %c, %padded, %old : tensor<1x5xf32>, tensor<5x3xf32>, tensor<3x5xf32>, tensor<7x7xf32>, tensor<2xf32>
}
"""


def test_newer_and_older_tosa_spellings(rng):
    module = rt.load_module(compile_str(TOSA, input_type="tosa"), device="local-task")
    x = rng.standard_normal((3, 5)).astype(np.float32)
    m, t, c, padded, old = (np.asarray(v) for v in module.newer(x))
    np.testing.assert_array_equal(m, x.max(0, keepdims=True))
    np.testing.assert_array_equal(t, x.T)
    np.testing.assert_array_equal(c, np.clip(x, -0.5, 0.75))
    np.testing.assert_array_equal(padded, np.pad(x.T, ((1, 1), (2, 2))))
    np.testing.assert_array_equal(old, [1.5, -2.0])


@pytest.mark.parametrize("spelling", ["kernel = [2, 2], stride = [1, 1], pad = [0, 0, 0, 0]",
                                      "kernel = array<i64: 2, 2>, stride = array<i64: 1, 1>, "
                                      "pad = array<i64: 0, 0, 0, 0>"])
def test_max_pool_windows_in_either_spelling(spelling, rng):
    text = f"""
func.func @max_pool(%x: tensor<1x5x6x2xf32>) -> tensor<1x4x5x2xf32> {{
  %r = "tosa.max_pool2d"(%x) {{{spelling}}} : (tensor<1x5x6x2xf32>) -> tensor<1x4x5x2xf32>
  return %r : tensor<1x4x5x2xf32>
}}"""
    module = rt.load_module(compile_str(text, input_type="tosa"), device="local-task")
    x = rng.standard_normal((1, 5, 6, 2)).astype(np.float32)
    want = np.maximum.reduce([x[:, i:i + 4, j:j + 5] for i in (0, 1) for j in (0, 1)])
    np.testing.assert_array_equal(np.asarray(module.max_pool(x)), want)


@pytest.mark.parametrize("spelling", [
    "%r = tosa.mul %a, %b {shift = 1 : i8} : (tensor<5xi32>, tensor<5xi32>) -> tensor<5xi32>",
    '%r = "tosa.mul"(%a, %b) {shift = 1 : i8} : (tensor<5xi32>, tensor<5xi32>) -> (tensor<5xi32>)'])
def test_older_mul_with_a_shift_attribute(spelling):
    text = f"""
func.func @mul(%a: tensor<5xi32>, %b: tensor<5xi32>) -> tensor<5xi32> {{
  {spelling}
  return %r : tensor<5xi32>
}}"""
    module = rt.load_module(compile_str(text, input_type="tosa"), device="local-task")
    a = np.array([1, 0, 3, 4, 4], np.int32)
    b = np.array([5, 6, -3, 8, 8], np.int32)
    # TOSA's shifted product rounds: (a * b + (1 << (shift - 1))) >> shift
    np.testing.assert_array_equal(np.asarray(module.mul(a, b)), [3, 0, -4, 16, 16])


@pytest.mark.parametrize("generic", [False, True])
def test_fully_connected_of_older_tosa(generic, rng):
    types = "(tensor<4x6xf32>, tensor<5x6xf32>, tensor<5xf32>) -> tensor<4x5xf32>"
    op = ('"tosa.fully_connected"(%x, %w, %b)' if generic else "tosa.fully_connected %x, %w, %b")
    text = f"""
func.func @fc(%x: tensor<4x6xf32>, %w: tensor<5x6xf32>, %b: tensor<5xf32>) -> tensor<4x5xf32> {{
  %r = {op} : {types}
  return %r : tensor<4x5xf32>
}}"""
    module = rt.load_module(compile_str(text, input_type="tosa"), device="local-task")
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((4, 6), (5, 6), (5,)))
    np.testing.assert_allclose(np.asarray(module.fc(x, w, b)), x @ w.T + b, rtol=1e-5, atol=1e-5)
