"""tensor ops over ``?`` dims at the edges: a concatenation whose later parts start at run-time
offsets (their loads are shifted by ``-n``, which a push constant, computed on the host as a
non-negative size, cannot carry), a ``tensor.pad`` of a run-time sized dim (torch-mlir's
padding of a convolution over a dynamic sequence or image) and a ``tensor.insert_slice`` at
run-time offsets and sizes (a transposed convolution's), each checked against numpy and
PyTorch at sizes 0, 1, primes and larger, on llvm-cpu and on vulkan-spirv under its marker."""

from __future__ import annotations

import functools
import os

import numpy as np
import pyree.runtime as rt
import pytest
import torch
import torch.nn.functional as F
from pyree.compiler import CompileOptions, compile_str, import_torch

BACKENDS = [
    pytest.param(("llvm-cpu", "local-task"), id="llvm-cpu"),
    pytest.param(("vulkan-spirv", "vulkan"), id="vulkan", marks=pytest.mark.vulkan),
]


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request) -> tuple[str, str]:
    target, device = request.param
    info = next((d for d in rt.list_drivers() if d.name == device), None)
    if info is None or not info.available:
        pytest.skip(f"no {device} device: {info.reason if info else 'driver not installed'}")
    return target, device


@functools.cache
def load(mlir: str, backend):
    target, device = backend
    options = CompileOptions(target_backends=[target],
                             vulkan_target=os.environ.get("PYREE_VULKAN_TARGET", "cpu-lavapipe-linux"))
    return rt.load_module(compile_str(mlir, options), device=device)


CONCAT_ROWS = """
func.func @f(%a: tensor<?x3xf32>, %b: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %r = tensor.concat dim(0) %a, %b, %a : (tensor<?x3xf32>, tensor<?x3xf32>, tensor<?x3xf32>) -> tensor<?x3xf32>
  return %r : tensor<?x3xf32>
}
"""

CONCAT_COLUMNS = """
func.func @f(%a: tensor<4x?xi32>, %b: tensor<4x?xi32>) -> tensor<4x?xi32> {
  %r = tensor.concat dim(1) %a, %b : (tensor<4x?xi32>, tensor<4x?xi32>) -> tensor<4x?xi32>
  return %r : tensor<4x?xi32>
}
"""


@pytest.mark.parametrize("m, n", [(0, 0), (1, 0), (0, 2), (1, 1), (7, 13), (257, 1)])
def test_concatenation_of_run_time_sized_parts(backend, m, n):
    """Part k starts at the sum of the sizes before it: each was read at ``i - that sum``, and
    the push constant ``-s0 - s1`` was refused as negative at every size but 0."""
    rng = np.random.default_rng(m * 100 + n)
    rows = load(CONCAT_ROWS, backend)
    a, b = (rng.standard_normal((k, 3)).astype(np.float32) for k in (m, n))
    np.testing.assert_array_equal(rows["f"](a, b).to_host(), np.concatenate([a, b, a], 0))
    columns = load(CONCAT_COLUMNS, backend)
    a, b = (rng.integers(-9, 9, (4, k)).astype(np.int32) for k in (m, n))
    np.testing.assert_array_equal(columns["f"](a, b).to_host(), np.concatenate([a, b], 1))


PAD = """
func.func @f(%a: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %cst = arith.constant -7.0 : f32
  %p = tensor.pad %a low[1, 0] high[3, 2] {
  ^bb0(%i: index, %j: index):
    tensor.yield %cst : f32
  } : tensor<?x?xf32> to tensor<?x?xf32>
  return %p : tensor<?x?xf32>
}
"""


@pytest.mark.parametrize("m, n", [(0, 0), (1, 1), (0, 5), (7, 13), (131, 3)])
def test_pad_of_run_time_sized_dims(backend, m, n):
    a = np.random.default_rng(m + n).standard_normal((m, n)).astype(np.float32)
    got = load(PAD, backend)["f"](a).to_host()
    np.testing.assert_array_equal(got, np.pad(a, ((1, 3), (0, 2)), constant_values=-7))


class _Conv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(4, 6, 5, padding=2)
        self.depthwise = torch.nn.Conv2d(6, 6, 3, padding=1, stride=2, groups=6)

    def forward(self, x):
        y = F.pad(torch.relu(self.conv(x)), (1, 2))  # (batch, 6, n + 3)
        return self.depthwise(y.unsqueeze(2).expand(-1, -1, 3, -1))


def _against_torch_over_lengths(model, channels: int, lengths, backend) -> None:
    """``model`` exported with a dynamic last dim of its (2, channels, L) input, one module
    called at each of ``lengths`` against PyTorch."""
    n = torch.export.Dim("n", min=1, max=1024)
    module = load(import_torch(model, torch.randn(2, channels, 9), dynamic_shapes={"x": {2: n}}),
                  backend)
    for length in lengths:
        x = torch.randn(2, channels, length)
        with torch.no_grad():
            want = model(x).numpy()
        got = module["main"](x.numpy()).to_host()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_convolutions_padded_along_a_dynamic_length(backend):
    """torch-mlir pads a convolution's input along a dynamic dim (and F.pad does): both were
    refused as "tensor.pad of a run-time sized dim"."""
    torch.manual_seed(0)
    _against_torch_over_lengths(_Conv().eval(), 4, (1, 2, 9, 64), backend)


