"""stablehlo.custom_call: JAX's @shape_assertion is dropped as IREE drops it (IREE's e2e test
passes a false predicate and expects the function to run); JAX's QR reflector product is computed;
any other target is refused by name."""

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


def _orgqr(a, taus):
    """LAPACK's orgqr by its definition: Q = H_0 ... H_{k-1}, first n columns."""
    *batch, m, n = a.shape
    out = np.empty(a.shape)
    for b in np.ndindex(*batch):
        q = np.eye(m)
        for i in range(taus.shape[-1]):
            v = np.zeros(m)
            v[i] = 1.0
            v[i + 1:] = a[b][i + 1:, i]
            q = q @ (np.eye(m) - taus[b][i] * np.outer(v, v))
        out[b] = q[:, :n]
    return out


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_householder_product_matches_its_definition(dtype):
    rng = np.random.default_rng(3)
    ta, tt = f"tensor<2x6x4x{dtype}>", f"tensor<2x3x{dtype}>"
    text = f"""
func.func @q(%a: {ta}, %t: {tt}) -> {ta} {{
  %r = stablehlo.custom_call @ProductOfElementaryHouseholderReflectors(%a, %t) : ({ta}, {tt}) -> {ta}
  return %r : {ta}
}}"""
    module = rt.load_module(compile_str(text, input_type="stablehlo"), device="local-task")
    np_dtype = np.float32 if dtype == "f32" else np.float64
    a = rng.standard_normal((2, 6, 4)).astype(np_dtype)
    taus = rng.uniform(0.5, 1.5, (2, 3)).astype(np_dtype)
    tol = 1e-5 if dtype == "f32" else 1e-12
    np.testing.assert_allclose(np.asarray(module.q(a, taus)), _orgqr(a, taus), rtol=tol, atol=tol)


SVD = """
func.func @f(%a: tensor<5x4xf32>) -> tensor<4xf32> {
  %0:5 = stablehlo.custom_call @lapack_sgesdd_ffi(%a) {backend_config = "", mhlo.backend_config = {mode = 78 : ui8}, mhlo.frontend_attributes = {num_batch_dims = "0"}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([k, l], [m], [n, o], [p, q], []) {i=5, j=4, k=5, l=4, m=4, n=1, o=1, p=1, q=1}, custom>} : (tensor<5x4xf32>) -> (tensor<5x4xf32>, tensor<4xf32>, tensor<1x1xf32>, tensor<1x1xf32>, tensor<i32>)
  return %0#1 : tensor<4xf32>
}"""


def test_jax_linear_algebra_parses_past_its_sharding_rule():
    """JAX's CPU svd (singular values only), as JAX 0.10 prints it: Shardy's attribute parses
    (it failed as "'sdy.op_sharding_rule' is not registered") and the LAPACK call is computed
    (tests/stablehlo/test_jax_linear_algebra.py checks the numbers)."""
    module = rt.load_module(compile_str(SVD, input_type="stablehlo"), device="local-task")
    a = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(module.f(a)), np.linalg.svd(a, compute_uv=False),
                               rtol=1e-5)


def test_solver_calls_pyree_lacks_are_refused_by_name():
    text = SVD.replace("lapack_sgesdd_ffi", "lapack_sgeev_ffi")
    with pytest.raises(CompileError, match=r"(?s)custom_call @lapack_sgeev_ffi is not supported"
                                           r".*potrf, getrf, trsm, geqrf, orgqr, syevd and gesdd"):
        compile_str(text, input_type="stablehlo")


def test_sharded_arguments_compile_for_one_device():
    text = """
func.func @f(%a: tensor<4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) -> tensor<4xf32> {
  %r = stablehlo.add %a, %a : tensor<4xf32>
  return %r : tensor<4xf32>
}"""
    module = rt.load_module(compile_str(text, input_type="stablehlo"), device="local-task")
    np.testing.assert_array_equal(np.asarray(module.f(np.arange(4, dtype=np.float32))),
                                  2 * np.arange(4, dtype=np.float32))
