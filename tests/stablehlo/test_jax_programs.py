"""JAX programs as JAX prints them (``jax.jit(f).lower(...).as_text()``, StableHLO + CHLO),
compiled by pyree for llvm-cpu and run on local-task, against JAX's own results."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import compile_str
from pyree.compiler.options import CompileOptions
from tooling import require_module

jax = require_module("jax")
jnp, lax = jax.numpy, jax.lax
jax.config.update("jax_platforms", "cpu")

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _same_inputs_whatever_runs_first():
    """Each test draws the same numbers however the tests are selected (argmax ties)."""
    global RNG
    RNG = np.random.default_rng(7)


def run_both(f, *args, generic=False):
    """(pyree's outputs, JAX's outputs) for ``f`` at ``args``; ``generic``: compile the text
    with every op in MLIR's generic form instead of the custom forms JAX prints."""
    lowered = jax.jit(f).lower(*args)
    text = lowered.compiler_ir("stablehlo").operation.get_asm(print_generic_op_form=True) \
        if generic else lowered.as_text()
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    out = module["main"](*[np.asarray(a) for a in args])
    outs = out if isinstance(out, tuple) else (out,)
    expected = jax.jit(f)(*args)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    return [np.asarray(o.to_host()) for o in outs], [np.asarray(e) for e in expected]


def check(f, *args, rtol=1e-5, atol=1e-5, generic=False):
    actual, expected = run_both(f, *args, generic=generic)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype
        if np.issubdtype(e.dtype, np.floating):
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(a, e)


def normal(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_mlp_with_closure_weights():
    w1, b1, w2, b2 = normal(13, 32), normal(32), normal(32, 5), normal(5)

    def mlp(x):
        h = jax.nn.relu(x @ w1 + b1)
        return jax.nn.softmax(jnp.tanh(h) @ w2 + b2, axis=-1)

    check(mlp, normal(7, 13), rtol=1e-4)


def test_small_cnn():
    k1, k2 = normal(4, 3, 3, 3) * 0.5, normal(6, 4, 3, 3) * 0.5
    dense = normal(6, 10) * 0.2

    def cnn(img):
        y = jax.nn.relu(lax.conv_general_dilated(img, k1, (1, 1), "SAME"))
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        y = jax.nn.relu(lax.conv_general_dilated(y, k2, (2, 2), ((1, 0), (0, 1))))
        y = lax.reduce_window(y, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 1, 1), "VALID") / 4
        return jax.nn.softmax(y.reshape(y.shape[0], -1) @ dense)

    check(cnn, normal(2, 3, 9, 11), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dims", [("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "NCHW"),
                                  ("NHWC", "OIHW", "NCHW")])
def test_convolution_dimension_numbers_dilation_groups(dims):
    lhs = normal(2, 7, 9, 4) if dims[0] == "NHWC" else normal(2, 4, 7, 9)
    rhs = normal(3, 2, 2, 6) if dims[1] == "HWIO" else normal(6, 2, 3, 2)

    def conv(x):
        return lax.conv_general_dilated(x, rhs, (2, 1), ((1, 2), (-1, 1)), lhs_dilation=(1, 2),
                                        rhs_dilation=(2, 1), dimension_numbers=dims,
                                        feature_group_count=2)

    check(conv, lhs, rtol=1e-4, atol=1e-4)


def test_batch_group_convolution():
    lhs, rhs = normal(4, 5, 6, 3), normal(2, 2, 3, 6)
    check(lambda x: lax.conv_general_dilated(x, rhs, (1, 1), "VALID",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                             batch_group_count=2), lhs, rtol=1e-4, atol=1e-4)


def test_argmax_argmin_and_reductions():
    x = normal(7, 13)
    x[2, 5] = np.nan
    check(lambda x: (jnp.argmax(x, -1), jnp.argmin(x, 0), x.sum(0), x.max(1), jnp.prod(x, 1),
                     jnp.all(x > -1, 1)), x, rtol=1e-5)


def test_dynamic_slice_and_update_clamp():
    x = normal(7, 13)
    starts = np.array([5, 12, -3], np.int32)
    check(lambda x, s: (lax.dynamic_slice(x, (s[0], s[1]), (3, 4)),
                        lax.dynamic_update_slice(x, jnp.ones((2, 3)), (s[2], s[1])),
                        lax.dynamic_slice(x, (2, 3), (2, 2))), x, starts)


