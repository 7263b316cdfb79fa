"""On an NVIDIA GPU: which scatter kernels finish, and how fast, by combine, dtype and update
count; each case in a child process under a deadline, so one that never finishes is reported and
the rest still run. Compiles on the host (its Python has the compiler installed):

    python3 tests/drivers/cuda/scatter_probe.py [--device cuda|vulkan] [--map-results] [--deadline S]

``--map-results``: small results mapped whatever their kernels do (the runtime before the
twenty-eighth session), for a side-by-side run. Vulkan takes the f32 and i32 cases (its atomics).

Written when test_cuda_scatter_gpu.py's i8 add stopped finishing (twenty-eighth session): the
small result was mapped host memory, so its atomics crossed the bus (vm/call_plan.py keeps a
result that kernels update in place (read_write) in device memory since).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2] / "e2e"))
CASES = [("i8", "add"), ("i8", "max"), ("i8", "mul"), ("i8", "xor"), ("f16", "min"),
         ("f16", "add"), ("f32", "mul"), ("f32", "add"), ("i32", "add"), ("i32", "max")]
UPDATES = [64, 20000]


def one(dtype: str, op: str, updates: int, device: str, map_results: bool) -> dict:
    """Compiles and runs one case here; the result as a dict."""
    import pyree.runtime as rt
    from pyree.compiler import CompileOptions, compile_str
    from pyree.runtime.vm import call_plan
    from test_scatter_atomics import check, data, scatter_mlir
    if map_results:
        call_plan._results_kernels_update = lambda tree, exports: set()
    options = {"cuda": CompileOptions(target_backends=["cuda"], cuda_target="sm_90"),
               "vulkan": CompileOptions(target_backends=["vulkan-spirv"],
                                        vulkan_target="hopper-h100-linux")}.get(
        device, CompileOptions(target_backends=["llvm-cpu"]))  # local-task: the probe's own check
    rows, cols = 13, 7
    module = rt.load_module(compile_str(
        scatter_mlir((rows, cols), (updates, cols), (updates, 1), dtype, op), options),
        device=device)
    rng = np.random.default_rng(updates)
    orig, upd = data((rows, cols), dtype, rng), data((updates, cols), dtype, rng)
    if op == "mul":
        upd = (np.sign(upd) + (upd == 0)).astype(upd.dtype)
    idx = rng.integers(-3, rows + 3, size=(updates, 1)).astype(np.int64)
    times = []
    for _ in range(4):
        start = time.perf_counter()
        got = module.main(orig, upd, idx).to_host()
        times.append((time.perf_counter() - start) * 1e3)
    check(got, orig, upd, idx, op)
    return {"ms": round(float(np.median(times[1:])), 3), "first_ms": round(times[0], 3)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deadline", type=float, default=20.0)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--map-results", action="store_true")
    parser.add_argument("--one", nargs=3)
    args = parser.parse_args()
    if args.one:
        dtype, op, updates = args.one
        print(json.dumps(one(dtype, op, int(updates), args.device, args.map_results)))
        return
    flags = ["--device", args.device, *(["--map-results"] if args.map_results else [])]
    for dtype, op in CASES:
        if args.device != "cuda" and dtype not in ("f32", "i32"):
            continue
        for updates in UPDATES:
            cmd = [sys.executable, str(HERE), "--one", dtype, op, str(updates), *flags]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.deadline)
                line = done.stdout.strip().splitlines()[-1] if done.returncode == 0 else \
                    f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"
            except subprocess.TimeoutExpired:
                line = f"did not finish in {args.deadline} s"
            mode = "mapped" if args.map_results else "device"
            print(f"{args.device} {mode} {dtype:4} {op:4} {updates:6} updates: {line}", flush=True)


if __name__ == "__main__":
    main()
