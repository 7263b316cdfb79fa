"""Host time of one whole invoke of the 4-element add from Python (median over 3000 calls after
300 warm-up calls): numpy in -> numpy out (also split into the call, which returns once the work
is submitted, and ``to_host``, which waits and reads), and device-resident in -> ``.wait()``.

    python3 bench/cuda/invoke_latency.py MODULE_DIR [DEVICE_URI] [gc-freeze]

Needs no torch, so run_on_device.sh times the committed driver and the working tree with it in
one run; bench_cuda.py reuses ``measure``. ``gc-freeze`` moves every object made while loading
into the permanent generation first (``gc.freeze()``), for invoke_spread.sh's comparison. Each
line also gives the device-resident call's 10th/90th percentiles and, when the process is
pinned, its CPUs.
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyree.runtime as rt


def _times_us(call, calls: int, warmup: int) -> list[float]:
    times = []
    for i in range(calls + warmup):
        t0 = time.perf_counter()
        call()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e6)
    return times


def _median_us(call, calls: int, warmup: int) -> float:
    return statistics.median(_times_us(call, calls, warmup))


def cpu_reference_us() -> float:
    """A fixed pure-Python workload (no GPU, no pyree): how fast this process's CPU runs Python
    right now, to tell a slow host CPU apart from a slow invoke path."""
    return _median_us(lambda: sorted({i * 7 % 1009: i for i in range(300)}.items()), 2000, 200)


def measure(folder: Path, uri: str, calls: int = 3000, warmup: int = 300,
            freeze: bool = False) -> dict:
    m = rt.load_module(folder / "bench_add_4.vmfb", device=uri)
    fn = m[m.function_names[0]]
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((1, 4)).astype(np.float32) for _ in range(2))
    assert np.array_equal(fn(a, b).to_host(), a + b), "4-element add is wrong"
    da, db = rt.asdevicearray(m.device, a), rt.asdevicearray(m.device, b)
    if freeze:
        gc.collect()
        gc.freeze()
    numpy_us = _median_us(lambda: fn(a, b).to_host(), calls, warmup)
    split = []  # (call returned, to_host returned) of numpy calls: host work before the submit
    for i in range(calls + warmup):  # returns vs the GPU round trip plus the read after it
        t0 = time.perf_counter()
        result = fn(a, b)
        t1 = time.perf_counter()
        result.to_host()
        t2 = time.perf_counter()
        del result  # as in the loop above: the result goes back before the next call
        if i >= warmup:
            split.append(((t1 - t0) * 1e6, (t2 - t1) * 1e6))
    q = statistics.quantiles(_times_us(lambda: fn(da, db).wait(), calls, warmup), n=10)
    return {"pyree_numpy_in_out_us": numpy_us,
            "pyree_numpy_call_then_to_host_us": tuple(statistics.median(x) for x in zip(*split)),
            "pyree_device_in_wait_us": q[4],
            "pyree_device_in_wait_p10_p90_us": (q[0], q[8]), "cpu_reference_us": cpu_reference_us()}


if __name__ == "__main__":
    uri = sys.argv[2] if len(sys.argv) > 2 else "cuda"
    r = measure(Path(sys.argv[1]), uri, freeze="gc-freeze" in sys.argv[3:])
    p10, p90 = r["pyree_device_in_wait_p10_p90_us"]
    call_us, read_us = r["pyree_numpy_call_then_to_host_us"]
    print(f"invoke {uri}: numpy in/out {r['pyree_numpy_in_out_us']:.1f} us (call {call_us:.1f} + "
          f"to_host {read_us:.1f}), device-resident "
          f"{r['pyree_device_in_wait_us']:.1f} us (p10 {p10:.1f}, p90 {p90:.1f}; pure-Python "
          f"reference {r['cpu_reference_us']:.1f} us; cpus "
          f"{sorted(os.sched_getaffinity(0)) if len(os.sched_getaffinity(0)) < 4 else 'any'})")