def test_gather_fancy_indexing_and_take():
    x = normal(7, 13)
    idx = np.array([1, -1, 6, 0, 3], np.int32)
    check(lambda x, i: (x[i], jnp.take(x, i, axis=1), x[i, 2:5], x[i[:, None], i[None, :2]]),
          x, idx)


def test_scatter_add_set_with_repeated_indices():
    x = normal(7, 13)
    idx = np.array([1, 1, 6], np.int32)
    upd = normal(3, 13)
    check(lambda x, i, u: (x.at[i].add(u), x.at[i].set(2.0), x.at[i, 3].mul(u[:, 0]),
                           x.at[i].max(u)), x, idx, upd)


def test_scatters_of_many_repeated_indices_write_at_computed_places():
    """5000 updates into 97 rows (input/scatter.py: one kernel over the updates, atomic
    combines; a set keeps the last of a repeated row, which JAX's CPU scatter also takes)."""
    x = normal(97, 5)
    idx = RNG.integers(-3, 100, 5000).astype(np.int32)  # negative: from the end; past it: dropped
    upd = normal(5000, 5)
    ints = RNG.integers(-50, 50, (97, 5)).astype(np.int32)
    check(lambda x, i, u, n: (x.at[i].add(u), x.at[i].max(u), x.at[i].min(u),
                              x.at[i].mul(jnp.sign(u) + (u == 0)), x.at[i].set(u),
                              n.at[i].add((u * 10).astype(jnp.int32)), jax.ops.segment_sum(
                                  u, jnp.abs(i) % 97, 97)), x, idx, upd, ints,
          rtol=1e-4, atol=1e-4)


def test_cumsum_cumprod_cummax():
    x = normal(7, 13)
    check(lambda x: (jnp.cumsum(x, 0), lax.cummax(x, 1), jnp.cumprod(x[:, :4], 1)), x,
          rtol=1e-4, atol=1e-4)


def test_elementwise_special_values():
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.5, 0.5, 1e-30, -7.25,
                         3.0, 2.5, -1.0], np.float32)
    x = np.stack([specials, np.roll(specials, 3), normal(13), normal(13) * 3, np.abs(normal(13)),
                  -specials, np.roll(specials, 7)])
    y = np.roll(x, 1, axis=0)
    check(lambda x, y: (x + y, x - y, x * y, x / y, lax.rem(x, y), jnp.maximum(x, y),
                        jnp.minimum(x, y), jnp.arctan2(x, y), jnp.abs(x), -x, jnp.exp(x),
                        jnp.expm1(x), jnp.log(x), jnp.log1p(x), jax.nn.sigmoid(x), jnp.sqrt(x),
                        lax.rsqrt(x), jnp.tanh(x), jnp.sin(x), jnp.cos(x), jnp.floor(x),
                        jnp.ceil(x), lax.round(x), jnp.round(x), jnp.sign(x), jnp.isfinite(x),
                        x < y, x >= y, x == y, x != y, jnp.clip(x, -1.0, 2.0),
                        jnp.where(x > y, x, y), lax.erf(x), x.astype(np.int32) * 0 + 1,
                        jnp.power(jnp.abs(x), y)), x, y, rtol=2e-5, atol=1e-6)


def test_chlo_math():
    x = np.linspace(-0.95, 0.95, 7 * 13, dtype=np.float32).reshape(7, 13)
    check(lambda x: (jnp.tan(x), jnp.arctan(x), lax.erf(x), lax.erfc(x), jnp.isinf(1 / x)),
          x, rtol=1e-5, atol=1e-6)


def test_chlo_inverse_trig_and_hyperbolic():
    x = np.linspace(-0.95, 0.95, 7 * 13, dtype=np.float32).reshape(7, 13)
    check(lambda x: (jnp.arccos(x), jnp.arcsin(x), jnp.sinh(x), jnp.cosh(x), jnp.arcsinh(x),
                     jnp.arccosh(2 + x), jnp.arctanh(x), jnp.cbrt(x)), x, rtol=1e-5, atol=1e-6)


def test_integer_ops():
    a = RNG.integers(-1000, 1000, (7, 13)).astype(np.int32)
    b = RNG.integers(1, 40, (7, 13)).astype(np.int32)
    check(lambda a, b: (a >> b, a << b, lax.shift_right_logical(a, b), a % b, lax.div(a, b),
                        lax.population_count(a), lax.clz(a), a & b, a | b, a ^ b, ~a,
                        jnp.maximum(a, b), a.astype(np.float32), a.astype(np.uint8),
                        a.astype(np.bool_), lax.bitcast_convert_type(a, np.float32),
                        lax.lt(a.astype(np.uint32), b.astype(np.uint32))), a, b)


