"""Complex values as JAX programs use them, against JAX: magnitude spectra (``jnp.abs`` of an
rfft: refused before), transforms over several dimensions (``fft2``, ``fftn``, ``rfft2``),
complex arithmetic, constants (``1j * x``), conversions, and the ops that move complex
elements (slices, reversal, transposes, pads, concatenation, select). On local-task, and on
Vulkan (lavapipe in CI) and cuda under their markers."""

from __future__ import annotations

import numpy as np
import pytest
from jax_runs import DEVICES, run_both
from tooling import require_module

jax = require_module("jax")
jnp = jax.numpy
jax.config.update("jax_platforms", "cpu")

RNG = np.random.default_rng(21)
X, Y = (RNG.standard_normal((7, 13)).astype(np.float32) for _ in range(2))
V = RNG.standard_normal((3, 5, 6, 8)).astype(np.float32)

CASES = {
    "magnitude_spectrum": (lambda a: jnp.abs(jnp.fft.rfft(a, axis=1)), (X,)),
    "rfft_then_irfft": (lambda a: jnp.fft.irfft(jnp.fft.rfft(a, axis=1), n=13, axis=1), (X,)),
    "fft2": (lambda a: jnp.abs(jnp.fft.fft2(a)), (X,)),
    "fftn_over_three_dims": (lambda a: jnp.abs(jnp.fft.fftn(a, axes=(1, 2, 3))), (V,)),
    "rfft2_then_irfft2": (lambda a: jnp.fft.irfft2(jnp.fft.rfft2(a), s=(6, 8)), (V,)),
    "fft_along_an_outer_axis": (lambda a: jnp.real(jnp.fft.fft(a, axis=0))
                                + jnp.imag(jnp.fft.ifft(a, axis=0)), (X,)),
    "arithmetic": (lambda a, b: (jnp.abs(jnp.fft.rfft(a) * jnp.fft.rfft(b)),
                                 jnp.real(jnp.fft.rfft(a) / (jnp.fft.rfft(b) + 1)),
                                 jnp.imag(jnp.conj(jnp.fft.rfft(a)) - jnp.fft.rfft(b)),
                                 jnp.angle(jnp.fft.rfft(a))), (X, Y)),
    "moved_elements": (lambda a: jnp.abs(jnp.concatenate(
        [jnp.fft.rfft(a)[:, ::-1], jnp.fft.rfft(a)[2:5].T.reshape(7, 3).T], 0)), (X,)),
    "select_and_pad": (lambda a: jnp.abs(jnp.pad(jnp.where(a[:, :7] > 0, jnp.fft.rfft(a), 0),
                                                 ((1, 1), (0, 2)))), (X,)),
    "power_spectrum_of_windowed_frames": (
        lambda a: jnp.abs(jnp.fft.rfft(a.reshape(4, 8, 16) * jnp.hanning(16), axis=-1)) ** 2,
        (RNG.standard_normal(512).astype(np.float32),)),
    "a_complex_constant": (lambda a: jnp.real(jnp.fft.ifft(jnp.fft.fft(a) * jnp.exp(1j * a))),
                           (X,)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(CASES))
def test_matches_jax(name, device):
    f, args = CASES[name]
    got, want = run_both(jax, device, f, *args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-4)
