"""JAX programs no test names (jax.numpy, lax, nn, random, control flow, gradients), each
compiled for one target and run on its device against JAX's own answer on the CPU: a probe
for wrong answers and refusals, not a test (tests/stablehlo holds what it found).

    python bench/probes/jax_programs.py [--device local-task|cuda|vulkan] [--match WORD]

Prints one line per program (ok / WRONG with where / ERROR with pyree's message) and a
summary. XLA's CPU flushes subnormals to zero and pyree keeps them (as numpy does): a
difference only at a subnormal input or result is JAX's, not pyree's; ``--no-subnormals``
leaves them out of the special values (NVIDIA's Vulkan driver flushes them too).
"""

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import pyree.runtime as rt
from jax import lax
from pyree.compiler import compile_str
from pyree.compiler.options import CompileOptions

jax.config.update("jax_platforms", "cpu")
R = np.random.default_rng(3)


def normal(*s):
    return R.standard_normal(s).astype(np.float32)


ARGS = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ARGS.add_argument("--device", default="local-task", choices=["local-task", "cuda", "vulkan"])
ARGS.add_argument("--match", default="")
ARGS.add_argument("--no-subnormals", action="store_true")
OPTS = ARGS.parse_args()
TARGET = {"local-task": "llvm-cpu", "cuda": "cuda", "vulkan": "vulkan-spirv"}[OPTS.device]
TINY = 1e-30 if OPTS.no_subnormals else 1e-40
SPECIAL = np.array(
    [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, np.inf, -np.inf, np.nan, TINY, -TINY, 3e38, -3e38, 7.0, 1e-7, 100.0],
    np.float32,
)

results = []


def probe(name, f, *args, rtol=1e-5, atol=1e-6):
    if OPTS.match not in name:
        return
    t = time.time()
    try:
        text = jax.jit(f).lower(*args).as_text()
    except Exception as e:
        results.append((name, "JAXFAIL", str(e)[:200]))
        return
    try:
        options = CompileOptions(
            target_backends=[TARGET],
            cuda_target="sm_90",
            vulkan_target=os.environ.get("PYREE_VULKAN_TARGET", "cpu-lavapipe-linux"),
        )
        m = rt.load_module(compile_str(text, options), device=OPTS.device)
        out = m["main"](*[np.asarray(a) for a in args])
    except Exception as e:
        results.append((name, "ERROR", f"{type(e).__name__}: {str(e)[:300]}"))
        print(name, "ERROR", str(e)[:300], flush=True)
        return
    outs = out if isinstance(out, tuple) else (out,)
    exp = jax.jit(f)(*args)
    exp = exp if isinstance(exp, (tuple, list)) else (exp,)
    msgs = []
    for i, (a, e) in enumerate(zip(outs, exp)):
        a = np.asarray(a.to_host() if hasattr(a, "to_host") else a)
        e = np.asarray(e)
        if a.shape != e.shape or a.dtype != e.dtype:
            msgs.append(f"out{i}: {a.shape}{a.dtype} vs {e.shape}{e.dtype}")
            continue
        if np.issubdtype(e.dtype, np.floating) or e.dtype.name in ("bfloat16",):
            a64, e64 = a.astype(np.float64), e.astype(np.float64)
            nan_a, nan_e = np.isnan(a64), np.isnan(e64)
            if (nan_a != nan_e).any():
                at = tuple(np.argwhere(nan_a != nan_e)[0])
                msgs.append(f"out{i}: NaN mismatch at {list(at)} got {a64[at]} want {e64[at]}")
                continue
            ok = np.isclose(a64, e64, rtol=rtol, atol=atol) | nan_a
            if not ok.all():
                at = tuple(np.argwhere(~ok)[0])
                msgs.append(f"out{i}: {(~ok).sum()} differ, e.g. at {list(at)} got {a64[at]} want {e64[at]}")
                continue
            sa, se = np.signbit(a64) & (a64 == 0), np.signbit(e64) & (e64 == 0)
            if (sa != se).any():
                msgs.append(f"out{i}: -0 sign differs at {np.argwhere(sa != se)[:3].tolist()}")
        else:
            if not np.array_equal(a, e):
                at = tuple(np.argwhere(a != e)[0]) if a.ndim else ()
                msgs.append(f"out{i}: {(a != e).sum()} integers differ, e.g. at {list(at)} got {a[at]} "
                            f"want {e[at]}")
    st = "WRONG" if msgs else "ok"
    results.append((name, st, "; ".join(msgs)))
    print(name, st, "; ".join(msgs), f"{time.time() - t:.1f}s", flush=True)