INSERT = """
func.func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %b, %c0 : tensor<?x?xf32>
  %n = tensor.dim %b, %c1 : tensor<?x?xf32>
  %k = arith.subi %n, %c1 : index
  %r = tensor.insert_slice %b into %a[%c1, %k] [%m, %n] [1, 1] : tensor<?x?xf32> into tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""


@pytest.mark.parametrize("dest, source", [((1, 1), (0, 1)), ((2, 2), (1, 1)), ((9, 30), (7, 13)),
                                          ((140, 600), (131, 257))])
def test_insert_slice_at_run_time_offsets_and_sizes(backend, dest, source):
    rng = np.random.default_rng(dest[0])
    a = rng.standard_normal(dest).astype(np.float32)
    b = rng.standard_normal(source).astype(np.float32)
    want = a.copy()
    m, n = source
    want[1:1 + m, n - 1:2 * n - 1] = b
    np.testing.assert_array_equal(load(INSERT, backend)["f"](a, b).to_host(), want)


def test_insert_slice_past_its_destination_is_an_invocation_error(backend):
    module = load(INSERT, backend)
    with pytest.raises(rt.InvocationError, match="tensor.insert_slice writes past its destination"):
        module["f"](np.zeros((4, 4), np.float32), np.ones((3, 3), np.float32))


class _Upsample(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.ConvTranspose1d(3, 2, 4, stride=2, padding=1)

    def forward(self, x):
        return self.up(x)


def test_transposed_convolution_over_a_dynamic_length(backend):
    """torch-mlir inserts the input, dilated by the stride, into a zero tensor at run-time
    sizes: insert_slice with dynamic sizes was refused."""
    torch.manual_seed(1)
    _against_torch_over_lengths(_Upsample().eval(), 3, (1, 2, 9, 50), backend)


class _Roll(torch.nn.Module):
    def forward(self, x):
        return torch.roll(x, 2, 1), torch.roll(x, -1, 1)


def test_roll_along_a_dynamic_dim(backend):
    """torch-mlir slices a roll at ``select(n - 2 < 0, -1, n - 2)``, clamped to [0, n] after:
    a select with a side that may be negative was refused ("pyree computes only sizes on the
    host"); the host now computes it moved up by its negative parts. (torch-mlir takes no
    shift modulo n, so a shift past the length can differ from PyTorch's answer: these two
    shifts agree with it at every length here.)"""
    n = torch.export.Dim("n", min=1, max=1024)
    module = load(import_torch(_Roll(), torch.randn(3, 8), dynamic_shapes={"x": {1: n}}), backend)
    for length in (1, 2, 3, 4, 17):
        x = torch.randn(3, length)
        for got, want in zip(module["main"](x.numpy()), _Roll()(x)):
            np.testing.assert_array_equal(got.to_host(), want.numpy())


SPLAT = """
func.func @f(%a: tensor<?x3xf32>, %s: tensor<f32>) -> (tensor<?x3x?xi32>, tensor<2x?xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = tensor.dim %a, %c0 : tensor<?x3xf32>
  %m = arith.muli %n, %c2 : index
  %x = arith.constant -5 : i32
  %r = tensor.splat %x[%n, %m] : tensor<?x3x?xi32>
  %y = tensor.extract %s[] : tensor<f32>
  %q = tensor.splat %y[%n] : tensor<2x?xf32>
  return %r, %q : tensor<?x3x?xi32>, tensor<2x?xf32>
}
"""


@pytest.mark.parametrize("n", [0, 1, 4, 131])
def test_splat_to_run_time_sizes(backend, n):
    """``tensor.splat %x[%n]`` was refused ("dynamic dimensions are not supported yet")."""
    ints, floats = load(SPLAT, backend)["f"](np.zeros((n, 3), np.float32), np.float32(-0.0))
    np.testing.assert_array_equal(ints.to_host(), np.full((n, 3, 2 * n), -5, np.int32))
    got = floats.to_host()
    assert got.shape == (2, n) and np.all((got == 0) & np.signbit(got))


REVERSE = """
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%a: tensor<?x?xf32>) -> tensor<?x?xi32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<?x?xf32>
  %n = tensor.dim %a, %c1 : tensor<?x?xf32>
  %last = arith.subi %n, %c1 : index
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %r = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<?x?xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %k = arith.subi %last, %j : index
    %v = tensor.extract %a[%i, %k] : tensor<?x?xf32>
    linalg.yield %v : f32
  } -> tensor<?x?xf32>
  %ei = tensor.empty(%m, %n) : tensor<?x?xi32>
  %w = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%r : tensor<?x?xf32>) outs(%ei : tensor<?x?xi32>) {
  ^bb0(%x: f32, %o: i32):
    %j = linalg.index 1 : index
    %k = arith.subi %last, %j : index
    %ki = arith.index_cast %k : index to i32
    %xi = arith.fptosi %x : f32 to i32
    %s = arith.addi %xi, %ki : i32
    linalg.yield %s : i32
  } -> tensor<?x?xi32>
  return %w : tensor<?x?xi32>
}
"""


@pytest.mark.parametrize("shape", [(3, 0), (0, 0), (0, 5), (1, 1), (4, 7)])
def test_reversal_by_a_size_read_in_the_body(backend, shape):
    """torch-mlir reverses a dim as ``%last = n - 1`` read in the body (torch.flip, ONNX's
    Slice with a negative step): the kernel took ``n - 1`` as one push constant, refused as
    negative for an empty dim ("push constant 2 `s1 - 1` is -1")."""
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    want = a[:, ::-1].astype(np.int32) + (shape[1] - 1 - np.arange(shape[1], dtype=np.int32))
    np.testing.assert_array_equal(load(REVERSE, backend)["f"](a).to_host(), want)
