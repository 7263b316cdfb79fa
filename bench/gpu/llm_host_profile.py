"""Where a decode step's host time goes: cProfile of pyree's ``decode`` calls on the GPU host
(the step's kernels take 0.76 ms of GPU time, the call 1.2–1.5 ms of wall time, BENCHMARKS.md).

    python3 bench/gpu/llm_host_profile.py MODULE.vmfb WEIGHTS.safetensors [--calls 50]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import numpy as np


def main() -> None:
    import pyree.runtime as rt
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("module")
    p.add_argument("weights")
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--device", default="cuda")
    args = p.parse_args()
    module = rt.load_module(args.module, args.device, parameters=[f"model={args.weights}"])
    decode = module["decode"]
    _, best, at, k, v = module["prefill"](np.zeros((1, 512), np.int64))
    for _ in range(5):
        _, best, at, k, v = decode(best, at, k, v)
    best.to_host()
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    for _ in range(args.calls):
        _, best, at, k, v = decode(best, at, k, v)
    submitted = time.perf_counter() - start
    best.to_host()
    profile.disable()
    total = time.perf_counter() - start
    print(f"{args.calls} calls: {submitted / args.calls * 1e3:.3f} ms each to submit, "
          f"{total / args.calls * 1e3:.3f} ms each to finish")
    pstats.Stats(profile).sort_stats("cumulative").print_stats(28)


if __name__ == "__main__":
    main()