def report():
    print("\n==== SUMMARY")
    for n, s, m in results:
        if s != "ok":
            print(n, s, m)
    print(sum(s == "ok" for _, s, _ in results), "of", len(results), "ok")


# ---- the programs ----
x = normal(7, 13)
y = normal(7, 13)
S = SPECIAL
i32 = R.integers(-100, 100, (7, 13)).astype(np.int32)
j32 = R.integers(-9, 9, (7, 13)).astype(np.int32)
j32[j32 == 0] = 3
u32 = R.integers(0, 2**32, (5, 11), dtype=np.uint64).astype(np.uint32)
u8 = R.integers(0, 256, (5, 11)).astype(np.uint8)
probe("nn.softplus", jax.nn.softplus, S)
probe("nn.log_softmax", lambda a: jax.nn.log_softmax(a, axis=0), x)
probe("nn.gelu_tanh", lambda a: jax.nn.gelu(a, approximate=True), x)
probe("nn.gelu_erf", lambda a: jax.nn.gelu(a, approximate=False), x)
probe("nn.silu_special", jax.nn.silu, S)
probe("nn.one_hot", lambda a: jax.nn.one_hot(a, 9), (i32 % 9))
probe("logsumexp_special", lambda a: jax.nn.logsumexp(a.reshape(4, 4), axis=1), S)
probe("nonzero_size", lambda a: jnp.nonzero(a > 0.3, size=20, fill_value=-1), x)
probe("unique_size", lambda a: jnp.unique(a, size=30, fill_value=0), i32 % 17)
probe("histogram", lambda a: jnp.histogram(a, bins=7, range=(-2.0, 2.0))[0], x)
probe("searchsorted", lambda s, v: jnp.searchsorted(s, v), np.sort(normal(33)), normal(19))
probe("searchsorted_right", lambda s, v: jnp.searchsorted(s, v, side="right"), np.sort(normal(33)), normal(19))
probe("interp", lambda xp, fp, v: jnp.interp(v, xp, fp), np.sort(normal(17)), normal(17), normal(23))
probe("convolve", lambda a, b: jnp.convolve(a, b, mode="same"), normal(31), normal(5))
probe("cumsum_reverse", lambda a: lax.cumsum(a, axis=1, reverse=True), x)
probe("associative_scan", lambda a: lax.associative_scan(jnp.maximum, a, axis=1), x)
probe("cumlogsumexp", lambda a: lax.cumlogsumexp(a, axis=1), x)
probe("cummin", lambda a: lax.cummin(a, axis=0), x)
probe("reduce_precision", lambda a: lax.reduce_precision(a, exponent_bits=5, mantissa_bits=10), S)
probe("population_count", lax.population_count, u32)
probe("clz", lax.clz, u32)
probe("clz_i32", lax.clz, i32)
probe("bitcast_f32_u32", lambda a: lax.bitcast_convert_type(a, jnp.uint32), S)
probe("bitcast_u32_f32", lambda a: lax.bitcast_convert_type(a, jnp.float32), u32)
probe("bitcast_f32_to_u8x4", lambda a: lax.bitcast_convert_type(a, jnp.uint8), S)
probe(
    "round_half_even",
    jnp.round,
    np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4999, -0.0, np.nan, np.inf], np.float32),
)
probe(
    "round_half_away",
    lambda a: lax.round(a, lax.RoundingMethod.AWAY_FROM_ZERO),
    np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4999, -0.0, np.nan, np.inf], np.float32),
)
probe("floor_divide_int", jnp.floor_divide, i32, j32)
probe("remainder_int", jnp.remainder, i32, j32)
probe("remainder_float", jnp.remainder, x * 10, y)
probe("fmod_float", jnp.fmod, x * 10, y)
probe("nextafter", jnp.nextafter, S, S[::-1].copy())
probe("isclose", jnp.isclose, S, S[::-1].copy())
probe("copysign", jnp.copysign, S, S[::-1].copy())
probe("hypot", jnp.hypot, S, S[::-1].copy())
probe("ldexp", lambda a, e: jnp.ldexp(a, e), S, np.arange(-8, 8).astype(np.int32))
probe("frexp", jnp.frexp, S)
probe("logaddexp", jnp.logaddexp, S, S[::-1].copy())
probe("expm1_log1p", lambda a: (jnp.expm1(a), jnp.log1p(a)), S)
probe("sinc", jnp.sinc, S)
probe("arctan2", jnp.arctan2, S, S[::-1].copy())
probe("power_int_neg", lambda a, b: jnp.power(a, b), j32, np.abs(j32) % 4)
probe("integer_pow", lambda a: lax.integer_pow(a, -3), S)
probe("cbrt", jnp.cbrt, S)
probe("sign", jnp.sign, S)
probe("is_finite", lax.is_finite, S)
probe("median", lambda a: jnp.median(a, axis=1), x)
probe("percentile", lambda a: jnp.percentile(a, 37.0, axis=0), x)
probe("quantile_nearest", lambda a: jnp.quantile(a, 0.3, axis=1, method="nearest"), x)
probe(
    "take_along_axis",
    lambda a, i: jnp.take_along_axis(a, i, axis=1),
    x,
    R.integers(0, 13, (7, 5)).astype(np.int32),
)
probe("image_resize_linear", lambda a: jax.image.resize(a, (11, 29), "linear"), x)
probe("image_resize_cubic", lambda a: jax.image.resize(a, (11, 29), "cubic"), x)
probe("image_resize_lanczos3", lambda a: jax.image.resize(a, (5, 7), "lanczos3"), x)
probe("image_resize_nearest", lambda a: jax.image.resize(a, (11, 29), "nearest"), x)
probe(
    "reduce_window_max_pad",
    lambda a: lax.reduce_window(a, -jnp.inf, lax.max, (3, 3), (2, 2), ((1, 1), (1, 1))),
    x,
)
probe(
    "reduce_window_sum_dil",
    lambda a: lax.reduce_window(a, 0.0, lax.add, (2, 3), (1, 2), "SAME", window_dilation=(2, 1)),
    x,
)
probe(
    "conv_transpose",
    lambda a, k: lax.conv_transpose(a, k, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
    normal(1, 9, 7, 3),
    normal(3, 3, 5, 3),
)
probe(
    "at_min_max_mul",
    lambda a, i: (a.at[i].min(0.0), a.at[i].max(0.5), a.at[i].mul(2.0)),
    normal(17),
    R.integers(0, 17, 9).astype(np.int32),
)
probe("vmap_matvec", jax.vmap(lambda m, v: m @ v), normal(5, 7, 3), normal(5, 3))
probe(
    "while_dynamic",
    lambda n: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 1.5), (0, 1.0)),
    np.int32(13),
)
probe("fori_loop", lambda a: lax.fori_loop(0, 9, lambda i, c: c * 0.9 + jnp.sin(c + i), a), x)
probe("lax_map", lambda a: lax.map(lambda r: jnp.sort(r)[::-1], a), x)
probe("switch", lambda i, a: lax.switch(i, [jnp.sin, jnp.cos, jnp.tanh], a), np.int32(5), x)
probe("cond", lambda p, a: lax.cond(p > 0, lambda v: v * 2, lambda v: v - 1, a), np.float32(-1), x)
probe("scan_carry", lambda a: lax.scan(lambda c, r: (c + r, c * r), jnp.zeros(13), a), x)
probe("polyval", lambda c, a: jnp.polyval(c, a), normal(5), x)
probe("kron", jnp.kron, normal(3, 4), normal(2, 5))
probe("tril_triu", lambda a: (jnp.tril(a, -1), jnp.triu(a, 2)), x)
probe("sort_two_keys", lambda a, b: lax.sort((a, b), num_keys=2), (i32 % 3).astype(np.float32), x)
probe(
    "argsort_desc_stable",
    lambda a: jnp.argsort(a, axis=1, descending=True, stable=True),
    (i32 % 4).astype(np.float32),
)
probe("top_k", lambda a: lax.top_k(a, 4), x)
probe(
    "random_normal",
    lambda k: jax.random.normal(jax.random.wrap_key_data(k), (5, 7)),
    np.array([0, 42], np.uint32),
)
probe(
    "random_categorical",
    lambda k, l: jax.random.categorical(jax.random.wrap_key_data(k), l, axis=-1),
    np.array([0, 42], np.uint32),
    x,
)
probe(
    "random_bernoulli",
    lambda k: jax.random.bernoulli(jax.random.wrap_key_data(k), 0.3, (9, 5)),
    np.array([1, 2], np.uint32),
)
probe(
    "random_permutation",
    lambda k: jax.random.permutation(jax.random.wrap_key_data(k), 20),
    np.array([3, 4], np.uint32),
)
probe(
    "random_randint",
    lambda k: jax.random.randint(jax.random.wrap_key_data(k), (9,), -5, 1000),
    np.array([3, 4], np.uint32),
)
probe(
    "random_uniform_bf16",
    lambda k: jax.random.uniform(jax.random.wrap_key_data(k), (9,), jnp.bfloat16),
    np.array([3, 4], np.uint32),
)
probe(
    "random_gamma",
    lambda k: jax.random.gamma(jax.random.wrap_key_data(k), 2.5, (9,)),
    np.array([3, 4], np.uint32),
    rtol=1e-4,
)
probe(
    "u32_shift_rotate",
    lambda a, b: ((a << (b % 32)) | (a >> (32 - b % 32)), a >> b, lax.shift_right_arithmetic(a, b)),
    u32,
    u32 % 40,
)
probe(
    "u8_arith",
    lambda a, b: (a + b, a * b, a // (b | 1), a % (b | 1), a > b, jnp.maximum(a, b)),
    u8,
    u8[::-1].copy(),
)
probe("u8_to_f32_and_back", lambda a: ((a.astype(jnp.float32) * 1.7).astype(jnp.uint8), a.astype(jnp.int8)), u8)
probe("f32_to_int_sat", lambda a: (a.astype(jnp.int32), a.astype(jnp.uint8), a.astype(jnp.int8)), S * 1e3)
probe("bf16_ops", lambda a: (a.astype(jnp.bfloat16) * 3).astype(jnp.float32), S)
probe("f16_special", lambda a: (a.astype(jnp.float16) + 1).astype(jnp.float32), S)
probe("f8_e4m3", lambda a: a.astype(jnp.float8_e4m3fn).astype(jnp.float32), S)
probe("f8_e5m2", lambda a: a.astype(jnp.float8_e5m2).astype(jnp.float32), S)
probe("int4", lambda a: (a.astype(jnp.int4)).astype(jnp.int32), i32 % 8)
probe("nan_to_num", jnp.nan_to_num, S)
probe("clip_nan", lambda a: jnp.clip(a, -1, 1), S)
probe("maximum_nan", jnp.maximum, S, S[::-1].copy())
probe("min_reduce_nan", lambda a: (jnp.min(a), jnp.max(a), jnp.argmax(a), jnp.argmin(a)), S)
probe("var_std", lambda a: (jnp.var(a, axis=1, ddof=1), jnp.std(a, axis=0)), x)
probe(
    "norm_ord",
    lambda a: (jnp.linalg.norm(a, ord=jnp.inf), jnp.linalg.norm(a, axis=1, ord=1), jnp.linalg.norm(a, "fro")),
    x,
)
probe(
    "einsum_chain",
    lambda a, b, c: jnp.einsum("ij,jk,kl->il", a, b, c),
    normal(5, 7),
    normal(7, 3),
    normal(3, 9),
)
probe("einsum_trace_diag", lambda a: (jnp.einsum("ii->", a), jnp.einsum("ii->i", a)), normal(7, 7))
probe("matrix_power", lambda a: jnp.linalg.matrix_power(a, 5), normal(4, 4) * 0.5)
probe(
    "triangular_solve",
    lambda a, b: jax.scipy.linalg.solve_triangular(a, b, lower=True),
    np.tril(normal(5, 5)) + 5 * np.eye(5, dtype=np.float32),
    normal(5, 3),
    rtol=1e-4,
)
probe("linalg_inv", jnp.linalg.inv, normal(5, 5) + 5 * np.eye(5, dtype=np.float32), rtol=1e-4)
probe("linalg_det", jnp.linalg.det, normal(5, 5), rtol=1e-4)
probe("linalg_solve", jnp.linalg.solve, normal(5, 5) + 5 * np.eye(5, dtype=np.float32), normal(5, 2), rtol=1e-4)
probe("qr", lambda a: jnp.linalg.qr(a)[1], normal(5, 4), rtol=1e-4)
probe("svd_vals", lambda a: jnp.linalg.svd(a, compute_uv=False), normal(5, 4), rtol=1e-4)
probe("eigh_vals", lambda a: jnp.linalg.eigvalsh(a + a.T), normal(5, 5), rtol=1e-4)
probe("erf_inv_special", lax.erf_inv, np.array([-1, 1, 0, -0.0, 0.5, -0.999, 2, np.nan], np.float32))
probe("lgamma_special", lax.lgamma, S)
probe("digamma_special", lax.digamma, S, rtol=1e-4)
probe(
    "igamma",
    lambda a, b: jax.scipy.special.gammainc(a, b),
    np.abs(normal(9)) + 0.5,
    np.abs(normal(9)),
    rtol=1e-4,
)
probe(
    "betainc",
    lambda a, b, c: jax.scipy.special.betainc(a, b, c),
    np.abs(normal(9)) + 0.5,
    np.abs(normal(9)) + 0.5,
    np.random.default_rng(0).uniform(size=9).astype(np.float32),
    rtol=1e-4,
)
probe("bessel_i0e", jax.scipy.special.i0e, S, rtol=1e-4)
probe("xlogy", jax.scipy.special.xlogy, S, S[::-1].copy())
probe(
    "logit_expit",
    lambda a: (jax.scipy.special.logit(jax.nn.sigmoid(a)), jax.scipy.special.expit(a)),
    S,
    rtol=1e-4,
)
probe(
    "zero_size",
    lambda a: (jnp.sum(a, axis=0), a * 2, jnp.max(a, axis=1, initial=-1.0)),
    np.zeros((0, 5), np.float32),
)
probe("rank0", lambda a: a * 2 + 1, np.float32(3))
probe("bool_ops", lambda a, b: (a & b, a ^ b, ~a, jnp.sum(a), jnp.any(a), jnp.all(b)), x > 0, y > 0)
probe("int64_ops", lambda a: a * 3, i32)
x = normal(6, 10)
w = normal(10, 7) * 0.3
b = normal(7)
img = normal(2, 9, 11, 3)
k = normal(3, 3, 3, 5) * 0.3


def mlp_loss(w, b, x):
    h = jnp.tanh(x @ w + b)
    return jnp.mean(jax.nn.log_softmax(h) ** 2)


probe("grad_mlp", jax.grad(mlp_loss, argnums=(0, 1)), w, b, x, rtol=1e-4)


def conv_loss(k, img):
    y = lax.conv_general_dilated(
        img, k, (2, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), rhs_dilation=(1, 2)
    )
    y = jax.nn.relu(y)
    y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    return jnp.sum(y**2)


probe("grad_conv_pool", jax.grad(conv_loss), k, img, rtol=1e-4)


def bn_train(x, g, bb):
    m = x.mean(axis=(0, 1, 2))
    v = x.var(axis=(0, 1, 2))
    return g * (x - m) / jnp.sqrt(v + 1e-5) + bb


probe(
    "batchnorm_train_grad",
    jax.grad(lambda x, g, bb: jnp.sum(bn_train(x, g, bb) ** 3), argnums=(0, 1, 2)),
    img,
    normal(3),
    normal(3),
    rtol=1e-3,
    atol=1e-4,
)


def attn(q, kk, v, mask):
    s = jnp.einsum("bqhd,bkhd->bhqk", q, kk) / 4.0
    s = jnp.where(mask, s, -1e9)
    return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), v)


