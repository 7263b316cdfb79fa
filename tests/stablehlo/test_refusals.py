"""What the StableHLO front end does not support is refused by name at file:line:col, through
the real pyree-compile CLI: a non-zero exit and no traceback, never a wrong answer."""

from __future__ import annotations

import subprocess
import sys

import pytest

CASES = {
    "undeclared_op": ("""func.func @f(%s: tensor<2xui64>) -> tensor<2xui64> {
  %0 = stablehlo.add %s, %s : tensor<2xui64>
  %k = stablehlo.collective_permute %0 {source_target_pairs = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2xui64>) -> tensor<2xui64>
  return %k : tensor<2xui64>
}""", ":3:", "unsupported op 'stablehlo.collective_permute'"),
    "unlowered_chlo": ("""func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = chlo.constant_like %x : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}""", ":2:3", "unsupported op 'chlo.constant_like'"),
    "integer_power": ("""func.func @f(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = stablehlo.power %x, %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}""", ":2:3", "'stablehlo.power' on integers"),
    "dynamic_shape": ("""func.func @f(%x: tensor<?x4xf32>, %p: tensor<f32>) -> tensor<?x4xf32> {
  %0 = stablehlo.pad %x, %p, low = [1, 0], high = [0, 0], interior = [0, 0] : (tensor<?x4xf32>, tensor<f32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}""", ":2:3", "'stablehlo.pad' with dynamic dimensions"),
    "undeclared_op_in_region": ("""func.func @f(%x: tensor<4xf32>) -> tensor<f32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %z) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %c = stablehlo.cholesky %a : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }
  return %0 : tensor<f32>
}""", ":5:5", "unsupported op 'stablehlo.cholesky'"),
    "bitcast_after_demotion": ("""func.func @f(%x: tensor<3xf64>) -> tensor<3xi64> {
  %0 = stablehlo.bitcast_convert %x : (tensor<3xf64>) -> tensor<3xi64>
  return %0 : tensor<3xi64>
}""", ":2:3", "'stablehlo.bitcast_convert' is invalid after --iree-input-demote-i64-to-i32: it "
              "casts tensor<3xf64> to tensor<3xi32>; compile with "
              "--iree-input-demote-i64-to-i32=false"),
    "recursive_call_in_region": ("""func.func @f(%x: tensor<4xf32>) -> tensor<f32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %z) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %c = func.call @g(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    stablehlo.return %c : tensor<f32>
  }
  return %0 : tensor<f32>
}
func.func private @g(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {
  %c = func.call @g(%b, %a) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %c : tensor<f32>
}""", ":11:", "recursive call of @g cannot be inlined (@f -> @g -> @g)"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_refused_by_name_with_location(tmp_path, name):
    text, where, message = CASES[name]
    source = tmp_path / f"{name}.mlir"
    source.write_text(text)
    result = subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile", str(source),
                             "-o", str(tmp_path / "out.vmfb")], capture_output=True, text=True)
    assert result.returncode != 0
    assert f"{name}.mlir{where}" in result.stderr, result.stderr
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "internal compiler error" not in result.stderr
