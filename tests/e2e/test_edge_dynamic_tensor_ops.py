"""tensor ops over ``?`` dims at the edges: a concatenation whose later parts start at run-time
offsets (their loads are shifted by ``-n``, which a push constant, computed on the host as a
non-negative size, cannot carry), checked against numpy at sizes 0, 1, primes and larger, on
llvm-cpu and on vulkan-spirv under its marker."""

from __future__ import annotations

import functools
import os

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str

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
