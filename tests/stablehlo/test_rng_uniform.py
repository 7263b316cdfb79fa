"""stablehlo.rng as IREE computes it: UNIFORM (a hash of each element's indices) against the same
formula in numpy; NORMAL (Box-Muller over ``std::mt19937`` seeded 0, drawn at compile time)
against the numbers IREE's own e2e test expects, and its moments at a large size; another
distribution refused by name."""

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, compile_str

RNG = """
func.func @u(%lo: tensor<f32>, %hi: tensor<f32>) -> tensor<3x5x2xf32> {
  %shape = stablehlo.constant dense<[3, 5, 2]> : tensor<3xi64>
  %r = "stablehlo.rng"(%lo, %hi, %shape) {rng_distribution = #stablehlo<rng_distribution UNIFORM>} : (tensor<f32>, tensor<f32>, tensor<3xi64>) -> tensor<3x5x2xf32>
  return %r : tensor<3x5x2xf32>
}
"""


def iree_uniform(shape, lo, hi):
    out = np.empty(shape, np.float32)
    for index in np.ndindex(*shape):
        h = 0
        for i in index:
            h = ((i + h) * 1103515245 + 12345) & 0xFFFFFFFF
        out[index] = np.float32(h) * ((np.float32(hi) - np.float32(lo)) *
                                      np.float32(2.3283064e-10)) + np.float32(lo)
    return out


def test_rng_uniform_is_iree_s_index_hash():
    module = rt.load_module(compile_str(RNG, input_type="stablehlo"), device="local-task")
    got = np.asarray(module.u(np.array(-3.0, np.float32), np.array(7.5, np.float32)))
    np.testing.assert_allclose(got, iree_uniform((3, 5, 2), -3.0, 7.5), rtol=1e-6, atol=1e-6)
    assert ((got >= -3.0) & (got <= 7.5)).all()


def normal_module(shape: str):
    rank = f"tensor<{shape.count('x') + 1}xi64>"
    text = RNG.replace("UNIFORM", "NORMAL").replace("3x5x2", shape).replace(
        "dense<[3, 5, 2]>", f"dense<[{shape.replace('x', ', ')}]>").replace(
        "tensor<3xi64>", rank)
    return rt.load_module(compile_str(text, input_type="stablehlo"), device="local-task")


def test_rng_normal_gives_iree_s_numbers():
    """IREE's tests/e2e/stablehlo_ops/rng_normal.mlir: mu 0, sigma 1, shape 3x5."""
    got = np.asarray(normal_module("3x5").u(np.array(0.0, np.float32), np.array(1.0, np.float32)))
    iree = [[0.570861, 0.317593, -0.726538, 1.45925, -1.59632],
            [-0.639956, 0.703875, -0.8801, -0.848389, -0.453391],
            [0.645563, 0.543174, 0.2255, 0.0809385, -1.17198]]
    np.testing.assert_allclose(got, iree, atol=1e-5)


@pytest.mark.parametrize("n", [0, 1, 7, 40001])
def test_rng_normal_scales_and_shifts_at_any_size(n):
    mu, sigma = np.float32(-2.5), np.float32(3.0)
    module = normal_module(f"{n}x1")
    got = np.asarray(module.u(np.array(mu), np.array(sigma)))
    unit = np.asarray(module.u(np.array(0.0, np.float32), np.array(1.0, np.float32)))
    assert got.shape == (n, 1)
    np.testing.assert_allclose(got, sigma * unit + mu, rtol=1e-5, atol=1e-5)
    if n > 10000:  # a standard normal sample's moments
        assert abs(unit.mean()) < 0.03 and abs(unit.std() - 1) < 0.03


def test_another_rng_distribution_is_refused_by_name():
    text = RNG.replace("UNIFORM", "TRIANGULAR")
    with pytest.raises(CompileError, match="TRIANGULAR is not supported"):
        compile_str(text, input_type="stablehlo")
