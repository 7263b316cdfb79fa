"""Conversions whose answers the StableHLO spec leaves to the implementation, as JAX (XLA)
gives them: a float past an integer's range converts to that range's bound and NaN to 0
(x86's conversion gave INT_MIN for 3e38, and uint8 wrapped: 433.5 -> 177), and
``reduce_precision`` rounds to a narrower format on the bits. Compiled for each driver (Vulkan
on lavapipe in CI; PYREE_VULKAN_TARGET names a GPU's target), against JAX on the CPU."""

from __future__ import annotations

import jax_runs
import numpy as np
import pyree.runtime as rt
import pytest
from jax_runs import DEVICES
from pyree.compiler import compile_str
from pyree.compiler.options import CompileOptions
from tooling import require_module

jax = require_module("jax")
jnp, lax = jax.numpy, jax.lax
jax.config.update("jax_platforms", "cpu")

# Every bound of every integer width, each side of it, and the special values; no subnormals
# (XLA's CPU flushes them to zero, numpy and pyree keep them).
EDGES = np.array([0.0, -0.0, 0.5, -0.5, -0.9, -1.0, -1.5, 1.7, np.inf, -np.inf, np.nan, 3e38, -3e38,
                  127.9, 128.0, -128.9, -129.0, 255.9, 256.0, 32767.5, 32768.0, -32769.0, 65535.9,
                  65536.0, 65504.0, -65504.0, 2.0 ** 31, -(2.0 ** 31), 2.0 ** 31 - 128, -(2.0 ** 31) - 256,
                  2.0 ** 32, 4e9, 9.3e18, -9.3e18, 2.0 ** 63, 1.8e19, 2.0 ** 64], np.float32)
INTEGERS = [jnp.int8, jnp.uint8, jnp.int16, jnp.uint16, jnp.int32, jnp.uint32, jnp.int64,
            jnp.uint64]


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


def run_both(device, f, *args, **options):
    return jax_runs.run_both(jax, device, f, *args, **options)


@pytest.mark.parametrize("source", [jnp.float32, jnp.float16, jnp.bfloat16])
def test_floats_past_an_integer_range_convert_to_its_bound(source, device):
    def f(a):
        x = a.astype(source)
        return tuple(x.astype(t) for t in INTEGERS)

    with jax.enable_x64(True):  # (and pyree not demoting i64, as it does StableHLO's by default)
        got, want = run_both(device, f, EDGES, demote_i64_to_i32=False)
    for g, w, t in zip(got, want, INTEGERS):
        assert g.dtype == w.dtype, t
        np.testing.assert_array_equal(g, w, err_msg=f"{np.dtype(source).name} -> {w.dtype}")


FORMATS = [(5, 10), (8, 7), (4, 3), (5, 2), (2, 1), (3, 0), (6, 20), (8, 23)]


@pytest.mark.parametrize("exponent_bits,mantissa_bits", FORMATS)
def test_reduce_precision_of_f32_matches_xla(exponent_bits, mantissa_bits, device):
    rng = np.random.default_rng(5)
    x = np.concatenate([EDGES, (rng.standard_normal(61) * 100).astype(np.float32),
                        (rng.standard_normal(13) * 1e-20).astype(np.float32),
                        np.array([1.0009765, 1.0029296, 0.09997559, -65519.0, 65520.0], np.float32)])
    got, want = run_both(device, lambda a: lax.reduce_precision(a, exponent_bits, mantissa_bits),
                         x)
    # bit for bit: the sign of a zero and the NaN's payload included
    np.testing.assert_array_equal(got[0].view(np.uint32), want[0].view(np.uint32))


@pytest.mark.parametrize("source", [jnp.float16, jnp.bfloat16])
def test_reduce_precision_of_16_bit_floats(source, device):
    x = np.concatenate([EDGES[np.abs(EDGES) < 6e4], np.random.default_rng(6).standard_normal(40)
                        .astype(np.float32) * 10])
    got, want = run_both(device, lambda a: lax.reduce_precision(a.astype(source), 4, 3)
                         .astype(jnp.float32), x)
    np.testing.assert_array_equal(got[0].view(np.uint32), want[0].view(np.uint32))


def test_reduce_precision_in_generic_form():
    text = """func.func @main(%a: tensor<6xf32>) -> tensor<6xf32> {
  %r = "stablehlo.reduce_precision"(%a) {exponent_bits = 5 : i32, mantissa_bits = 10 : i32}
      : (tensor<6xf32>) -> tensor<6xf32>
  return %r : tensor<6xf32>
}"""
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    x = np.array([1.0 / 3, 70000.0, -70000.0, 1e-6, np.nan, -0.0], np.float32)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    want[3] = 0.0  # below f16's normal range: XLA's reduce_precision keeps no subnormals
    np.testing.assert_array_equal(np.asarray(module["main"](x)).view(np.uint32),
                                  want.view(np.uint32))


HALF_EDGES = np.array([3e38, -3e38, 70000.0, 65504.0, 65519.0, 65519.99, 65520.0, -65520.0, 1.0,
                       1e-5, 3e-8, 2.9e-8, 6e-8, 1e-9, -0.0, np.nan, np.inf, 2049.0, 2051.0],
                      np.float32)


@pytest.mark.parametrize("f", [
    lambda a: a.astype(jnp.float16).astype(jnp.float32),
    lambda a: (a.astype(jnp.float16) + 1).astype(jnp.float32),
    lambda a: (a.astype(jnp.float16) * a.astype(jnp.float16)).astype(jnp.float32),
], ids=["round_trip", "add_then_widen", "square_then_widen"])
def test_half_precision_values_are_rounded_where_the_program_widens_them(f, device):
    """Bit for bit as JAX: a value of f16 type is an f16 value, also when the program widens it
    right after arithmetic (the narrow-float widening carried 65504 + 1 on as 65505, and 3e38
    as 3e38 instead of inf), on a Vulkan target without 16-bit float arithmetic, which
    computes f16 in f32 (lavapipe's kept 70000 as 70000), and on NVIDIA's Vulkan driver, which
    folded the two conversions to nothing."""
    rng = np.random.default_rng(8)
    x = np.concatenate([HALF_EDGES, (rng.standard_normal(300) * 100).astype(np.float32),
                        (rng.standard_normal(300) * 1e-5).astype(np.float32)])
    got, want = run_both(device, f, x)
    nan = np.isnan(want[0])  # (CUDA's f16 NaN widens to 0x7FFFFFFF, XLA's CPU to 0x7FC00000)
    np.testing.assert_array_equal(np.isnan(got[0]), nan)
    np.testing.assert_array_equal(got[0][~nan].view(np.uint32), want[0][~nan].view(np.uint32))
