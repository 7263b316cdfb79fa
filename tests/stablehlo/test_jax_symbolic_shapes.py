"""JAX's ``jax.export`` with symbolic shapes: one module, exported with a symbolic batch,
compiled by pyree for llvm-cpu and run on local-task at sizes 0, 1, a prime and large against
JAX's own results; the text is ``Exported.mlir_module()`` as JAX writes it (location aliases
after the module included)."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, CompileOptions, compile_str
from tooling import require_module

jax = require_module("jax")
jnp = jax.numpy
jax.config.update("jax_platforms", "cpu")

CPU = CompileOptions(target_backends=["llvm-cpu"])
SIZES = [0, 1, 7, 1031]
RNG = np.random.default_rng(41)
W = RNG.standard_normal((4, 3)).astype(np.float32)


def export(f, spec: str, *rest):
    """``f`` exported with its first argument's shape given by ``spec`` (e.g. ``"b, 4"``)."""
    shape = jax.export.symbolic_shape(spec)
    args = [jax.ShapeDtypeStruct(shape, jnp.float32), *rest]
    return jax.export.export(jax.jit(f))(*args).mlir_module()


def mlp(x):
    h = jnp.tanh(x @ W + 1.0)
    return h * jnp.sum(x, axis=1, keepdims=True), jnp.arange(x.shape[0]), jnp.sum(x * x, axis=0)


@pytest.fixture(scope="module")
def mlp_module():
    return rt.load_module(compile_str(export(mlp, "b, 4"), CPU), device="local-task")


@pytest.mark.parametrize("n", SIZES)
def test_symbolic_batch_against_jax(mlp_module, n):
    x = RNG.standard_normal((n, 4)).astype(np.float32)
    if n:
        x[0, 0] = -0.0
    out = mlp_module["main"](x)
    for actual, expected in zip(out, mlp(x), strict=True):
        actual, expected = np.asarray(actual.to_host()), np.asarray(expected)
        assert actual.shape == expected.shape and actual.dtype == expected.dtype
        np.testing.assert_allclose(actual, expected, rtol=2e-5, atol=1e-6)


def test_symbolic_dims_in_reshapes_and_slices_against_jax():
    def f(x):  # (b, 6) -> (2b, 3) -> its rows 1: and every second column
        y = jnp.reshape(x * 2.0, (x.shape[0] * 2, 3))
        return jax.lax.slice(y, (1, 0), (y.shape[0], 3), (1, 2)) + jnp.arange(2.0)

    module = rt.load_module(compile_str(export(f, "b, 6"), CPU), device="local-task")
    for n in (1, 7, 300):
        x = RNG.standard_normal((n, 6)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(module["main"](x).to_host()), np.asarray(f(x)),
                                   rtol=1e-6)


def test_a_size_read_as_data_is_refused_by_name():
    def mean(x):
        return jnp.mean(x, axis=0)  # divides by b, a size turned into a float

    with pytest.raises(CompileError, match=r":\d+:\d+: error: .*reads a run-time size as data"):
        compile_str(export(mean, "b, 4"), CPU)
