"""TFLite's TOSA: quantized element types (``!quant.uniform``) with scales and zero points as
operands, as TOSA 1.0 spells them; the types are read as their storage integers."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
import tooling
from pyree.compiler import compile_str

tooling.require_module("torch_mlir")
from pyree.compiler.input.tosa import strip_quant_types  # noqa: E402

RESCALE = """func.func @main(%arg0: tensor<1x6x!quant.uniform<i8:f32, 0.5:-1>>) -> tensor<1x6x!quant.uniform<i8:f32, 0.25:2>> {
  %m = "tosa.const"() <{values = dense<[1610612736]> : tensor<1xi32>}> : () -> tensor<1xi32>
  %s = "tosa.const"() <{values = dense<[30]> : tensor<1xi8>}> : () -> tensor<1xi8>
  %zi = "tosa.const"() <{values = dense<-1> : tensor<1xi8>}> : () -> tensor<1xi8>
  %zo = "tosa.const"() <{values = dense<2> : tensor<1xi8>}> : () -> tensor<1xi8>
  %r = tosa.rescale %arg0, %m, %s, %zi, %zo {input_unsigned = false, output_unsigned = false, per_channel = false, rounding_mode = SINGLE_ROUND, scale32 = true} : (tensor<1x6x!quant.uniform<i8:f32, 0.5:-1>>, tensor<1xi32>, tensor<1xi8>, tensor<1xi8>, tensor<1xi8>) -> tensor<1x6x!quant.uniform<i8:f32, 0.25:2>>
  return %r : tensor<1x6x!quant.uniform<i8:f32, 0.25:2>>
}
"""


def test_rescale_of_quantized_tensors_matches_the_spec():
    """out = clamp(round((x - zp_in) * 1.5) + zp_out): multiplier 1.5 * 2^30 and shift 30, and
    TOSA's SINGLE_ROUND adds half of 2^shift before the shift, so halves round up."""
    module = rt.load_module(compile_str(RESCALE), device="local-task")
    x = np.array([[-1, 0, 1, 4, 100, -128]], np.int8)
    got = np.asarray(module.main(x))
    scaled = np.floor((x.astype(np.int64) + 1) * 1.5 + 0.5).astype(np.int64) + 2
    np.testing.assert_array_equal(got, np.clip(scaled, -128, 127).astype(np.int8))


@pytest.mark.parametrize("text, want", [
    ("tensor<2x!quant.uniform<i8:f32, 0.5:-1>>", "tensor<2xi8>"),
    ("tensor<3x!quant.uniform<u8:f32, 0.1:128>>", "tensor<3xi8>"),
    ("tensor<4x!quant.uniform<i8<-127:127>:f32:0, {0.1:0, 0.2:0, 0.3:0, 0.4:0}>>", "tensor<4xi8>"),
    ("tensor<5x!quant.uniform<i32:f32, 0.001>>", "tensor<5xi32>"),
])
def test_quantized_types_become_their_storage(text, want):
    assert strip_quant_types(text) == want