def test_shapes_pad_concat_transpose_reverse_iota():
    x = normal(7, 13)
    check(lambda x: (lax.pad(x, 0.5, ((1, -2, 1), (2, 3, 0))), jnp.concatenate([x, x[:, :3]], 1),
                     x.T, jnp.flip(x, (0, 1)), jnp.arange(13.0) * x, x[1:6:2, ::3],
                     jnp.broadcast_to(x[:, None, :], (7, 2, 13)), x.reshape(13, 7)), x)


@pytest.mark.parametrize("shape", [(0, 3), (2, 0), (0, 0)])
def test_interior_padding_of_an_empty_tensor_is_all_padding(shape):
    """JAX's gradient of cumprod pads an empty slice with interior padding."""
    x = normal(*shape)
    check(lambda x: (lax.pad(x, 7.0, ((1, 2, 3), (0, 1, 2))), jnp.cumprod(x, 0)), x)


@pytest.mark.parametrize("f", [lambda a, b: a @ b[0], lambda a, b: jnp.einsum("ij,bjk->bik", a, b),
                               lambda a, b: jnp.einsum("ij,bjk->i", a, b)],
                         ids=["matmul", "batched", "two_contractions"])
def test_boolean_contractions_are_or_of_and(f):
    """The spec's sum and product of booleans are or and and (a wrapping sum gave the parity)."""
    a, b = RNG.random((5, 7)) < 0.5, RNG.random((3, 7, 11)) < 0.3
    assert "xi1>) -> tensor<" in jax.jit(f).lower(a, b).as_text()  # an i1 dot_general
    check(f, a, b)


def test_dot_algorithms_parse_and_attention_in_bf16():
    """``dot_general``'s ``algorithm = <...>`` (JAX's bf16 ``dot_product_attention``, a
    ``DotAlgorithmPreset``) parses; its products run in the result's type."""
    q, k = normal(2, 5, 3, 8).astype(jnp.bfloat16), normal(2, 7, 3, 8).astype(jnp.bfloat16)
    text = jax.jit(lambda q, k: jax.nn.dot_product_attention(q, k, k)).lower(q, k).as_text()
    assert "algorithm = <" in text
    check(lambda q, k: jax.nn.dot_product_attention(q, k, k), q, k, rtol=2e-2, atol=2e-2)
    a, b = normal(5, 7), normal(7, 3)
    check(lambda a, b: jnp.dot(a, b, precision=lax.DotAlgorithmPreset.F32_F32_F32), a, b,
          rtol=1e-5, atol=1e-5)


def test_reduction_bodies_that_call_functions():
    """``jnp.where`` in a reduction's body is a ``func.call`` there, inlined (was refused)."""
    x = normal(6, 13)
    x[1, 3], x[2, 5], x[4, 0] = np.nan, np.inf, -0.0

    def f(x):
        positive = lax.reduce(x, np.float32(0), lambda a, b: jnp.where(b > 0, a + b, a), (1,))
        clipped = lax.reduce_window(x, np.float32(-np.inf),
                                    lambda a, b: jnp.where(a > b, a, jnp.minimum(b, 1.5)),
                                    (2, 3), (1, 2), "VALID")
        return positive, clipped
    assert "func.call" in jax.jit(f).lower(x).as_text()
    check(f, x)


def test_dot_general_batch_and_contracting_anywhere():
    a, b = normal(3, 5, 4, 2), normal(4, 3, 6, 5)
    check(lambda a, b: jnp.einsum("bkcx,cbnk->xbn", *lax.optimization_barrier((a, b))), a, b,
          rtol=1e-4, atol=1e-5)


def test_sort_argsort_and_multi_operand_sort():
    x = normal(7, 13)
    x[1, :4] = [np.nan, -0.0, 0.0, np.inf]
    x[3, :6] = [1.0, 1.0, -1.0, 1.0, -1.0, 1.0]  # ties: stability is visible through argsort
    keys = RNG.integers(0, 3, (7, 13)).astype(np.int32)
    check(lambda x, k: (jnp.sort(x, 1), jnp.argsort(x, 1), jnp.sort(x, 0), jnp.argsort(k, 1),
                        *lax.sort((k, x), dimension=1, num_keys=1)), x, keys)


