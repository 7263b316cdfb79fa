"""Dynamic forms pyree still refuses, each by name at the user's file:line:col (never a wrong
answer): StableHLO ops that change a ``?`` dim (concatenate, pad) and ``dynamic_pad``, TOSA's
broadcasts over ``?`` dims, and a TOSA region whose branches disagree (named as the ``tosa.cond_if`` the user wrote)."""

from __future__ import annotations

import pytest
from pyree.compiler import CompileError, CompileOptions, compile_str

CPU = CompileOptions(target_backends=["llvm-cpu"])


def refused(text: str, pattern: str, **options) -> None:
    with pytest.raises(CompileError, match=pattern):
        compile_str(text, CompileOptions(target_backends=["llvm-cpu"], **options))


def test_a_stablehlo_concatenate_of_dynamic_dims_is_refused_by_name():
    refused("""
func.func @main(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %y = stablehlo.concatenate %x, %x, dim = 0 : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}
""", r"<string>:3:\d+: error: 'stablehlo.concatenate' with dynamic dimensions is not supported")


def test_stablehlo_dynamic_pad_is_refused_by_name():
    refused("""
func.func @main(%x: tensor<?xf32>, %p: tensor<f32>, %l: tensor<1xi32>, %h: tensor<1xi32>, %i: tensor<1xi32>) -> tensor<?xf32> {
  %y = stablehlo.dynamic_pad %x, %p, %l, %h, %i : (tensor<?xf32>, tensor<f32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<?xf32>
  return %y : tensor<?xf32>
}
""", r"<string>:3:\d+: error: stablehlo.dynamic_pad is not supported yet")


def test_a_stablehlo_op_that_changes_a_dynamic_shape_is_refused_by_name():
    refused("""
func.func @main(%x: tensor<?x4xf32>, %p: tensor<f32>) -> tensor<?x4xf32> {
  %y = stablehlo.pad %x, %p, low = [1, 0], high = [1, 0], interior = [0, 0] : (tensor<?x4xf32>, tensor<f32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}
""", r"<string>:3:\d+: error: 'stablehlo.pad' with dynamic dimensions is not supported yet")


def test_tosa_broadcast_over_dynamic_dims_is_refused_by_name():
    refused("""
func.func @f(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %s = tosa.add %a, %b : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %s : tensor<?x4xf32>
}
""", r"<string>:3:8: error: 'tosa.add' on tensors with run-time \('\?'\) dims is not supported yet",
            input_type="tosa")


def test_a_tosa_region_error_names_the_users_op():
    with pytest.raises(CompileError) as error:
        compile_str("""
func.func @f(%c: tensor<i1>, %a: tensor<4xf32>, %b: tensor<3xf32>) -> tensor<4xf32> {
  %r = tosa.cond_if %c : tensor<i1> -> tensor<4xf32> {
    %x = tosa.abs %a : (tensor<4xf32>) -> tensor<4xf32>
    tosa.yield %x : tensor<4xf32>
  } else {
    tosa.yield %b : tensor<3xf32>
  }
  return %r : tensor<4xf32>
}
""", CPU, input_type="tosa")
    assert "3:8: error: 'tosa.cond_if'" in str(error.value)
    assert "tosa.yield" not in str(error.value)
