"""StableHLO's dynamic ops as written by hand (not by JAX), through the public API on
local-task, against numpy at sizes 0, 1, a prime and large: ``get_dimension_size``, size
arithmetic, shape tensors (``reshape``, ``concatenate``), ``dynamic_reshape``,
``real_dynamic_slice``, ``dynamic_iota`` and ``dynamic_broadcast_in_dim``."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str

TEXT = """
func.func @main(%x: tensor<?x6xf32>, %v: tensor<3xf32>) -> (tensor<?x3xf32>, tensor<?x2xf32>, tensor<?xi32>, tensor<?x3xf32>) {
  %n = stablehlo.get_dimension_size %x, dim = 0 : (tensor<?x6xf32>) -> tensor<i32>
  %c2 = stablehlo.constant dense<2> : tensor<i32>
  %m = stablehlo.multiply %n, %c2 : tensor<i32>
  %m1 = stablehlo.reshape %m : (tensor<i32>) -> tensor<1xi32>
  %c3 = stablehlo.constant dense<3> : tensor<1xi32>
  %s = stablehlo.concatenate %m1, %c3, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  %r = stablehlo.dynamic_reshape %x, %s : (tensor<?x6xf32>, tensor<2xi32>) -> tensor<?x3xf32>
  %start = stablehlo.constant dense<[0, 1]> : tensor<2xi32>
  %step = stablehlo.constant dense<1> : tensor<2xi32>
  %sl = stablehlo.real_dynamic_slice %r, %start, %s, %step : (tensor<?x3xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<?x2xf32>
  %io = stablehlo.dynamic_iota %m1, dim = 0 : (tensor<1xi32>) -> tensor<?xi32>
  %b = stablehlo.dynamic_broadcast_in_dim %v, %s, dims = [1] : (tensor<3xf32>, tensor<2xi32>) -> tensor<?x3xf32>
  %sum = stablehlo.add %r, %b : tensor<?x3xf32>
  return %r, %sl, %io, %sum : tensor<?x3xf32>, tensor<?x2xf32>, tensor<?xi32>, tensor<?x3xf32>
}
"""


@pytest.fixture(scope="module")
def module():
    vmfb = compile_str(TEXT, CompileOptions(target_backends=["llvm-cpu"]))
    return rt.load_module(vmfb, device="local-task")


@pytest.mark.parametrize("n", [0, 1, 7, 1031])
def test_dynamic_ops_against_numpy(module, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 6)).astype(np.float32)
    v = np.array([np.inf, -0.0, 2.5], np.float32)
    r, sl, io, total = (np.asarray(o.to_host()) for o in module["main"](x, v))
    np.testing.assert_array_equal(r, x.reshape(2 * n, 3))
    np.testing.assert_array_equal(sl, x.reshape(2 * n, 3)[:, 1:])
    np.testing.assert_array_equal(io, np.arange(2 * n, dtype=np.int32))
    np.testing.assert_array_equal(total, x.reshape(2 * n, 3) + v)
