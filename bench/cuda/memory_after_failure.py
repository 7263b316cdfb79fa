"""Device memory (cuMemGetInfo, device-wide) around a failed allocation and a module unload, on the
cuda driver (issue 13: "a failure must leave the GPU as it was found").

    python3 bench/cuda/memory_after_failure.py MODULE.vmfb

Prints free MiB at each stage: device created; 1 GiB allocated and dropped; after a request the
GPU cannot hold (its total memory + 16 GiB) fails; module loaded, called,
and unloaded.
"""

from __future__ import annotations

import gc
import sys

import numpy as np
import pyree.runtime as rt
from pyree.hal.cuda import symbols
from pyree.hal.cuda.symbols import check, ffi


def memory() -> tuple[int, int]:
    """(free, total) bytes of the device whose context is current (the driver's, once created)."""
    free, total = ffi.new("size_t *"), ffi.new("size_t *")
    check(symbols.load().cuMemGetInfo(free, total), "cuMemGetInfo")
    return free[0], total[0]


def free_mib() -> float:
    return memory()[0] / 2**20


def main(path: str) -> None:
    device = rt.get_device("cuda")
    stages = [("device created", free_mib())]
    buf = device.allocate(1 << 30)
    stages.append(("1 GiB allocated", free_mib()))
    del buf
    gc.collect()
    stages.append(("1 GiB dropped", free_mib()))
    try:
        device.allocate(memory()[1] + (16 << 30))
    except rt.DriverError as e:
        print("oversized request:", str(e)[:300])
    stages.append(("after the failed oversized request", free_mib()))
    module = rt.load_module(path, device="cuda")
    fn = module[module.function_names[0]]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(t.shape).astype(t.dtype) for t in fn.argument_types]
    result = fn(*args)
    (result[0] if isinstance(result, tuple) else result).to_host()
    del result
    stages.append(("module loaded and called", free_mib()))
    del fn, module
    gc.collect()
    stages.append(("module unloaded", free_mib()))
    for name, mib in stages:
        print(f"{name:34s} free {mib:10.1f} MiB")


if __name__ == "__main__":
    main(sys.argv[1])
