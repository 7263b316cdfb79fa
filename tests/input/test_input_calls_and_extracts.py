"""func.call of the module's functions (inlined) and tensor.extract inside linalg bodies."""

import numpy as np
import pytest
from program_interpreter import run
from pyree.compiler.errors import CompileError
from pyree.compiler.input import import_mlir
from pyree.compiler.kernel import AffineExpr, Gather, Load, walk

NESTED = """
func.func private @double(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %r = arith.addf %x, %x : tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}
func.func private @quadruple_plus(%x: tensor<3x4xf32>, %y: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %a = func.call @double(%x) : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %b = func.call @double(%a) : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %r = arith.addf %b, %y : tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}
func.func @f(%x: tensor<3x4xf32>, %y: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %r = func.call @quadruple_plus(%x, %y) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}"""


def test_nested_calls_are_inlined_and_private_functions_not_exported(rng):
    program = import_mlir(NESTED)
    (fn,) = program.functions
    assert fn.name == "f" and len(fn.ops) == 3
    x, y = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(run(fn, x, y)[0], 4 * x + y, rtol=1e-6)


def test_a_call_can_return_its_argument_and_a_constant(rng):
    text = """
func.func private @pair(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %c = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  return %x, %c : tensor<2xf32>, tensor<2xf32>
}
func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %a, %b = func.call @pair(%x) : (tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)
  %r = arith.mulf %a, %b : tensor<2xf32>
  return %r : tensor<2xf32>
}"""
    x = rng.standard_normal(2).astype(np.float32)
    np.testing.assert_allclose(run(import_mlir(text).functions[0], x)[0], x * [1, 2])


EXTRACT = """
func.func @f(%t: tensor<5x9xf32>) -> tensor<3x4xf32> {
  %c2 = arith.constant 2 : index
  %e = tensor.empty() : tensor<3x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<3x4xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %row = arith.addi %i, %c2 : index
    %j2 = arith.muli %c2, %j : index
    %col = arith.subi %j2, %i : index
    %col1 = arith.addi %col, %c2 : index
    %v = tensor.extract %t[%row, %col1] : tensor<5x9xf32>
    linalg.yield %v : f32
  } -> tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}"""


def test_extract_with_affine_indices_is_a_load(rng):
    fn = import_mlir(EXTRACT).functions[0]
    (op,) = fn.ops
    (load,) = [e for e in walk(op.outputs[0].value) if isinstance(e, Load)]
    assert load.index == (AffineExpr((1, 0), 2), AffineExpr((-1, 2), 2))
    x = rng.standard_normal((5, 9)).astype(np.float32)
    expected = [[x[i + 2, 2 * j - i + 2] for j in range(4)] for i in range(3)]
    np.testing.assert_array_equal(run(fn, x)[0], expected)


# ---- errors --------------------------------------------------------------------------------

def _error(text: str) -> CompileError:
    with pytest.raises(CompileError) as info:
        import_mlir(text, "model.mlir")
    return info.value


def test_recursion_is_an_error_naming_the_function():
    err = _error("""func.func private @g(%x: tensor<2xf32>) -> tensor<2xf32> {
  %r = func.call @h(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}
func.func private @h(%x: tensor<2xf32>) -> tensor<2xf32> {
  %r = func.call @g(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}
func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %r = func.call @g(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}""")
    assert err.location == "model.mlir:6:3"
    assert err.message == "recursive call of @g cannot be inlined (@f -> @g -> @h -> @g)"


def test_a_call_of_an_external_function():
    err = _error("""func.func private @ext(%x: tensor<2xf32>) -> tensor<2xf32>
func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %r = func.call @ext(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}""")
    assert err.location == "model.mlir:1:1" and "@ext has no body" in err.message


GATHER = """func.func @f(%t: tensor<10xf32>, %idx: tensor<4xi32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]} ins(%idx : tensor<4xi32>) outs(%e : tensor<4xf32>) {
  ^bb0(%k: i32, %o: f32):
    %at = arith.index_cast %k : i32 to index
    %v = tensor.extract %t[%at] : tensor<10xf32>
    linalg.yield %v : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}"""


def test_a_data_dependent_extract_is_a_gather_that_clamps(rng):
    fn = import_mlir(GATHER).functions[0]
    (op,) = fn.ops
    gather = op.outputs[0].value
    assert isinstance(gather, Gather) and op.inputs[gather.binding] is fn.arguments[0]
    t = rng.standard_normal(10).astype(np.float32)
    idx = np.array([3, -4, 9, 12], np.int32)  # out of range: the nearest edge element
    np.testing.assert_array_equal(run(fn, t, idx)[0], t[[3, 0, 9, 9]])


def test_an_extract_at_a_non_affine_index_is_a_gather(rng):
    fn = import_mlir(GATHER.replace("%at = arith.index_cast %k : i32 to index",
                                    "%i = linalg.index 0 : index\n    %at = arith.muli %i, %i : index"))
    (op,) = fn.functions[0].ops
    assert isinstance(op.outputs[0].value, Gather)
    t = rng.standard_normal(10).astype(np.float32)
    np.testing.assert_array_equal(run(fn.functions[0], t, np.zeros(4, np.int32))[0], t[[0, 1, 4, 9]])


def test_an_extract_from_an_empty_tensor_is_an_error():
    err = _error(GATHER.replace("tensor<10xf32>", "tensor<0xf32>"))
    assert err.location == "model.mlir:7:5" and "empty tensor" in err.message


@pytest.mark.parametrize("device", ["local-task", pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_affine_apply_of_an_index_the_program_computes(device):
    """``affine.apply`` over an index argument (not a size): its map computed on the device,
    floor and ceiling divisions and ``mod`` by positive constants as affine maps define them
    below zero (``mod`` never negative), the result indexing an extract. It was refused as "a
    size computed from tensor contents"."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from jax_runs import module_for

    text = """func.func @main(%a: tensor<8xf32>, %n: index) -> (index, index, index, index, f32) {
  %i = affine.apply affine_map<(d0) -> (d0 * 2 + 1)>(%n)
  %f = affine.apply affine_map<(d0)[s0] -> ((d0 - s0) floordiv 3 + 4)>(%n)[%n]
  %c = affine.apply affine_map<(d0) -> (d0 ceildiv 3)>(%n)
  %m = affine.apply affine_map<()[s0] -> ((s0 - 7) mod 3)>()[%n]
  %r = tensor.extract %a[%m] : tensor<8xf32>
  return %i, %f, %c, %m, %r : index, index, index, index, f32
}"""
    module = module_for(text, device)
    a = np.arange(8, dtype=np.float32) * 10
    for n in (0, 2, 5, -4, -11):
        got = [np.asarray(r.to_host()) if hasattr(r, "to_host") else r
               for r in module["main"](a, np.int64(n))]
        want = [2 * n + 1, 0 // 3 + 4, -((-n) // 3), (n - 7) % 3, a[(n - 7) % 3]]
        assert [float(g) for g in got] == [float(w) for w in want], n
