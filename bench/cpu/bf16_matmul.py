"""A bf16 matmul on local-task against PyTorch's CPU bf16 matmul (issue 31 item 5: "bf16 matmul
at >= 0.8x PyTorch's CPU bf16", measured 3072x1024x4096 at 617 vs 11 ms where PyTorch uses AMX).

    python bench/cpu/bf16_matmul.py [--shape 3072,1024,4096] [--weight-nk] [--rounds 5] [--threads N]

pyree's module (llvm-cpu, default variants) and ``a @ b`` on bf16 tensors take turns; medians of
each side's calls (both allocate their result; pyree's runs until its result is ready, without
a copy to a numpy array, as PyTorch's result is one already); the result is checked against
PyTorch's in f32 (relative max error). Prints
the CPU's AMX/AVX512-BF16 flags, which decide PyTorch's kernel, and the CPU variant pyree loads
($PYREE_LLVMCPU_VARIANT picks another). ``--weight-nk``: b is stored [N, K], as a Linear layer's
weight (``linalg.matmul_transpose_b``, ``a @ w.T``). ``--amx TM,TN,CHUNK`` compiles with other
tile sizes for the AMX template (codegen/llvm_cpu/amx.py), to try them.
"""

from __future__ import annotations

import argparse
import statistics
import time

import ml_dtypes
import numpy as np
import pyree.runtime as rt
import torch
from pyree.compiler import compile_str


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="3072,1024,4096")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=0, help="PyTorch's threads (0: its default)")
    p.add_argument("--weight-nk", action="store_true", help="b stored [N, K] (a @ w.T)")
    p.add_argument("--amx", default="", help="TM,TN,CHUNK of the AMX template (amx.py)")
    args = p.parse_args()
    m, k, n = map(int, args.shape.split(","))
    if args.threads:
        torch.set_num_threads(args.threads)
    flags = open("/proc/cpuinfo").read().split()
    print("cpu flags:", sorted({f for f in flags if f.startswith(("amx", "avx512_bf16"))}) or "none")
    b_shape = (n, k) if args.weight_nk else (k, n)
    op = "linalg.matmul_transpose_b" if args.weight_nk else "linalg.matmul"
    ta, tb, tc = (f"tensor<{x}x{y}xbf16>" for x, y in ((m, k), b_shape, (m, n)))
    src = f"""func.func @main(%a: {ta}, %b: {tb}) -> {tc} {{
  %z = arith.constant 0.0 : bf16
  %e = tensor.empty() : {tc}
  %f = linalg.fill ins(%z : bf16) outs(%e : {tc}) -> {tc}
  %r = {op} ins(%a, %b : {ta}, {tb}) outs(%f : {tc}) -> {tc}
  return %r : {tc}
}}"""
    if args.amx:
        from pyree.compiler.codegen.llvm_cpu import amx

        amx.TILE_M, amx.TILE_N, amx.CHUNK = map(int, args.amx.split(","))
    module = rt.load_module(compile_str(src, target_backends=["llvm-cpu"]), device="local-task")
    a, b = torch.randn(m, k).bfloat16(), torch.randn(*b_shape).bfloat16()
    print("pyree loads the variant for", module._code.targetCpu)
    as_np = lambda t: t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)  # noqa: E731
    a_dev, b_dev = (rt.asdevicearray(module.device, as_np(t)) for t in (a, b))
    got = module["main"](a_dev, b_dev).to_host().astype(np.float32)
    product = (lambda: a @ b.T) if args.weight_nk else (lambda: a @ b)
    want = product().float().numpy()
    print(f"relative max error vs PyTorch's bf16: {np.abs(got - want).max() / np.abs(want).max():.2e}")
    sides = {"pyree": lambda: module["main"](a_dev, b_dev).wait(), "torch": product}
    times = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, call in sides.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    ms = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    case = f"{m}x{k}x{n} bf16" + (" [N, K] weight" if args.weight_nk else "") + (
        f" (amx {args.amx})" if args.amx else "")
    print(f"{case}: pyree {ms['pyree']:.1f} ms, PyTorch {ms['torch']:.1f} ms, "
          f"PyTorch / pyree {ms['torch'] / ms['pyree']:.2f}x")


if __name__ == "__main__":
    main()
