"""The barriers a module's host program holds are all its calls need: run with the commands
between two barriers last first (tests/reordered_commands.py, as a driver that honours only
barriers may run them), programs whose commands share transient bytes still match numpy. The
whole e2e, models and frontends suites passed this way too (BENCHMARKS.md, twenty-third
session); this keeps a few such programs in every run."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str
from pyree.runtime.drivers.local import command_buffer as local

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "flow"))
import reordered_commands  # noqa: E402
from test_size_versions import matmul  # noqa: E402

CPU = CompileOptions(target_backends=["llvm-cpu"])
BLOCK = """
func.func @block(%x: tensor<?x96xf32>, %w1: tensor<96x1536xf32>, %w2: tensor<1536x96xf32>)
    -> tensor<?x96xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x96xf32>
  %e1 = tensor.empty(%m) : tensor<?x1536xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1536xf32>) -> tensor<?x1536xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<?x96xf32>, tensor<96x1536xf32>)
      outs(%f1 : tensor<?x1536xf32>) -> tensor<?x1536xf32>
  %t = math.tanh %h : tensor<?x1536xf32>
  %e2 = tensor.empty(%m) : tensor<?x96xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<?x96xf32>) -> tensor<?x96xf32>
  %y = linalg.matmul ins(%t, %w2 : tensor<?x1536xf32>, tensor<1536x96xf32>)
      outs(%f2 : tensor<?x96xf32>) -> tensor<?x96xf32>
  %r = arith.addf %y, %x : tensor<?x96xf32>
  return %r : tensor<?x96xf32>
}"""


@pytest.fixture
def last_first(monkeypatch):
    monkeypatch.setattr(local.HostCommandBuffer, "_steps", reordered_commands._reordered)


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_versions_chosen_by_size_run_right_last_first(last_first, device, rng):
    """A product whose run-time rows pick a version that splits K (its partials and their
    fold in the shared versions' area) or keeps it whole."""
    module = rt.load_module(compile_str(matmul(None, 1024, 2048), CPU), device=device)
    b = rng.standard_normal((1024, 2048)).astype(np.float32)
    for rows in (1, 529, 1049):
        a = rng.standard_normal((rows, 1024)).astype(np.float32)
        np.testing.assert_allclose(module.mm(a, b).to_host(), a.astype(np.float64) @ b,
                                   rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_a_chain_of_run_time_products_runs_right_last_first(last_first, device, rng):
    """Values that reuse each other's transient bytes as the chain goes on, at run-time rows."""
    module = rt.load_module(compile_str(BLOCK, CPU), device=device)
    w1 = (rng.standard_normal((96, 1536)) / 10).astype(np.float32)
    w2 = (rng.standard_normal((1536, 96)) / 40).astype(np.float32)
    for rows in (1, 37, 300):
        x = rng.standard_normal((rows, 96)).astype(np.float32)
        want = np.tanh(x.astype(np.float64) @ w1) @ w2 + x
        np.testing.assert_allclose(module.block(x, w1, w2).to_host(), want, rtol=1e-4,
                                   atol=1e-4)
