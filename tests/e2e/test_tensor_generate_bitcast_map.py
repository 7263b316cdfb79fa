"""Upstream ops a hand-written MLIR program uses that pyree refused by name: ``tensor.generate``
(each element from its indices, ``?`` dims from its size operands), ``tensor.bitcast`` (each
element's bits), ``linalg.map`` (long and short forms) and ``linalg.elementwise``, against numpy
on local-task and lavapipe."""

from __future__ import annotations

import numpy as np
import pytest
from jax_runs import DEVICES, module_for, options_for
from pyree.compiler import CompileError, compile_str

GENERATE = """
func.func @f(%x: tensor<?xf32>) -> (tensor<3x?xf32>, tensor<4x5xi32>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %r = tensor.generate %n {
  ^bb0(%i: index, %j: index):
    %e = tensor.extract %x[%j] : tensor<?xf32>
    %c = arith.index_cast %i : index to i32
    %f = arith.sitofp %c : i32 to f32
    %s = arith.mulf %e, %f : f32
    tensor.yield %s : f32
  } : tensor<3x?xf32>
  %t = tensor.generate {
  ^bb0(%i: index, %j: index):
    %p = arith.muli %i, %j : index
    %q = arith.index_cast %p : index to i32
    tensor.yield %q : i32
  } : tensor<4x5xi32>
  return %r, %t : tensor<3x?xf32>, tensor<4x5xi32>
}"""


@pytest.mark.parametrize("device", DEVICES)
def test_generate(device):
    module = module_for(GENERATE, device)
    for n in (1, 7):
        x = np.array([1.5, -2.0, np.inf, -0.0, 3.0, np.nan, 0.25][:n], np.float32)
        scaled, products = module["f"](x)
        with np.errstate(invalid="ignore"):
            want = np.arange(3, dtype=np.float32)[:, None] * x[None, :]
        np.testing.assert_array_equal(np.asarray(scaled), want)
        np.testing.assert_array_equal(np.asarray(products), np.outer(np.arange(4), np.arange(5)))


BITCAST = """
func.func @f(%x: tensor<2x3xf32>, %h: tensor<4xf16>) -> (tensor<2x3xi32>, tensor<4xi16>) {
  %r = tensor.bitcast %x : tensor<2x3xf32> to tensor<2x3xi32>
  %s = tensor.bitcast %h : tensor<4xf16> to tensor<4xi16>
  return %r, %s : tensor<2x3xi32>, tensor<4xi16>
}"""


@pytest.mark.parametrize("device", DEVICES)
def test_bitcast_keeps_every_bit(device):
    x = np.array([[-0.0, np.inf, np.nan], [1.0, -1.5e-42, 3.4e38]], np.float32)
    h = np.array([-0.0, 65504.0, -np.inf, 6e-8], np.float16)
    bits, half_bits = module_for(BITCAST, device)["f"](x, h)
    np.testing.assert_array_equal(np.asarray(bits), x.view(np.int32))
    np.testing.assert_array_equal(np.asarray(half_bits), h.view(np.int16))


def test_bitcast_between_widths_is_refused_by_name():
    text = BITCAST.replace("tensor<4xf16> to tensor<4xi16>", "tensor<4xf16> to tensor<4xi32>")
    text = text.replace("tensor<4xi16>", "tensor<4xi32>")
    with pytest.raises(CompileError, match="tensor.bitcast from f16 to i32"):
        compile_str(text, options_for("local-task"))


MAP = """
func.func @f(%a: tensor<2x5xf32>, %b: tensor<2x5xf32>) -> (tensor<2x5xf32>, tensor<2x5xf32>) {
  %e = tensor.empty() : tensor<2x5xf32>
  %long = linalg.map ins(%a, %b : tensor<2x5xf32>, tensor<2x5xf32>) outs(%e : tensor<2x5xf32>)
    (%x: f32, %y: f32) {
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %p, %x : f32
      linalg.yield %s : f32
    }
  %short = linalg.map { arith.maximumf } ins(%a, %b : tensor<2x5xf32>, tensor<2x5xf32>)
    outs(%e : tensor<2x5xf32>)
  return %long, %short : tensor<2x5xf32>, tensor<2x5xf32>
}"""


