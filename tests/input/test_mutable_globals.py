"""Mutable globals (util.global mutable + util.global.store, ml_program.global +
global_store): module state that persists between calls of one loaded module, starts afresh in
another, and is read back within a call as it was stored; checked against numpy on both CPU
drivers."""

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, compile_str

UTIL = """
util.global private mutable @count = dense<0> : tensor<i32>
util.global private mutable @total = dense<[1.5, -2.0, 0.25, 4.0, 7.0]> : tensor<5xf32>
func.func @add(%x: tensor<5xf32>) -> (tensor<i32>, tensor<5xf32>, tensor<5xf32>) {
  %c = util.global.load @count : tensor<i32>
  %one = arith.constant dense<1> : tensor<i32>
  %c2 = arith.addi %c, %one : tensor<i32>
  util.global.store %c2, @count : tensor<i32>
  %t = util.global.load @total : tensor<5xf32>
  %t2 = arith.addf %t, %x : tensor<5xf32>
  util.global.store %t2, @total : tensor<5xf32>
  %again = util.global.load @total : tensor<5xf32>
  return %c, %t, %again : tensor<i32>, tensor<5xf32>, tensor<5xf32>
}
func.func @read_total() -> tensor<5xf32> {
  %t = util.global.load @total : tensor<5xf32>
  return %t : tensor<5xf32>
}
"""

ML_PROGRAM = """
ml_program.global private mutable @cache(dense<0.0> : tensor<6x3xf32>) : tensor<6x3xf32>
func.func @append(%row: tensor<1x3xf32>, %at: tensor<i32>) -> tensor<6x3xf32> {
  %cache = ml_program.global_load @cache : tensor<6x3xf32>
  %zero = arith.constant dense<0> : tensor<i32>
  %new = "stablehlo.dynamic_update_slice"(%cache, %row, %at, %zero) : (tensor<6x3xf32>, tensor<1x3xf32>, tensor<i32>, tensor<i32>) -> tensor<6x3xf32>
  ml_program.global_store @cache = %new : tensor<6x3xf32>
  return %new : tensor<6x3xf32>
}
"""


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_util_globals_persist_between_calls_of_one_module(device, rng):
    vmfb = compile_str(UTIL)
    module = rt.load_module(vmfb, device=device)
    total = np.array([1.5, -2.0, 0.25, 4.0, 7.0], np.float32)
    for n in range(4):
        x = rng.standard_normal(5).astype(np.float32)
        count, before, after = (np.asarray(v) for v in module.add(x))
        assert int(count) == n
        np.testing.assert_array_equal(before, total)
        total = total + x
        np.testing.assert_array_equal(after, total)  # a load after the store reads it
    np.testing.assert_array_equal(np.asarray(module.read_total()), total)
    fresh = rt.load_module(vmfb, device=device)  # another loaded module has its own state
    np.testing.assert_array_equal(np.asarray(fresh.read_total()), [1.5, -2.0, 0.25, 4.0, 7.0])


def test_ml_program_global_is_a_cache_filled_row_by_row(rng):
    module = rt.load_module(compile_str(ML_PROGRAM, input_type="stablehlo"), device="local-task")
    want = np.zeros((6, 3), np.float32)
    for at in (0, 3, 5, 1):
        row = rng.standard_normal((1, 3)).astype(np.float32)
        want[at] = row[0]
        np.testing.assert_array_equal(np.asarray(module.append(row, np.array(at, np.int32))), want)


def test_a_store_inside_control_flow_is_refused_by_name():
    text = """
util.global private mutable @g = dense<0> : tensor<i32>
func.func @f(%c: i1, %v: tensor<i32>) {
  scf.if %c {
    util.global.store %v, @g : tensor<i32>
  }
  return
}"""
    with pytest.raises(CompileError, match="inside a loop or a conditional") as err:
        compile_str(text, source_name="g.mlir")
    assert "g.mlir:5:5" in str(err.value)


def test_a_store_into_an_immutable_global_is_refused():
    text = """
util.global private @g = dense<0> : tensor<i32>
func.func @f(%v: tensor<i32>) {
  util.global.store %v, @g : tensor<i32>
  return
}"""
    with pytest.raises(CompileError, match="not mutable"):
        compile_str(text)