def test_top_k():
    x = normal(7, 13)
    check(lambda x: lax.top_k(x, 3), x)


def test_max_pool_gradient_select_and_scatter():
    def pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 2), (1, 2, 2),
                                 ((0, 0), (1, 1), (0, 1))).sum()

    x = normal(2, 7, 9)
    x[0, 1, 1] = x[0, 1, 2]  # a tie: the first in the window is selected
    text = jax.jit(jax.grad(pool)).lower(x).as_text()
    assert "stablehlo.select_and_scatter" in text
    check(jax.grad(pool), x)


def test_random_threefry_and_erf_inv():
    offset = np.float32(1.0)
    check(lambda k: (jax.random.normal(jax.random.key(0), (7, 13)) + k,
                     jax.random.bits(jax.random.key(3), (5,)),
                     jax.random.uniform(jax.random.key(1), (3, 4))), offset, rtol=2e-5)
    x = np.array([-1.0, -0.999, -0.5, -0.0, 0.0, 0.3, 0.9999, 1.0, 1.5, np.nan], np.float32)
    check(lambda x: lax.erf_inv(x), x, rtol=2e-5, atol=1e-6)


def test_control_flow_parses_and_runs():
    x = normal(3)
    check(lambda x: (lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 2),
                                    (0, x))[1],
                     lax.cond(x[0] > 0, lambda y: y + 1, lambda y: y - 1, x),
                     lax.switch(jnp.int32(x[1] > 0) + 1, [jnp.sin, jnp.cos, jnp.tanh], x),
                     lax.scan(lambda c, y: (c + y, c * y), 0.0, x)[1]), x)


def test_generic_op_form():
    kernel, dense = normal(4, 3, 3, 3), normal(5, 3)

    def program(img, i):
        y = jax.nn.relu(lax.conv_general_dilated(img, kernel, (1, 1), "SAME"))
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        y = jnp.sort(y.reshape(2, -1), 1).reshape(2, 5, 16).sum(2) @ dense
        return (jnp.argmax(y, -1), y[i], y.at[i].add(1.0), lax.dynamic_slice(y, (i[0], 1), (1, 2)),
                jnp.pad(y, ((1, 2), (0, 1))), y.T, jnp.concatenate([y, y], 0), y < 0.5)

    check(program, normal(2, 3, 9, 11), np.array([1, 0], np.int32), rtol=1e-4, generic=True)


def test_batched_gather_and_scatter():
    x, idx = normal(7, 13), RNG.integers(0, 13, (7, 3)).astype(np.int32)
    check(lambda x, i: (jnp.take_along_axis(x, i, 1),  # operand_batching_dims
                        jax.vmap(lambda r, j: r.at[j].add(1.0))(x, i),  # input_batching_dims
                        jnp.put_along_axis(x, i, -1.0, axis=1, inplace=False)), x, idx)


def test_common_layers():
    x = normal(7, 13)
    segments = np.array([0, 1, 1, 3, 3, 3, 2], np.int32)
    check(lambda x, s: (jax.nn.gelu(x), jax.nn.gelu(x, approximate=False), x.var(1),
                        (x - x.mean(-1, keepdims=True)) * lax.rsqrt(x.var(-1, keepdims=True) + 1e-5),
                        jax.nn.logsumexp(x, 1), jax.nn.one_hot(s, 5), jnp.roll(x, 3, 1),
                        jnp.repeat(x, 2, 0), jax.ops.segment_sum(x, s, 4),
                        lax.cumlogsumexp(x, 1), jnp.nextafter(x, 0.0)), x, segments,
          rtol=1e-4, atol=1e-5)


def test_low_precision_and_int8():
    x = normal(7, 13)
    a = RNG.integers(-100, 100, (7, 13)).astype(np.int8)
    u = RNG.integers(0, 2**32, (13,), dtype=np.uint64).astype(np.uint32)
    check(lambda x, a, u: ((x.astype(jnp.float16) * 2).astype(jnp.float32),
                           (x.astype(jnp.bfloat16) @ x.T.astype(jnp.bfloat16)).astype(jnp.float32),
                           x.astype(jnp.bfloat16).astype(jnp.float16),
                           lax.dot(a, a.T, preferred_element_type=jnp.int32),
                           u // np.uint32(3), u % np.uint32(5), u >> 2, jnp.maximum(u, np.uint32(7)),
                           u.astype(np.float32), u.astype(np.uint8), (u >> 8).astype(np.int32)), x, a,
          u, rtol=2e-2, atol=1e-2)


