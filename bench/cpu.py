"""CPU benchmark for the foundation issue: pyree on local-task vs numpy, in one run, as ratios.

    python bench/cpu.py [--repeats 15]

1. a chain of four elementwise ops over 16M f32, ((a + b) * c - a) max 0, fused into one kernel by
   pyree, four passes (with temporaries) in numpy;
2. matmul 1024x1024x1024 f32 against numpy's BLAS.
Calls alternate pyree/numpy; the ratio is the median over those pairs of numpy time / pyree time,
so both sides see the same machine. Inputs rotate between two random sets (each larger than the
L2 caches); they are already in device buffers (pyree) or arrays (numpy); the result allocation
is inside the timed call for both, and pyree's time runs until the result is ready.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np
import pyree.runtime as rt
from pyree.compiler import CompileOptions, compile_str

N = 16 * 1024 * 1024
M = K = P = 1024

CHAIN = f"""
func.func @chain(%a: tensor<{N}xf32>, %b: tensor<{N}xf32>, %c: tensor<{N}xf32>) -> tensor<{N}xf32> {{
  %zero = arith.constant dense<0.0> : tensor<{N}xf32>
  %0 = arith.addf %a, %b : tensor<{N}xf32>
  %1 = arith.mulf %0, %c : tensor<{N}xf32>
  %2 = arith.subf %1, %a : tensor<{N}xf32>
  %3 = arith.maximumf %2, %zero : tensor<{N}xf32>
  return %3 : tensor<{N}xf32>
}}
"""

MATMUL = f"""
func.func @matmul(%a: tensor<{M}x{K}xf32>, %b: tensor<{K}x{P}xf32>) -> tensor<{M}x{P}xf32> {{
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<{M}x{P}xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<{M}x{P}xf32>) -> tensor<{M}x{P}xf32>
  %r = linalg.matmul ins(%a, %b : tensor<{M}x{K}xf32>, tensor<{K}x{P}xf32>)
                     outs(%init : tensor<{M}x{P}xf32>) -> tensor<{M}x{P}xf32>
  return %r : tensor<{M}x{P}xf32>
}}
"""


def interleaved(ours, reference, input_sets, reference_sets, repeats):
    """Alternates one call of each, so both see the same machine (this VM's vCPUs are noisy),
    each starting from an idle machine; returns each side's median ms and the median of the
    per-pair speed ratios."""
    ours(*input_sets[0])  # warm-up: executable load, first touch of the allocator's pools
    reference(*reference_sets[0])
    mine, theirs = [], []
    for i in range(repeats):
        for fn, args, out in ((ours, input_sets, mine), (reference, reference_sets, theirs)):
            time.sleep(0.2)  # OpenBLAS worker threads spin for up to ~0.1 s after a call
            start = time.perf_counter()
            fn(*args[i % len(args)])
            out.append((time.perf_counter() - start) * 1e3)
    ratio = statistics.median(r / m for m, r in zip(mine, theirs))
    return statistics.median(mine), statistics.median(theirs), ratio


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--device", default="local-task")
    args = parser.parse_args()
    rng = np.random.default_rng()
    options = CompileOptions(target_backends=["llvm-cpu"], llvmcpu_target_cpu="host")

    print(f"# {time.strftime('%Y-%m-%d')} {platform.node()} {platform.processor() or platform.machine()}"
          f" cores={os.cpu_count()} numpy={np.__version__} device={args.device}")
    rows = []

    chain_module = rt.load_module(compile_str(CHAIN, options), device=args.device)
    chain = chain_module["chain"]
    host_sets = [[rng.standard_normal(N, dtype=np.float32) for _ in range(3)] for _ in range(2)]
    device_sets = [[rt.asdevicearray(chain_module.device, x) for x in s] for s in host_sets]
    out = chain(*device_sets[0]).to_host()
    a, b, c = host_sets[0]
    np.testing.assert_allclose(out, np.maximum((a + b) * c - a, 0), rtol=1e-6, atol=1e-6)

    def run_chain(*xs):
        chain(*xs).wait()

    rows.append(("fused chain of 4 elementwise, 16M f32",
                 *interleaved(run_chain, lambda a, b, c: np.maximum((a + b) * c - a, 0),
                              device_sets, host_sets, args.repeats)))

    mm_module = rt.load_module(compile_str(MATMUL, options), device=args.device)
    mm = mm_module["matmul"]
    host_sets = [[rng.standard_normal((M, K), dtype=np.float32),
                  rng.standard_normal((K, P), dtype=np.float32)] for _ in range(2)]
    device_sets = [[rt.asdevicearray(mm_module.device, x) for x in s] for s in host_sets]
    out = mm(*device_sets[0]).to_host()
    ref = host_sets[0][0].astype(np.float64) @ host_sets[0][1]
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-5

    def run_mm(*xs):
        mm(*xs).wait()

    rows.append(("matmul 1024^3 f32",
                 *interleaved(run_mm, lambda a, b: a @ b, device_sets, host_sets, args.repeats)))

    print(f"{'benchmark':40} {'pyree ms':>9} {'numpy ms':>9} {'pyree speed / numpy':>20}")
    for name, mine, theirs, ratio in rows:
        print(f"{name:40} {mine:9.2f} {theirs:9.2f} {ratio:19.2f}x")
    flops = 2 * M * K * P
    print(f"matmul: pyree {flops / rows[1][1] / 1e6:.1f} GFLOP/s, numpy {flops / rows[1][2] / 1e6:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
