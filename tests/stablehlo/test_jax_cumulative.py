"""JAX's cumulative ops (``cumsum``, ``cumprod``, ``cummax``, ``cummin``, forward and reversed)
reach pyree as a ``reduce_window`` as long as the line, padded on one side; pyree scans the line
(input/stablehlo/reduce.py) instead of counting every window. Against JAX on local-task (the
walked scan) and on lavapipe (the blocked or counted scan), at lines of 1, a prime and a few
thousand, with NaN, +-inf and -0.0, in float and integer types; and hand-written windows whose
init is not the fold's identity."""

from __future__ import annotations

import numpy as np
import pytest
from jax_runs import module_for
from pyree.compiler import compile_str
from pyree.compiler.options import CompileOptions
from tooling import require_module

jax = require_module("jax")
jnp, lax = jax.numpy, jax.lax
jax.config.update("jax_platforms", "cpu")

BACKENDS = [
    pytest.param(("llvm-cpu", "local-task"), id="llvm-cpu"),
    pytest.param(("vulkan-spirv", "vulkan"), id="vulkan", marks=pytest.mark.vulkan),
    pytest.param(("cuda", "cuda"), id="cuda", marks=pytest.mark.cuda),
]
OPS = {"cumsum": lax.cumsum, "cumprod": lax.cumprod, "cummax": lax.cummax, "cummin": lax.cummin,
       "cumlogsumexp": lax.cumlogsumexp}


def compiled(text: str, backend):
    return module_for(text, backend[1])["main"]


def data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-3, 4, shape).astype(dtype)
    x = rng.uniform(0.5, 1.5, shape).astype(dtype) * rng.choice([-1, 1], shape).astype(dtype)
    flat = x.reshape(-1)
    if flat.size > 30:
        flat[[2, 3, 4]] = -0.0  # a run of -0.0 first along a line: +0.0 in JAX's sum (its init)
        flat[11], flat[17], flat[23] = np.inf, -np.inf, np.nan
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("shape,axis", [((7, 1), 0), ((1, 13), 1), ((13, 9), 0), ((5, 2003), 1),
                                        ((1021, 3), 0), ((3, 4, 9), 1)],
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else f"axis{v}")
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_matches_jax(backend, op, shape, axis, reverse):
    dtype = np.int32 if op == "cumprod" else np.float32  # a long product overflows: wraps alike
    x = data(shape, dtype, sum(shape))

    def f(x):
        return OPS[op](x, axis, reverse=reverse)
    text = jax.jit(f).lower(x).as_text()
    assert "reduce_window" in text
    got = compiled(text, backend)(x).to_host()
    want = np.asarray(jax.jit(f)(x))
    assert got.dtype == want.dtype and got.shape == want.shape
    if dtype == np.float32:
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-4, equal_nan=True)
        zero = want == 0
        if backend[0] != "vulkan-spirv":  # lavapipe folds 0.0 + x to x (-0.0 stays -0.0), as
            # it does for an elementwise ``0.0 + x``: JAX's sum starts from +0.0
            np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["cumsum", "cummax", "cummin"])
@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.int16, np.uint32])
def test_other_element_types(dtype, op):
    """Integers wrap alike; an f16 sum runs in f32 here (JAX rounds each step to f16), so it
    is compared to within the f16 rounding of 300 steps."""
    x = data((6, 301), dtype, 3)

    def f(x):
        return OPS[op](x, 1)
    got = compiled(jax.jit(f).lower(x).as_text(), BACKENDS[0].values[0])(x).to_host()
    want = np.asarray(jax.jit(f)(x))
    assert got.dtype == want.dtype
    if dtype == np.float16 and op == "cumsum":
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=0.15,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


WINDOW = """
func.func @main(%x: tensor<4x{n}xf32>) -> tensor<4x{n}xf32> {{
  %init = stablehlo.constant dense<{init}> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%x, %init) <{{padding = dense<[[0, 0], [{low}, {high}]]> : tensor<2x2xi64>,
      window_dimensions = array<i64: 1, {n}>}}> ({{
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.{op} %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }}) : (tensor<4x{n}xf32>, tensor<f32>) -> tensor<4x{n}xf32>
  return %0 : tensor<4x{n}xf32>
}}
"""


@pytest.mark.parametrize("op,init", [("maximum", "0.5"), ("minimum", "-0.25"), ("add", "0.0"),
                                     ("add", "-0.0"), ("add", "1.0"), ("multiply", "2.0")])
