"""tensor.extract_slice / insert_slice at offsets computed in the program (a loop's counter, a
value read from a tensor), not sizes: what torch-mlir writes for ONNX's LSTM, GRU and RNN (one
time step sliced per trip of an scf.for) and Split. The kernels read the offset and gather
(clamped into range, as MLIR leaves a slice out of range undefined). Against numpy on
local-task, lavapipe and, under their markers, cuda and NVIDIA's Vulkan."""

from __future__ import annotations

import numpy as np
import pytest
from jax_runs import DEVICES, module_for

LOOP = """
func.func @f(%x: tensor<7x3x5xf32>) -> tensor<7x3x5xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %e = tensor.empty() : tensor<7x3x5xf32>
  %r = scf.for %t = %c0 to %c7 step %c1 iter_args(%acc = %e) -> (tensor<7x3x5xf32>) {
    %back = arith.subi %c6, %t : index
    %row = tensor.extract_slice %x[%back, 0, 0] [1, 3, 5] [1, 1, 1] : tensor<7x3x5xf32> to tensor<3x5xf32>
    %two = arith.addf %row, %row : tensor<3x5xf32>
    %next = tensor.insert_slice %two into %acc[%t, 0, 0] [1, 3, 5] [1, 1, 1] : tensor<3x5xf32> into tensor<7x3x5xf32>
    scf.yield %next : tensor<7x3x5xf32>
  }
  return %r : tensor<7x3x5xf32>
}"""

FROM_DATA = """
func.func @f(%x: tensor<10x4xi32>, %at: tensor<2xi64>) -> (tensor<3x2xi32>, tensor<10x4xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = tensor.extract %at[%c0] : tensor<2xi64>
  %b = tensor.extract %at[%c1] : tensor<2xi64>
  %i = arith.index_cast %a : i64 to index
  %j = arith.index_cast %b : i64 to index
  %s = tensor.extract_slice %x[%i, %j] [3, 2] [2, 1] : tensor<10x4xi32> to tensor<3x2xi32>
  %z = arith.constant dense<-1> : tensor<3x2xi32>
  %w = tensor.insert_slice %z into %x[%i, %j] [3, 2] [2, 1] : tensor<3x2xi32> into tensor<10x4xi32>
  return %s, %w : tensor<3x2xi32>, tensor<10x4xi32>
}"""


@pytest.mark.parametrize("device", DEVICES)
def test_a_loop_slices_at_its_counter(device):
    x = np.random.default_rng(1).standard_normal((7, 3, 5)).astype(np.float32)
    got = np.asarray(module_for(LOOP, device)["f"](x))
    np.testing.assert_array_equal(got, 2 * x[::-1])


@pytest.mark.parametrize("device", DEVICES)
def test_offsets_read_from_a_tensor(device):
    x = np.arange(40, dtype=np.int32).reshape(10, 4)
    for i, j in ((0, 0), (3, 2), (4, 1)):
        window, written = module_for(FROM_DATA, device)["f"](x, np.array([i, j], np.int64))
        np.testing.assert_array_equal(np.asarray(window), x[i:i + 5:2, j:j + 2])
        want = x.copy()
        want[i:i + 5:2, j:j + 2] = -1
        np.testing.assert_array_equal(np.asarray(written), want)


CONSTANT_STRIDES = """
func.func @f(%x: tensor<10x4xi32>) -> (tensor<3x2xi32>, tensor<10x4xi32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %s = tensor.extract_slice %x[1, 1] [3, 2] [%c2, %c1] : tensor<10x4xi32> to tensor<3x2xi32>
  %z = arith.constant dense<-1> : tensor<3x2xi32>
  %w = tensor.insert_slice %z into %x[4, 0] [3, 2] [%c2, %c2] : tensor<3x2xi32> into tensor<10x4xi32>
  return %s, %w : tensor<3x2xi32>, tensor<10x4xi32>
}"""


@pytest.mark.parametrize("device", DEVICES)
def test_strides_given_as_constant_operands(device):
    """Strides as ``arith.constant`` operands, as torch-mlir writes a slice of an empty tensor's
    (a top-k over a batch of 0): the constants' values, as if written inline."""
    x = np.arange(40, dtype=np.int32).reshape(10, 4)
    window, written = module_for(CONSTANT_STRIDES, device)["f"](x)
    np.testing.assert_array_equal(np.asarray(window), x[1:6:2, 1:3])
    want = x.copy()
    want[4:9:2, 0:3:2] = -1
    np.testing.assert_array_equal(np.asarray(written), want)
