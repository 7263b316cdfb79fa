"""JAX control flow (lax.while_loop, fori_loop, cond, switch) as StableHLO while/case, run by the
host program on local-task and compared with JAX, trip counts and branches taken from data."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import compile_str
from tooling import require_module

jax = require_module("jax")
jnp, lax = jax.numpy, jax.lax
jax.config.update("jax_platforms", "cpu")


def halvings(x):
    return lax.while_loop(lambda c: jnp.sum(c[0]) > 1.0, lambda c: (c[0] * 0.5, c[1] + 1),
                          (x, jnp.int32(0)))


def cond(p, x):
    return lax.cond(p > 0, lambda v: jnp.sin(v) * 2, lambda v: v - 1, x)


def switch(i, x):
    return lax.switch(i, [lambda v: v + 1, lambda v: v * v, lambda v: -v], x)


def fori(x):
    return lax.fori_loop(0, 7, lambda i, v: v * 1.5 + i, x)


def nested(n, x):
    """A data-dependent trip count around a fixed one, with a cond inside."""
    def outer(i, v):
        inner = lax.fori_loop(0, 3, lambda j, w: w * 0.5 + j, v)
        return lax.cond(i % 2 == 0, lambda w: w + 1.0, lambda w: -w, inner)
    return lax.fori_loop(0, n, outer, x)


X = np.linspace(-1, 3, 11).astype(np.float32)
CASES = [
    (halvings, [(X,), (X * 100,), (X * 0,)]),  # the last never enters the body
    (cond, [(np.float32(1), X), (np.float32(-1), X), (np.float32(np.nan), X)]),
    (switch, [(np.int32(i), X) for i in (-3, 0, 1, 2, 7)]),
    (fori, [(X,)]),
    (nested, [(np.int32(n), X[:7]) for n in (0, 1, 5)]),
]


@pytest.mark.parametrize("f, arguments", CASES, ids=[f.__name__ for f, _ in CASES])
def test_jax_control_flow_matches_jax(f, arguments):
    module = rt.load_module(compile_str(jax.jit(f).lower(*arguments[0]).as_text()),
                            device="local-task")
    for args in arguments:
        got = module["main"](*args)
        want = jax.jit(f)(*args)
        got, want = (x if isinstance(x, tuple) else (x,) for x in (got, want))
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)
