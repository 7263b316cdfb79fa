"""stablehlo.custom_call: JAX's @shape_assertion is dropped as IREE drops it (IREE's e2e test
passes a false predicate and expects the function to run); any other target is refused by name."""

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, compile_str

ASSERTING = """
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %p = stablehlo.compare EQ, %a, %b, NOTYPE : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  CALL
  %r = stablehlo.add %a, %b : tensor<4xf32>
  return %r : tensor<4xf32>
}"""


@pytest.mark.parametrize("call", [
    'stablehlo.custom_call @shape_assertion(%p) {error_message = "Shape assertion failed", '
    'has_side_effect = true} : (tensor<4xi1>) -> ()',
    '"stablehlo.custom_call"(%p) {call_target_name = "shape_assertion", '
    'error_message = "x", has_side_effect = true} : (tensor<4xi1>) -> ()'])
def test_shape_assertion_is_dropped(call):
    module = rt.load_module(compile_str(ASSERTING.replace("CALL", call), input_type="stablehlo"),
                            device="local-task")
    a, b = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    np.testing.assert_array_equal(np.asarray(module.f(a, b)), a + b)


def test_other_targets_are_refused_by_name():
    call = "%q = stablehlo.custom_call @Householder(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>"
    with pytest.raises(CompileError, match="custom_call @Householder is not supported"):
        compile_str(ASSERTING.replace("CALL", call), input_type="stablehlo")
