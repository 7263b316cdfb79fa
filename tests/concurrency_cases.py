"""The programs every driver's concurrency test hammers (tests/stress.py): one table, run on
local-sync and local-task (tests/runtime/test_concurrency.py), lavapipe (tests/drivers/vulkan)
and the GPU (tests/drivers/cuda). Each exercises a different part of a call: a static command
list (one CUDA graph) with small mapped results; a larger argument than the GPU drivers stage in
one small slot, with a transient arena between kernels; and host control flow (the host reads
device values and branches between command buffers, holding the function's lock while it waits).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from control_flow_cases import MLIR as CONTROL_FLOW

ROWS, COLS = 131, 129  # 67.6 KB of f32: past the drivers' mapped (16 KiB) and small-staging sizes

ROW_CHAIN = f"""
func.func @row_chain(%x: tensor<{ROWS}x{COLS}xf32>, %w: tensor<{COLS}xf32>) -> tensor<{ROWS}x{COLS}xf32> {{
  %e = tensor.empty() : tensor<{ROWS}x{COLS}xf32>
  %s = linalg.softmax dimension(1) ins(%x : tensor<{ROWS}x{COLS}xf32>) outs(%e : tensor<{ROWS}x{COLS}xf32>) -> tensor<{ROWS}x{COLS}xf32>
  %t = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%s, %w : tensor<{ROWS}x{COLS}xf32>, tensor<{COLS}xf32>) outs(%e : tensor<{ROWS}x{COLS}xf32>) {{
    ^bb0(%a: f32, %b: f32, %o: f32):
      %m = arith.mulf %a, %b : f32
      %h = math.tanh %m : f32
      linalg.yield %h : f32
  }} -> tensor<{ROWS}x{COLS}xf32>
  %r = linalg.softmax dimension(0) ins(%t : tensor<{ROWS}x{COLS}xf32>) outs(%e : tensor<{ROWS}x{COLS}xf32>) -> tensor<{ROWS}x{COLS}xf32>
  return %r : tensor<{ROWS}x{COLS}xf32>
}}
"""


@dataclass(frozen=True)
class Program:
    mlir: str
    function: str
    inputs: object  # rng -> tuple of numpy arguments


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


PROGRAMS = {
    "mlp": Program((Path(__file__).parent / "data" / "mlp.mlir").read_text(), "mlp",
                   lambda rng: (_f32(rng, 37, 53),)),
    "row_chain": Program(ROW_CHAIN, "row_chain",
                         lambda rng: (_f32(rng, ROWS, COLS) * 4, _f32(rng, COLS))),
    "double_until": Program(CONTROL_FLOW, "double_until",
                            lambda rng: (np.abs(_f32(rng, 13)) + np.float32(0.01),
                                         np.float32(rng.uniform(50, 5000)))),
}


def inputs(program: Program, count: int, seed: int = 0) -> list[tuple]:
    """``count`` different argument tuples: each thread's results can only match their own."""
    rng = np.random.default_rng(seed)
    return [program.inputs(rng) for _ in range(count)]
