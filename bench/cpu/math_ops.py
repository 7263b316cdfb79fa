"""Elementwise math on local-task against PyTorch's CPU, in one process (BENCHMARKS.md,
forty-eighth session: trigonometry vectorized).

    python bench/cpu/math_ops.py [--sizes 1048576,1000003] [--scale 1]

Each op is one linalg.generic over f32 of each size, its input already on the device (no host
round trip in pyree's time) and checked against float64 numpy first; pyree's ms is the median of
15 calls waited for, PyTorch's the median of 15 calls of the op on a tensor (same threads as the
machine gives it). ``--scale`` multiplies the random inputs (1e5: a huge argument in every vector,
sin's slow reduction).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pyree.runtime as rt
import torch
from pyree.compiler import CompileOptions, compile_str

OPS = {  # MLIR op -> (numpy reference, PyTorch, arity)
    "math.sin": (np.sin, torch.sin, 1), "math.cos": (np.cos, torch.cos, 1),
    "math.tan": (np.tan, torch.tan, 1), "math.atan": (np.arctan, torch.atan, 1),
    "math.atan2": (np.arctan2, torch.atan2, 2), "math.tanh": (np.tanh, torch.tanh, 1),
    "math.absf": (np.abs, torch.abs, 1),
}


def program(op: str, n: int, arity: int) -> str:
    t = f"tensor<{n}xf32>"
    ins = ", ".join(f"%x{i}" for i in range(arity))
    maps = ", ".join(["affine_map<(d0) -> (d0)>"] * (arity + 1))
    args = ", ".join(f"%a{i}" for i in range(arity))
    return f"""func.func @main({", ".join(f"%x{i}: {t}" for i in range(arity))}) -> {t} {{
  %e = tensor.empty() : {t}
  %r = linalg.generic {{indexing_maps = [{maps}], iterator_types = ["parallel"]}}
      ins({ins} : {", ".join([t] * arity)}) outs(%e : {t}) {{
  ^bb0({", ".join(f"%a{i}: f32" for i in range(arity))}, %out: f32):
    %s = {op} {args} : f32
    linalg.yield %s : f32
  }} -> {t}
  return %r : {t}
}}"""


def median_ms(call, *args) -> float:
    times = []
    for _ in range(15):
        start = time.perf_counter()
        call(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1048576,1000003")
    p.add_argument("--scale", type=float, default=1.0)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    print("| op | size | pyree ms | PyTorch ms | torch/pyree | max abs error |")
    print("|---|---:|---:|---:|---:|---:|")
    for n in (int(s) for s in args.sizes.split(",")):
        for op, (reference, torch_op, arity) in OPS.items():
            xs = [(rng.standard_normal(n) * args.scale).astype(np.float32) for _ in range(arity)]
            module = rt.load_module(compile_str(program(op, n, arity),
                                                CompileOptions(target_backends=["llvm-cpu"])),
                                    device="local-task")
            device_xs = [rt.asdevicearray(module.device, x) for x in xs]
            got = module.main(*device_xs).to_host()
            error = float(np.max(np.abs(got - reference(*[x.astype(np.float64) for x in xs]))))
            ours = median_ms(lambda *a: module.main(*a).wait(), *device_xs)  # noqa: B023 - called here
            theirs = median_ms(torch_op, *[torch.from_numpy(x) for x in xs])
            print(f"| {op} | {n} | {ours:.3f} | {theirs:.3f} | {theirs / ours:.2f}x | {error:.1e} |",
                  flush=True)


if __name__ == "__main__":
    main()
