"""The program test_cuda_trace.py traces on the GPU: three 2048^3 f32 matmuls in a chain (tanh
fused into the first two), each dispatch long enough (milliseconds) that the gaps between them
and the cost of queueing the call are small against the call's device time."""

from __future__ import annotations

import numpy as np

N = 2048
_T = f"tensor<{N}x{N}xf32>"
CHAIN = f"""
func.func @chain(%x: {_T}, %w: {_T}) -> {_T} {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {_T}
  %acc = linalg.fill ins(%zero : f32) outs(%e : {_T}) -> {_T}
  %a = linalg.matmul ins(%x, %w : {_T}, {_T}) outs(%acc : {_T}) -> {_T}
  %b = math.tanh %a : {_T}
  %c = linalg.matmul ins(%b, %w : {_T}, {_T}) outs(%acc : {_T}) -> {_T}
  %d = math.tanh %c : {_T}
  %f = linalg.matmul ins(%d, %w : {_T}, {_T}) outs(%acc : {_T}) -> {_T}
  return %f : {_T}
}}
"""


def chain_arguments(rng: np.random.Generator) -> list[np.ndarray]:
    """x ~ N(0, 1), w ~ N(0, 1/N): every product stays of order 1."""
    return [rng.standard_normal((N, N)).astype(np.float32),
            (rng.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32)]


def chain_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    x, w = x.astype(np.float64), w.astype(np.float64)
    return np.tanh(np.tanh(x @ w) @ w) @ w
