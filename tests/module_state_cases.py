"""Issue 29's input forms on a GPU device (tests/vulkan on lavapipe in CI, tests/cuda on the GPU
host): mutable globals keep their state in the loaded module's own device buffer between calls,
a loop of blocks (cf.br / cf.cond_br) branches on values a kernel wrote, and a failed cf.assert
raises its message; against numpy."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest

MLIR = """
util.global private mutable @total = dense<[0.5, -1.0, 2.0]> : tensor<3xf32>
func.func @accumulate(%x: tensor<3xf32>) -> tensor<3xf32> {
  %t = util.global.load @total : tensor<3xf32>
  %t2 = arith.addf %t, %x : tensor<3xf32>
  util.global.store %t2, @total : tensor<3xf32>
  return %t2 : tensor<3xf32>
}

func.func @halve_until(%x: tensor<4xf32>, %limit: tensor<f32>) -> tensor<4xf32> {
  %two = arith.constant dense<2.0> : tensor<4xf32>
  cf.br ^head(%x : tensor<4xf32>)
^head(%a: tensor<4xf32>):
  %c0 = arith.constant 0 : index
  %first = tensor.extract %a[%c0] : tensor<4xf32>
  %lim = tensor.extract %limit[] : tensor<f32>
  %more = arith.cmpf ogt, %first, %lim : f32
  cf.cond_br %more, ^body, ^done
^body:
  %h = arith.divf %a, %two : tensor<4xf32>
  cf.br ^head(%h : tensor<4xf32>)
^done:
  %zero = arith.constant 0.0 : f32
  %ok = arith.cmpf ogt, %first, %zero : f32
  cf.assert %ok, "the first element must be positive"
  return %a : tensor<4xf32>
}
"""



def check_module_state(module: rt.LoadedModule) -> None:
    rng = np.random.default_rng(29)
    total = np.array([0.5, -1.0, 2.0], np.float32)
    for _ in range(3):
        x = rng.standard_normal(3).astype(np.float32)
        total = total + x
        np.testing.assert_allclose(np.asarray(module.accumulate(x)), total, rtol=1e-6)
    x = np.array([40.0, 3.0, -1.0, 7.5], np.float32)
    want = x.copy()
    while want[0] > 4.0:
        want = want / 2
    np.testing.assert_array_equal(np.asarray(module.halve_until(x, np.array(4.0, np.float32))),
                                  want)
    with pytest.raises(rt.CheckError, match="the first element must be positive"):
        module.halve_until(np.array([-1.0, 0, 0, 0], np.float32), np.array(4.0, np.float32))
