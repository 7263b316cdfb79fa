"""--iree-llvmcpu-reassociate-fp-reductions=false: float reductions on llvm-cpu fold strictly
in loop order (no split, no vector lanes, no cascade), so a sum equals a sequential float32
loop bit for bit; the default (true) still splits and vectorizes, and both agree with numpy
within rounding."""

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import compile_str

N = 4099


@pytest.fixture
def rng():
    return np.random.default_rng(0)

SUM = f"""
func.func @total(%x: tensor<3x{N}xf32>) -> tensor<3xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3xf32>
  %init = linalg.fill ins(%z : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %r = linalg.reduce ins(%x : tensor<3x{N}xf32>) outs(%init : tensor<3xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {{
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }}
  return %r : tensor<3xf32>
}}
func.func @mm(%a: tensor<16x300xf32>, %b: tensor<300x24xf32>) -> tensor<16x24xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x24xf32>
  %init = linalg.fill ins(%z : f32) outs(%e : tensor<16x24xf32>) -> tensor<16x24xf32>
  %r = linalg.matmul ins(%a, %b : tensor<16x300xf32>, tensor<300x24xf32>)
                     outs(%init : tensor<16x24xf32>) -> tensor<16x24xf32>
  return %r : tensor<16x24xf32>
}}
"""


def _adversarial(rng) -> np.ndarray:
    """Values whose float32 sum depends on the order: large terms cancelling small ones."""
    x = rng.standard_normal((3, N)).astype(np.float32)
    x[:, ::7] *= np.float32(1.0e7)
    return x


def _sequential(row: np.ndarray) -> np.float32:
    acc = np.float32(0.0)
    for v in row:
        acc = np.float32(acc + v)
    return acc


def _load(*flags: str):
    return rt.load_module(compile_str(SUM, target_backends=["llvm-cpu"], extra_args=list(flags)),
                          device="local-task")


def test_strict_sum_folds_in_order(rng):
    x = _adversarial(rng)
    strict = _load("--iree-llvmcpu-reassociate-fp-reductions=false")
    got = np.asarray(strict.total(x))
    want = np.array([_sequential(r) for r in x], dtype=np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    # the default reassociates: on these values its bits differ (the flag is not a no-op)
    assert not np.array_equal(np.asarray(_load().total(x)), want)


def test_strict_and_default_matmul_agree_with_numpy(rng):
    a = rng.standard_normal((16, 300)).astype(np.float32)
    b = rng.standard_normal((300, 24)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    for flags in ((), ("--iree-llvmcpu-reassociate-fp-reductions=false",),
                  ("--pyree-llvmcpu-reassociate-fp-reductions=true",)):
        got = np.asarray(_load(*flags).mm(a, b))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_default_sum_is_close(rng):
    x = rng.standard_normal((3, N)).astype(np.float32)
    got = np.asarray(_load().total(x))
    np.testing.assert_allclose(got, x.astype(np.float64).sum(1), rtol=1e-4, atol=1e-3)
