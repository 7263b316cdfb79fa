"""Dynamic forms pyree still refuses, each by name at the user's file:line:col (never a wrong
answer): StableHLO ops whose results have ``?`` dims and its dynamic ops (JAX's symbolic
shapes), TOSA's broadcasts over ``?`` dims, a scatter from run-time-sized updates, and a TOSA
region whose branches disagree (named as the ``tosa.cond_if`` the user wrote)."""

from __future__ import annotations

import pytest
from pyree.compiler import CompileError, CompileOptions, compile_str

CPU = CompileOptions(target_backends=["llvm-cpu"])


def refused(text: str, pattern: str, **options) -> None:
    with pytest.raises(CompileError, match=pattern):
        compile_str(text, CompileOptions(target_backends=["llvm-cpu"], **options))


def test_stablehlo_results_with_dynamic_dims_are_refused_by_name():
    refused("""
func.func @main(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %y = stablehlo.add %x, %x : tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}
""", r"<string>:3:\d+: error: 'stablehlo.add' with dynamic dimensions is not supported")


def test_stablehlo_dynamic_ops_are_refused_by_name():
    refused("""
func.func @main(%x: tensor<f32>, %s: tensor<2xi32>) -> tensor<?x3xf32> {
  %y = stablehlo.dynamic_broadcast_in_dim %x, %s, dims = [] : (tensor<f32>, tensor<2xi32>) -> tensor<?x3xf32>
  return %y : tensor<?x3xf32>
}
""", r"<string>:3:\d+: .*stablehlo.dynamic_broadcast_in_dim")


def test_scatter_of_run_time_sized_updates_is_refused_by_name():
    refused("""
func.func @s() -> tensor<6x3xi32> {
  %base = util.unfoldable_constant dense<1> : tensor<6x3xi32>
  %i = flow.tensor.dynamic_constant dense<[[2], [4]]> : tensor<2x1xi32> -> tensor<?x1xi32>
  %u = flow.tensor.dynamic_constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32> -> tensor<?x3xi32>
  %0 = "stablehlo.scatter"(%base, %i, %u) ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %1 = stablehlo.add %a, %b : tensor<i32>
    "stablehlo.return"(%1) : (tensor<i32>) -> ()
  }) {indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<
      update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0],
      index_vector_dim = 1>, unique_indices = false}
    : (tensor<6x3xi32>, tensor<?x1xi32>, tensor<?x3xi32>) -> tensor<6x3xi32>
  return %0 : tensor<6x3xi32>
}
""", r"gather from binding \d+, whose shape .* has run-time dims, is not supported yet.*:6:\d+")


def test_tosa_broadcast_over_dynamic_dims_is_refused_by_name():
    refused("""
func.func @f(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %s = tosa.add %a, %b : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %s : tensor<?x4xf32>
}
""", r"<string>:3:\d+: .*'arith.cmpi' on a run-time size is not supported", input_type="tosa")


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
