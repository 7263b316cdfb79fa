"""Functions of several blocks (cf.br / cf.cond_br, as TensorFlow's importers and IREE's e2e tests
write loops and conditionals) and cf.assert, compiled and run on local-task, against numpy."""

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, compile_str

CFG = """
func.func @double_until(%x: tensor<5xf32>, %limit: tensor<f32>) -> (tensor<5xf32>, tensor<i32>) {
  %zero = arith.constant dense<0> : tensor<i32>
  %one = arith.constant dense<1> : tensor<i32>
  cf.br ^head(%x, %zero : tensor<5xf32>, tensor<i32>)
^head(%a: tensor<5xf32>, %k: tensor<i32>):
  %init = arith.constant dense<0.0> : tensor<f32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>],
                       iterator_types = ["reduction"]} ins(%a : tensor<5xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %o: f32):
    %t = arith.addf %in, %o : f32
    linalg.yield %t : f32
  } -> tensor<f32>
  %v = tensor.extract %s[] : tensor<f32>
  %lim = tensor.extract %limit[] : tensor<f32>
  %more = arith.cmpf olt, %v, %lim : f32
  cf.cond_br %more, ^body(%a, %k : tensor<5xf32>, tensor<i32>), ^done
^body(%b: tensor<5xf32>, %j: tensor<i32>):
  %b2 = arith.addf %b, %b : tensor<5xf32>
  %j2 = arith.addi %j, %one : tensor<i32>
  cf.br ^head(%b2, %j2 : tensor<5xf32>, tensor<i32>)
^done:
  return %a, %k : tensor<5xf32>, tensor<i32>
}

func.func @pick(%x: tensor<3xf32>, %flag: tensor<i1>) -> tensor<3xf32> {
  %f = tensor.extract %flag[] : tensor<i1>
  cf.cond_br %f, ^neg, ^sq
^neg:
  %n = arith.negf %x : tensor<3xf32>
  cf.br ^join(%n : tensor<3xf32>)
^sq:
  %s = arith.mulf %x, %x : tensor<3xf32>
  cf.br ^join(%s : tensor<3xf32>)
^join(%r: tensor<3xf32>):
  %one = arith.constant dense<1.0> : tensor<3xf32>
  %out = arith.addf %r, %one : tensor<3xf32>
  return %out : tensor<3xf32>
}

func.func @countdown(%n: tensor<i32>) -> tensor<i32> {
  %one = arith.constant dense<1> : tensor<i32>
  %zero = arith.constant 0 : i32
  cf.br ^loop(%n, %n : tensor<i32>, tensor<i32>)
^loop(%i: tensor<i32>, %acc: tensor<i32>):
  %i2 = arith.subi %i, %one : tensor<i32>
  %acc2 = arith.addi %acc, %i2 : tensor<i32>
  %e = tensor.extract %i2[] : tensor<i32>
  %more = arith.cmpi sgt, %e, %zero : i32
  cf.cond_br %more, ^loop(%i2, %acc2 : tensor<i32>, tensor<i32>), ^exit(%acc2 : tensor<i32>)
^exit(%r: tensor<i32>):
  return %r : tensor<i32>
}
"""


@pytest.fixture(scope="module")
def module():
    return rt.load_module(compile_str(CFG, target_backends=["llvm-cpu"]), device="local-task")


def test_a_loop_of_blocks_runs_until_its_condition_fails(module, rng):
    x = rng.uniform(0.5, 1.5, 5).astype(np.float32)
    for limit in (0.0, 7.0, 100.0):
        a, k = module.double_until(x, np.array(limit, np.float32))
        want, steps = x.copy(), 0
        while want.sum(dtype=np.float32) < limit:
            want, steps = want * 2, steps + 1
        np.testing.assert_allclose(np.asarray(a), want, rtol=1e-6)
        assert int(np.asarray(k)) == steps


def test_a_diamond_of_blocks_is_an_if(module, rng):
    x = rng.standard_normal(3).astype(np.float32)
    for flag, want in ((True, -x + 1), (False, x * x + 1)):
        np.testing.assert_allclose(np.asarray(module.pick(x, np.array(flag))), want, rtol=1e-6)


def test_a_block_that_branches_to_itself_is_a_do_while(module):
    for n in (1, 2, 9):
        assert int(np.asarray(module.countdown(np.array(n, np.int32)))) == n * (n + 1) // 2


def test_branches_that_both_return_are_an_if(rng):
    text = """
func.func @f(%x: tensor<2xf32>, %c: tensor<i1>) -> tensor<2xf32> {
  %b = tensor.extract %c[] : tensor<i1>
  cf.cond_br %b, ^early, ^more
^early:
  return %x : tensor<2xf32>
^more:
  %y = arith.addf %x, %x : tensor<2xf32>
  return %y : tensor<2xf32>
}"""
    module = rt.load_module(compile_str(text, target_backends=["llvm-cpu"]), device="local-task")
    x = rng.standard_normal(2).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(module.f(x, np.array(True))), x)
    np.testing.assert_array_equal(np.asarray(module.f(x, np.array(False))), x + x)


def test_a_break_out_of_a_loop_is_refused_by_name():
    text = """
func.func @f(%x: tensor<i32>, %c: i1) -> tensor<i32> {
  cf.br ^head(%x : tensor<i32>)
^head(%a: tensor<i32>):
  %e = tensor.extract %a[] : tensor<i32>
  %z = arith.constant 100 : i32
  %more = arith.cmpi slt, %e, %z : i32
  cf.cond_br %more, ^body, ^exit(%a : tensor<i32>)
^body:
  %b = arith.addi %a, %a : tensor<i32>
  cf.cond_br %c, ^exit(%b : tensor<i32>), ^head(%b : tensor<i32>)
^exit(%r: tensor<i32>):
  return %r : tensor<i32>
}"""
    with pytest.raises(CompileError, match="out of a loop other than at its header") as err:
        compile_str(text, target_backends=["llvm-cpu"], source_name="brk.mlir")
    assert "brk.mlir:" in str(err.value)


ASSERT = """
func.func @safe_div(%x: tensor<4xf32>, %d: tensor<f32>) -> tensor<4xf32> {
  %v = tensor.extract %d[] : tensor<f32>
  %zero = arith.constant 0.0 : f32
  %ok = arith.cmpf one, %v, %zero : f32
  cf.assert %ok, "divisor must not be zero"
  %e = tensor.empty() : tensor<4xf32>
  %b = linalg.fill ins(%v : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r = arith.divf %x, %b : tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


def test_cf_assert_raises_its_message_at_run_time(rng):
    module = rt.load_module(compile_str(ASSERT, target_backends=["llvm-cpu"],
                                        source_name="assert.mlir"), device="local-task")
    x = rng.standard_normal(4).astype(np.float32)
    d = np.float32(rng.uniform(1, 2))
    np.testing.assert_allclose(np.asarray(module.safe_div(x, np.array(d))), x / d, rtol=1e-6)
    with pytest.raises(rt.CheckError, match="divisor must not be zero") as err:
        module.safe_div(x, np.array(0.0, np.float32))
    assert "assert.mlir:6:3" in str(err.value)