@pytest.mark.parametrize("side", ["low", "high"])
def test_a_window_init_counts_once_per_padded_place(op, init, side):
    """The spec pads with the init and folds it in as the start: a max with any init folds it
    once (a scan), a sum with an init of 1.0 adds it once per padded place too (counted)."""
    n = 37
    x = data((4, n), np.float32, 5)
    x[1] = -0.0
    text = WINDOW.format(n=n, init=init, op=op, low=n - 1 if side == "low" else 0,
                         high=n - 1 if side == "high" else 0)
    got = compiled(text, BACKENDS[0].values[0])(x).to_host()
    fold = {"maximum": np.fmax, "minimum": np.fmin, "add": np.add, "multiply": np.multiply}[op]
    start = np.float32(float(init))
    padded = np.concatenate([np.full((4, n - 1), start, np.float32), x], 1) if side == "low" \
        else np.concatenate([x, np.full((4, n - 1), start, np.float32)], 1)
    want = np.empty_like(x)
    for i in range(n):
        window = padded[:, i:i + n]
        acc = np.full(4, start, np.float32)
        for j in range(n):
            acc = fold(acc, window[:, j]) if op in ("add", "multiply") else \
                np.where(np.isnan(acc) | np.isnan(window[:, j]), np.nan, fold(acc, window[:, j]))
        want[:, i] = acc
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))


BODIES = {  # (the body's lines from %a and %b to %s, the same in numpy)
    "moving_sum": ("%h = stablehlo.multiply %a, %half : tensor<f32>\n"
                   "      %s = stablehlo.add %h, %b : tensor<f32>", lambda a, b: a * 0.5 + b),
    "mean": ("%t = stablehlo.add %a, %b : tensor<f32>\n"
             "      %s = stablehlo.multiply %t, %half : tensor<f32>", lambda a, b: (a + b) * 0.5),
    "log_add_exp": ("%m = stablehlo.maximum %a, %b : tensor<f32>\n"
                    "      %d = stablehlo.subtract %a, %b : tensor<f32>\n"
                    "      %n = stablehlo.abs %d : tensor<f32>\n"
                    "      %e = stablehlo.negate %n : tensor<f32>\n"
                    "      %x1 = stablehlo.exponential %e : tensor<f32>\n"
                    "      %l = stablehlo.log_plus_one %x1 : tensor<f32>\n"
                    "      %s = stablehlo.add %m, %l : tensor<f32>", np.logaddexp),
}


@pytest.mark.parametrize("body", list(BODIES))
@pytest.mark.parametrize("side", ["low", "high"])
def test_bodies_of_several_ops_fold_the_window_in_order(body, side):
    """A body that is not one op is scanned where the result keeps XLA's: a prefix folds the
    init, then the line in order (any body whose init folds with itself to itself); a suffix
    only for a body that commutes and associates (logaddexp), else its windows are counted (a
    moving sum or a mean folded from the line's end would be another answer)."""
    n = 23
    x = data((4, n), np.float32, 9)
    lines, f = BODIES[body]
    text = WINDOW.format(n=n, init="0.0", op="add", low=n - 1 if side == "low" else 0,
                         high=n - 1 if side == "high" else 0)
    text = text.replace("%s = stablehlo.add %a, %b : tensor<f32>", lines).replace(
        "%init = ", "%half = stablehlo.constant dense<0.5> : tensor<f32>\n  %init = ")
    got = compiled(text, BACKENDS[0].values[0])(x).to_host()
    pad = np.zeros((4, n - 1), np.float32)
    padded = np.concatenate([pad, x] if side == "low" else [x, pad], 1).astype(np.float64)
    want = np.empty_like(x)
    with np.errstate(invalid="ignore"):
        for i in range(n):
            acc = np.zeros(4)
            for j in range(i, i + n):
                acc = f(acc, padded[:, j])
            want[:, i] = acc
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_a_long_line_is_one_walk_not_a_count():
    """A cumsum (and a cumlogsumexp) of 4 x 20000 compiles to one walked kernel (LineScan) on
    llvm-cpu."""
    x = np.ones((4, 20000), np.float32)
    for f, reference in [(jnp.cumsum, np.cumsum), (lax.cumlogsumexp, np.logaddexp.accumulate)]:
        text = jax.jit(lambda x, f=f: f(x, 1)).lower(x).as_text()
        sources = compile_str(text, CompileOptions(target_backends=["llvm-cpu"],
                                                   compile_to="executable-sources")).decode()
        assert "as one running fold" in sources
        got = compiled(text, BACKENDS[0].values[0])(x).to_host()
        np.testing.assert_allclose(got, reference(x.astype(np.float64), 1), rtol=1e-5)
