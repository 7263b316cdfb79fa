"""stablehlo.rng UNIFORM as IREE computes it (a hash of each element's indices), against the same
formula in numpy; NORMAL refused by name."""

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


def test_rng_normal_is_refused_by_name():
    text = RNG.replace("UNIFORM", "NORMAL")
    with pytest.raises(CompileError, match="NORMAL is not supported"):
        compile_str(text, input_type="stablehlo")