q = normal(2, 5, 3, 16)
kk = normal(2, 7, 3, 16)
v = normal(2, 7, 3, 16)
mask = np.tril(np.ones((5, 7), bool))[None, None]
probe("attention_masked", attn, q, kk, v, mask)
probe(
    "grad_attention",
    jax.grad(lambda q, kk, v: jnp.sum(attn(q, kk, v, mask) ** 2), argnums=(0, 1, 2)),
    q,
    kk,
    v,
    rtol=1e-4,
    atol=1e-5,
)


def rnn(xs, h0, wx, wh):
    def step(h, xt):
        h = jnp.tanh(xt @ wx + h @ wh)
        return h, h

    return lax.scan(step, h0, xs)


probe("scan_rnn", rnn, normal(9, 4, 6), normal(4, 8), normal(6, 8) * 0.3, normal(8, 8) * 0.3, rtol=1e-4)
probe(
    "grad_scan_rnn",
    jax.grad(lambda wx, wh, xs, h0: jnp.sum(rnn(xs, h0, wx, wh)[1] ** 2), argnums=(0, 1)),
    normal(6, 8) * 0.3,
    normal(8, 8) * 0.3,
    normal(9, 4, 6),
    normal(4, 8),
    rtol=1e-4,
)
probe("vmap_scan", jax.vmap(lambda s: lax.scan(lambda c, t: (c * 0.5 + t, c), 0.0, s)), normal(5, 11))
probe(
    "vmap_while",
    jax.vmap(lambda a: lax.while_loop(lambda c: c[1] < 10.0, lambda c: (c[0] + 1, c[1] * 2 + 0.1), (0, a))),
    np.abs(normal(7)) + 0.01,
)
probe("jacfwd", jax.jacfwd(lambda a: jnp.sin(a) * a[::-1]), normal(6))
probe("hessian", jax.hessian(lambda a: jnp.sum(jnp.exp(a) * a[0])), normal(4), rtol=1e-4)
probe(
    "custom_vjp_like_logsumexp_grad", jax.grad(lambda a: jax.nn.logsumexp(a)), SPECIAL[[0, 2, 3, 4, 5, 13, 15]]
)
probe(
    "segment_sum",
    lambda d, s: jax.ops.segment_sum(d, s, num_segments=5),
    normal(20, 3),
    R.integers(0, 5, 20).astype(np.int32),
)
probe(
    "segment_max",
    lambda d, s: jax.ops.segment_max(d, s, num_segments=6),
    normal(20, 3),
    R.integers(0, 5, 20).astype(np.int32),
)
probe(
    "dynamic_update_slice_loop",
    lambda a: lax.fori_loop(
        0, 5, lambda i, c: lax.dynamic_update_slice(c, jnp.full((2, 3), i, c.dtype), (i, i)), a
    ),
    np.zeros((8, 9), np.float32),
)
probe("gather_clip_negative", lambda a, i: a[i], normal(10, 4), np.array([-1, 3, 12, -20], np.int32))
probe(
    "take_fill",
    lambda a, i: jnp.take(a, i, axis=0, mode="fill", fill_value=-7.0),
    normal(10, 4),
    np.array([-1, 3, 12, -20], np.int32),
)
probe(
    "scatter_drop_oob",
    lambda a, i: a.at[i].set(9.0, mode="drop"),
    normal(10),
    np.array([-1, 3, 12, -20, 9], np.int32),
)
probe(
    "argmax_ties_nan",
    lambda a: (jnp.argmax(a, axis=1), jnp.argmin(a, axis=1)),
    np.array([[1, np.nan, 3, np.nan], [2, 2, 1, 2], [-np.inf, -np.inf, -np.inf, -np.inf]], np.float32),
)
probe(
    "sort_nan_negzero",
    lambda a: jnp.sort(a),
    np.array([3, np.nan, -0.0, 0.0, -np.inf, np.inf, -0.0, 1, -np.nan], np.float32),
)
probe("cumsum_int_overflow", lambda a: jnp.cumsum(a), np.full(10, 2**30, np.int32))
probe("mean_int", lambda a: jnp.mean(a, axis=0), R.integers(-5, 5, (7, 3)).astype(np.int32))
probe("pad_negative", lambda a: lax.pad(a, 0.0, ((-1, 2, 1), (2, -3, 0))), normal(5, 8))
probe(
    "rev_conv",
    lambda a, kk: lax.conv_general_dilated(
        a, kk, (1,), [(2, 2)], lhs_dilation=(2,), dimension_numbers=("NWC", "WIO", "NWC")
    ),
    normal(2, 9, 3),
    normal(4, 3, 5),
)
probe(
    "depthwise_conv",
    lambda a, kk: lax.conv_general_dilated(
        a, kk, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=3
    ),
    img,
    normal(3, 3, 1, 6),
)
probe(
    "conv_batch_groups",
    lambda a, kk: lax.conv_general_dilated(
        a, kk, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"), batch_group_count=2
    ),
    img,
    normal(3, 3, 3, 4),
)
probe(
    "conv3d",
    lambda a, kk: lax.conv_general_dilated(
        a, kk, (1, 2, 1), "SAME", dimension_numbers=("NDHWC", "DHWIO", "NDHWC")
    ),
    normal(1, 5, 6, 7, 2),
    normal(3, 2, 3, 2, 4),
)
probe(
    "dot_int8_to_int32",
    lambda a, bb: lax.dot(a, bb, preferred_element_type=jnp.int32),
    R.integers(-128, 127, (5, 9)).astype(np.int8),
    R.integers(-128, 127, (9, 4)).astype(np.int8),
)
probe(
    "dot_bf16_f32acc",
    lambda a, bb: lax.dot(a.astype(jnp.bfloat16), bb.astype(jnp.bfloat16), preferred_element_type=jnp.float32),
    normal(5, 64),
    normal(64, 4),
    rtol=1e-2,
)
probe(
    "f16_matmul",
    lambda a, bb: (a.astype(jnp.float16) @ bb.astype(jnp.float16)).astype(jnp.float32),
    normal(5, 64),
    normal(64, 4),
    rtol=2e-2,
    atol=2e-2,
)
probe(
    "bool_reduce_window",
    lambda a: lax.reduce_window(a, False, lax.bitwise_or, (2, 2), (1, 1), "VALID"),
    x > 0.5,
)
probe("iota_2d_and_eye", lambda: (lax.broadcasted_iota(jnp.int32, (3, 4), 1), jnp.eye(4, 5, k=1)))
probe("expand_dims_squeeze", lambda a: jnp.squeeze(jnp.expand_dims(a, (0, 3)), 0), x)
probe("split_concat", lambda a: jnp.concatenate(jnp.split(a, [2, 7], axis=1)[::-1], axis=1), x)
probe("roll", lambda a: jnp.roll(a, (2, -3), (0, 1)), x)
probe("rot90_flip", lambda a: (jnp.rot90(a), jnp.flip(a, 0)), x)
probe("meshgrid", lambda a, bb: jnp.meshgrid(a, bb), normal(3), normal(4))
probe("outer_cross", lambda a, bb: (jnp.outer(a, bb), jnp.cross(a, bb)), normal(3), normal(3))
probe("clamp_int", lambda a: jnp.clip(a, -3, 4), R.integers(-9, 9, (5, 5)).astype(np.int32))
probe("where_scalar_bcast", lambda a: jnp.where(a > 0, a, 0.0), x)
probe(
    "softmax_neg_inf_row",
    lambda a: jax.nn.softmax(a, axis=-1),
    np.array([[-np.inf, -np.inf], [0, -np.inf], [np.inf, 0]], np.float32),
)
probe(
    "erf_family",
    lambda a: (lax.erf(a), lax.erfc(a), jax.scipy.special.ndtr(a), jax.scipy.special.ndtri(jax.nn.sigmoid(a))),
    SPECIAL[[0, 2, 3, 4, 5, 6, 7, 8, 13, 15]],
    rtol=1e-4,
    atol=1e-6,
)
probe(
    "trig_big",
    lambda a: (jnp.sin(a), jnp.cos(a), jnp.tan(a)),
    np.array([1e4, 1e6, 3e7, -2e5, 1e-3, 0.0, -0.0], np.float32),
    rtol=1e-4,
    atol=1e-5,
)
probe("pow_special", jnp.power, SPECIAL, SPECIAL[::-1].copy())
probe(
    "exp_log_special",
    lambda a: (jnp.exp(a), jnp.log(a), jnp.sqrt(a), lax.rsqrt(a), jnp.tanh(a), jax.nn.sigmoid(a)),
    SPECIAL,
)
report()
