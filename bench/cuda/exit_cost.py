"""What a CUDA process's exit costs, by what it holds (issue 13): fresh processes that start a
primary context through pyree's libcuda table, take some resources, optionally give them back
themselves, then ``os._exit``. The parent times, on CLOCK_MONOTONIC, the child's steps and the
gap from its ``os._exit`` to ``wait`` returning: the kernel's teardown of whatever was left.

    python3 bench/cuda/exit_cost.py [--runs 7] [--variants ctx,pool+release]
                                    [--env CUDA_DEVICE_MAX_CONNECTIONS=1 ...]
(GPU host, pyree-hal-cuda importable). Each ``--env`` setting runs every variant once more with
that variable set, in the same alternation.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

CHILD = r"""
import os, sys, time
from pyree.hal.cuda import symbols
from pyree.hal.cuda.symbols import check, ffi
steps = sys.argv[1].split("+")
marks = []
def mark(what): marks.append((what, time.monotonic_ns()))
mark("python ready")
cu = symbols.load()
check(cu.cuInit(0), "cuInit")
ctx = ffi.new("CUcontext *")
check(cu.cuDevicePrimaryCtxRetain(ctx, 0), "retain")
check(cu.cuCtxSetCurrent(ctx[0]), "current")
mark("context")
stream = ffi.new("CUstream *")
check(cu.cuStreamCreate(stream, symbols.CU_STREAM_NON_BLOCKING), "stream")
pool = host = None
if "pool" in steps:
    props = ffi.new("CUmemPoolProps *")
    props.allocType = symbols.CU_MEM_ALLOCATION_TYPE_PINNED
    props.location.type = symbols.CU_MEM_LOCATION_TYPE_DEVICE
    pool = ffi.new("CUmemoryPool *")
    check(cu.cuMemPoolCreate(pool, props), "pool")
    threshold = ffi.new("cuuint64_t *", 2**64 - 1)
    check(cu.cuMemPoolSetAttribute(pool[0], symbols.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                   threshold), "threshold")
    ptr = ffi.new("CUdeviceptr *")
    check(cu.cuMemAllocFromPoolAsync(ptr, 256, pool[0], stream[0]), "alloc")
    check(cu.cuMemFreeAsync(ptr[0], stream[0]), "free")
    check(cu.cuStreamSynchronize(stream[0]), "sync")
    mark("pool alloc")
if "host" in steps:
    host = ffi.new("void **")
    check(cu.cuMemHostAlloc(host, 4 << 20, 3), "host alloc")
    mark("host alloc")
if "trim" in steps:
    check(cu.cuMemPoolTrimTo(pool[0], 0), "trim")
    mark("trim")
if "release" in steps:
    if host is not None:
        check(cu.cuMemFreeHost(host[0]), "free host")
    if pool is not None:
        check(cu.cuMemPoolDestroy(pool[0]), "pool destroy")
    check(cu.cuStreamDestroy(stream[0]), "stream destroy")
    check(cu.cuDevicePrimaryCtxRelease(0), "release")
    mark("released")
print(" ".join(f"{what.replace(' ', '_')}={t}" for what, t in marks), flush=True)
os._exit(0)
"""

VARIANTS = ["ctx", "ctx+release", "pool", "pool+trim", "pool+release", "pool+host",
            "pool+host+release"]


def sample(variant: str, env: dict[str, str]) -> dict[str, float]:
    start = time.monotonic_ns()
    done = subprocess.run([sys.executable, "-c", CHILD, variant], capture_output=True, text=True,
                          env={**os.environ, **env})
    end = time.monotonic_ns()
    if done.returncode:
        sys.exit(f"{variant}: {done.stderr[-800:]}")
    marks = dict(item.split("=") for item in done.stdout.split())
    out = {what: (int(t) - start) / 1e6 for what, t in marks.items()}
    out["exit gap"] = (end - start) / 1e6 - max(out.values())
    out["wall"] = (end - start) / 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    sides = [(variant, setting) for setting in ["", *args.env]
             for variant in args.variants.split(",")]
    results: dict[tuple[str, str], list[dict[str, float]]] = {side: [] for side in sides}
    for run in range(args.runs + 1):
        for variant, setting in sides:
            s = sample(variant, dict([setting.split("=", 1)]) if setting else {})
            if run:  # the first round warms caches
                results[variant, setting].append(s)
    for (variant, setting), samples in results.items():
        keys = list(samples[0])
        print(f"{variant + (' ' + setting if setting else ''):20s} " + "  ".join(
            f"{k} {statistics.median(s[k] for s in samples):6.1f}" for k in keys))


if __name__ == "__main__":
    main()