@pytest.mark.parametrize("device", DEVICES)
def test_map_long_and_short_forms(device):
    a = np.array([[1.0, np.nan, 3.0, -0.0, 2.5], [np.inf, -4.0, 0.5, 7.0, -1.0]], np.float32)
    b = np.array([[2.0, 1.0, -np.inf, 0.0, 2.5], [0.0, -4.5, 0.25, np.nan, 3.0]], np.float32)
    long, short = module_for(MAP, device)["f"](a, b)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(np.asarray(long), a * b + a)
    short = np.asarray(short)
    np.testing.assert_array_equal(short, np.maximum(a, b))  # NaN from either side
    assert not np.signbit(short[0, 3])  # maximumf(-0, +0) is +0


def test_map_short_form_with_attributes_and_an_unknown_op():
    """``{ arith.addf {fastmath = ...} }`` carries its op's properties; an op pyree does not
    know is refused at its name."""
    text = MAP.replace("{ arith.maximumf }", "{ arith.addf {fastmath = #arith.fastmath<fast>} }")
    a = np.array([[1.0, 2.0, -3.0, 0.5, 7.0]] * 2, np.float32)
    _, short = module_for(text, "local-task")["f"](a, a)
    np.testing.assert_array_equal(np.asarray(short), a + a)
    with pytest.raises(CompileError, match="linalg.map applies 'foo.bar', an op pyree does not know"):
        compile_str(MAP.replace("arith.maximumf", "foo.bar"), options_for("local-task"))


ELEMENTWISE = """
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (j)>
func.func @f(%a: tensor<2x5xf32>, %b: tensor<5xf32>, %m: tensor<2x5xi1>) -> (tensor<2x5xf32>, tensor<2x5xf32>, tensor<2x5xf32>, tensor<2x5xf32>) {
  %e = tensor.empty() : tensor<2x5xf32>
  %exp = linalg.elementwise kind=#linalg.elementwise_kind<exp> ins(%a : tensor<2x5xf32>) outs(%e : tensor<2x5xf32>) -> tensor<2x5xf32>
  %sub = linalg.elementwise kind=#linalg.elementwise_kind<sub> indexing_maps = [#id, #row, #id]
      ins(%a, %b : tensor<2x5xf32>, tensor<5xf32>) outs(%e : tensor<2x5xf32>) -> tensor<2x5xf32>
  %max = linalg.elementwise kind=#linalg.elementwise_kind<max_signed> indexing_maps = [#id, #row, #id]
      ins(%a, %b : tensor<2x5xf32>, tensor<5xf32>) outs(%e : tensor<2x5xf32>) -> tensor<2x5xf32>
  %sel = linalg.elementwise kind=#linalg.elementwise_kind<select> ins(%m, %a, %exp : tensor<2x5xi1>, tensor<2x5xf32>, tensor<2x5xf32>) outs(%e : tensor<2x5xf32>) -> tensor<2x5xf32>
  return %exp, %sub, %max, %sel : tensor<2x5xf32>, tensor<2x5xf32>, tensor<2x5xf32>, tensor<2x5xf32>
}"""


@pytest.mark.parametrize("device", DEVICES)
def test_elementwise_kinds_with_their_maps(device):
    a = np.array([[1.0, np.nan, -3.0, -0.0, 2.5], [np.inf, -4.0, 0.5, 7.0, -1.0]], np.float32)
    b = np.array([2.0, 1.0, -np.inf, 0.0, 2.5], np.float32)
    mask = np.array([[True, False, True, False, True], [False, True, False, True, False]])
    exp, sub, max_, sel = (np.asarray(r) for r in module_for(ELEMENTWISE, device)["f"](a, b, mask))
    with np.errstate(invalid="ignore", over="ignore"):
        np.testing.assert_allclose(exp, np.exp(a), rtol=2e-6)
        np.testing.assert_array_equal(sub, a - b)
    np.testing.assert_array_equal(max_, np.maximum(a, b))
    np.testing.assert_array_equal(sel, np.where(mask, a, exp))


def test_an_elementwise_kind_pyree_lacks_is_refused_by_name():
    text = ELEMENTWISE.replace("elementwise_kind<exp>", "elementwise_kind<frobnicate>")
    with pytest.raises(CompileError, match="linalg.elementwise kind 'frobnicate' is not supported"):
        compile_str(text, options_for("local-task"))
