"""stablehlo.cholesky against numpy: batched, lower and upper, f32 and f64, custom and generic
form; only the named triangle of the input is read (the other holds garbage here)."""

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, compile_str


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def _spd(rng, shape, dtype):
    n = shape[-1]
    x = rng.standard_normal(shape)
    return (x @ np.swapaxes(x, -1, -2) + n * np.eye(n)).astype(dtype)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("dtype,generic", [("f32", False), ("f64", True)])
def test_cholesky_matches_numpy(lower, dtype, generic, rng):
    t = f"tensor<3x5x5x{dtype}>"
    flag = "true" if lower else "false"
    op = (f'"stablehlo.cholesky"(%a) {{lower = {flag}}} : ({t}) -> {t}' if generic
          else f"stablehlo.cholesky %a, lower = {flag} : {t}")
    text = f"func.func @f(%a: {t}) -> {t} {{\n  %r = {op}\n  return %r : {t}\n}}"
    module = rt.load_module(compile_str(text, input_type="stablehlo"), device="local-task")
    np_dtype = np.float32 if dtype == "f32" else np.float64
    a = _spd(rng, (3, 5, 5), np_dtype)
    want = np.linalg.cholesky(a.astype(np.float64))
    if not lower:
        want = np.swapaxes(want, -1, -2)
    garbage = a.copy()
    other = np.triu_indices(5, 1) if lower else np.tril_indices(5, -1)
    garbage[:, other[0], other[1]] = 1.0e6  # never read
    got = np.asarray(module.f(garbage))
    tol = 1e-5 if dtype == "f32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_large_matrices_are_refused_by_name():
    t = "tensor<65x65xf32>"
    text = f"func.func @f(%a: {t}) -> {t} {{\n  %r = stablehlo.cholesky %a, lower = true : {t}\n  return %r : {t}\n}}"
    with pytest.raises(CompileError, match="cholesky of 65x65 matrices is not supported"):
        compile_str(text, input_type="stablehlo")