def test_scatter_scalar_updates_and_out_of_bounds_windows():
    x = normal(7, 13)
    idx = np.array([2, 9, -1], np.int32)  # 9: out of bounds, dropped; -1: the last row
    check(lambda x, i: (x.at[2, 3].set(5.0), x.at[i].add(1.0), x.at[i, 12].mul(3.0),
                        lax.dynamic_update_slice(x, jnp.zeros((2, 4)), (i[0], i[1]))), x, idx)


def test_cnn_training_step():
    """jax.grad: transposed convolutions (lhs dilation, reversal), select_and_scatter, pads."""
    params = (normal(4, 3, 3, 3) * 0.5, normal(6, 4, 3, 3) * 0.5, normal(6, 10) * 0.2)

    def loss(params, img, label):
        k1, k2, dense = params
        y = jax.nn.relu(lax.conv_general_dilated(img, k1, (1, 1), "SAME"))
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        y = jax.nn.relu(lax.conv_general_dilated(y, k2, (2, 2), ((1, 0), (0, 1))))
        y = lax.reduce_window(y, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 1, 1), "VALID") / 4
        logits = y.reshape(y.shape[0], -1) @ dense
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(2), label])

    def step(k1, k2, dense, img, label):
        grads = jax.grad(loss)((k1, k2, dense), img, label)
        return tuple(p - 0.1 * g for p, g in zip((k1, k2, dense), grads))

    check(step, *params, normal(2, 3, 9, 11), np.array([3, 7], np.int32), rtol=1e-4, atol=1e-5)


def test_chlo_lgamma_digamma():
    x = np.concatenate([np.linspace(-4.75, 9.5, 40), [0.0, -1.0, -2.0, 1.0, 2.0, 0.5, 1e-3, 30.0,
                                                       200.0, np.inf, -np.inf, np.nan, -0.5]])
    check(lambda x: (lax.lgamma(x), lax.digamma(x), jax.scipy.special.gammaln(x)),
          x.astype(np.float32))


@pytest.mark.parametrize("dtype, rtol", [(np.float16, 1e-3), (jnp.bfloat16, 8e-3)])
def test_chlo_special_functions_of_16_bit_floats_in_f32(dtype, rtol):
    """CHLO upcasts f16/bf16 to f32 for its special functions (in bf16 itself lgamma was 10%
    off and digamma near its root 1.4616 had the wrong sign)."""
    x = np.concatenate([np.linspace(0.2, 9.5, 37), [1.4609375, 1.703125, 2.5, 3.3, -3.7, -0.5]])
    p = np.tanh(np.linspace(-2.5, 2.5, 43))
    actual, expected = run_both(
        lambda x, p: (lax.lgamma(x), lax.digamma(x), lax.polygamma(jnp.ones_like(x), x),
                      lax.zeta(x + 1.1, jnp.abs(x)), lax.erf_inv(p)), x.astype(dtype), p.astype(dtype))
    for a, e in zip(actual, expected, strict=True):  # within an ulp or two of f32 rounded once
        assert a.dtype == e.dtype
        np.testing.assert_allclose(a.astype(np.float32), e.astype(np.float32), rtol=rtol,
                                   atol=rtol / 4, equal_nan=True)


def test_transformer_block():
    """Embedding gather, layer norm, causal attention (iota mask, select, softmax), GELU MLP."""
    d, heads, t = 16, 2, 7
    wq, wk, wv, wo = (normal(d, d) * 0.3 for _ in range(4))
    w1, w2 = normal(d, 4 * d) * 0.2, normal(4 * d, d) * 0.2
    emb = jnp.asarray(normal(50, d))

    def norm(x):
        return (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)

    def block(tokens):
        x = emb[tokens]
        y = norm(x)
        q, k, v = (jnp.einsum("btd,de->bte", y, w).reshape(2, t, heads, d // heads)
                   for w in (wq, wk, wv))
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d // heads)
        s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -1e9)
        a = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), v).reshape(2, t, d)
        x = x + a @ wo
        x = x + jax.nn.gelu(norm(x) @ w1) @ w2
        return jnp.argmax(x @ emb.T, -1), x

    check(block, RNG.integers(0, 50, (2, t)).astype(np.int32), rtol=1e-4, atol=1e-4)
