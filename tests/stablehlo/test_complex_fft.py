"""Complex values inside a StableHLO function (complex / real / imag / sine / cosine /
exponential) and stablehlo.fft of every type, at odd and even lengths with a batch dim,
compiled and run on local-task against numpy."""

import numpy as np
import pyree.runtime as rt
import pytest
from jax_runs import DEVICES, options_for
from pyree.compiler import CompileError, compile_str


@pytest.fixture
def rng():
    return np.random.default_rng()


def fft_module(n: int) -> str:
    m = n // 2 + 1
    c = f"tensor<3x{n}xcomplex<f32>>"
    h = f"tensor<3x{m}xcomplex<f32>>"
    r, rh = f"tensor<3x{n}xf32>", f"tensor<3x{m}xf32>"
    return f"""
func.func @fft(%re: {r}, %im: {r}) -> ({r}, {r}, {r}, {r}) {{
  %z = stablehlo.complex %re, %im : ({r}, {r}) -> {c}
  %f = stablehlo.fft %z, type = FFT, length = [{n}] : ({c}) -> {c}
  %i = "stablehlo.fft"(%z) {{fft_type = #stablehlo<fft_type IFFT>, fft_length = array<i64: {n}>}} : ({c}) -> {c}
  %a = stablehlo.real %f : ({c}) -> {r}
  %b = stablehlo.imag %f : ({c}) -> {r}
  %p = stablehlo.real %i : ({c}) -> {r}
  %q = stablehlo.imag %i : ({c}) -> {r}
  return %a, %b, %p, %q : {r}, {r}, {r}, {r}
}}

func.func @rfft(%x: {r}) -> ({rh}, {rh}, {r}) {{
  %f = stablehlo.fft %x, type = RFFT, length = [{n}] : ({r}) -> {h}
  %a = stablehlo.real %f : ({h}) -> {rh}
  %b = stablehlo.imag %f : ({h}) -> {rh}
  %back = stablehlo.fft %f, type = IRFFT, length = [{n}] : ({h}) -> {r}
  return %a, %b, %back : {rh}, {rh}, {r}
}}
"""


@pytest.mark.parametrize("n", [7, 8])
def test_fft_of_every_type_matches_numpy(n, rng):
    module = rt.load_module(compile_str(fft_module(n), input_type="stablehlo"), device="local-task")
    re, im = (rng.standard_normal((3, n)).astype(np.float32) for _ in range(2))
    z = re.astype(np.float64) + 1j * im
    a, b, p, q = (np.asarray(v) for v in module.fft(re, im))
    np.testing.assert_allclose(a + 1j * b, np.fft.fft(z), atol=1e-5)
    np.testing.assert_allclose(p + 1j * q, np.fft.ifft(z), atol=1e-6)
    a, b, back = (np.asarray(v) for v in module.rfft(re))
    np.testing.assert_allclose(a + 1j * b, np.fft.rfft(re.astype(np.float64)), atol=1e-5)
    np.testing.assert_allclose(back, re, atol=1e-5)


COMPLEX = """
func.func @f(%re: tensor<5xf32>, %im: tensor<5xf32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>) {
  %z = "stablehlo.complex"(%re, %im) : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xcomplex<f32>>
  %s = "stablehlo.sine"(%z) : (tensor<5xcomplex<f32>>) -> tensor<5xcomplex<f32>>
  %c = "stablehlo.cosine"(%z) : (tensor<5xcomplex<f32>>) -> tensor<5xcomplex<f32>>
  %e = "stablehlo.exponential"(%z) : (tensor<5xcomplex<f32>>) -> tensor<5xcomplex<f32>>
  %s1 = "stablehlo.real"(%s) : (tensor<5xcomplex<f32>>) -> tensor<5xf32>
  %s2 = "stablehlo.imag"(%s) : (tensor<5xcomplex<f32>>) -> tensor<5xf32>
  %c1 = "stablehlo.real"(%c) : (tensor<5xcomplex<f32>>) -> tensor<5xf32>
  %c2 = "stablehlo.imag"(%c) : (tensor<5xcomplex<f32>>) -> tensor<5xf32>
  %e1 = "stablehlo.real"(%e) : (tensor<5xcomplex<f32>>) -> tensor<5xf32>
  %e2 = "stablehlo.imag"(%e) : (tensor<5xcomplex<f32>>) -> tensor<5xf32>
  return %s1, %s2, %c1, %c2, %e1, %e2 : tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
}
"""


def test_complex_sine_cosine_exponential_match_numpy(rng):
    module = rt.load_module(compile_str(COMPLEX, input_type="stablehlo"), device="local-task")
    re, im = (rng.uniform(-2, 2, 5).astype(np.float32) for _ in range(2))
    z = re.astype(np.float64) + 1j * im
    out = [np.asarray(v) for v in module.f(re, im)]
    for (a, b), want in zip(zip(out[::2], out[1::2]), (np.sin(z), np.cos(z), np.exp(z))):
        np.testing.assert_allclose(a + 1j * b, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_complex_divide_and_exp_match_jax_at_special_values(device):
    """Every combination of zeros, infinities, NaN, tiny and huge parts: division as XLA's
    (Smith's algorithm: (1e20 + i) / (1 + 1e20i) had come out NaN, and its C answers for zero
    and infinite operands) and exp as XLA's (e^(a/2) twice: exp(89 + i) had overflowed, and
    exp(89 + 0i) had a NaN imaginary part), on each driver. XLA flushes subnormal results to
    zero, and its fused multiply-adds leave noise of a part's ulp where the exact part is 0:
    both allowed."""
    import itertools

    from tooling import require_module
    jax = require_module("jax")
    jnp = jax.numpy
    parts = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e30, -1e-30, 1e20, 7.0,
                      89.0, 44.0], np.float32)
    grid = [np.ascontiguousarray(x) for x in np.array(list(itertools.product(parts, repeat=4)),
                                                      np.float32).T]

    def f(ar, ai, br, bi):
        q, e = jax.lax.complex(ar, ai) / jax.lax.complex(br, bi), jnp.exp(jax.lax.complex(ar, ai))
        return jnp.real(q), jnp.imag(q), jnp.real(e), jnp.imag(e)

    module = rt.load_module(compile_str(jax.jit(f).lower(*grid).as_text(), options_for(device)),
                            device=device)
    got = [np.asarray(x) for x in module.main(*grid)]
    want = [np.asarray(x) for x in jax.jit(f)(*grid)]
    for k in (0, 2):
        scale = np.abs(want[k]) + np.abs(want[k + 1])
        for g, w in zip(got[k:k + 2], want[k:k + 2]):
            tiny = (np.abs(g) < 1.18e-38) & (np.abs(w) < 1.18e-38)
            same = (np.isnan(g) & np.isnan(w)) | (g == w) | tiny | \
                (np.abs(g - w) <= 2e-6 * np.where(np.isfinite(scale), scale, 0))
            if k == 2:  # sin and cos of 1e20 are each library's own (GPUs reduce it inexactly)
                same |= np.abs(grid[1]) > 1e4
            assert same.all(), [(*(x[i] for x in grid), g[i], w[i]) for i in np.nonzero(~same)[0][:5]]


def test_a_complex_result_is_refused_by_name():
    text = """
func.func @f(%re: tensor<2xf32>) -> tensor<2xcomplex<f32>> {
  %z = "stablehlo.complex"(%re, %re) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xcomplex<f32>>
  return %z : tensor<2xcomplex<f32>>
}"""
    with pytest.raises(CompileError, match="complex"):
        compile_str(text, input_type="stablehlo")
