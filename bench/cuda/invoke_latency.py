"""Host time of one whole invoke of the 4-element add from Python (median over 3000 calls after
300 warm-up calls): numpy in -> numpy out, and device-resident in -> ``.wait()``.

    python3 bench/cuda/invoke_latency.py MODULE_DIR [DEVICE_URI]

Needs no torch, so run_on_device.sh times the committed driver and the working tree with it in
one run; bench_cuda.py reuses ``measure``.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyree.runtime as rt


def _median_us(call, calls: int, warmup: int) -> float:
    times = []
    for i in range(calls + warmup):
        t0 = time.perf_counter()
        call()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def measure(folder: Path, uri: str, calls: int = 3000, warmup: int = 300) -> dict:
    m = rt.load_module(folder / "bench_add_4.vmfb", device=uri)
    fn = m[m.function_names[0]]
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((1, 4)).astype(np.float32) for _ in range(2))
    assert np.array_equal(fn(a, b).to_host(), a + b), "4-element add is wrong"
    da, db = rt.asdevicearray(m.device, a), rt.asdevicearray(m.device, b)
    return {"pyree_numpy_in_out_us": _median_us(lambda: fn(a, b).to_host(), calls, warmup),
            "pyree_device_in_wait_us": _median_us(lambda: fn(da, db).wait(), calls, warmup)}


if __name__ == "__main__":
    uri = sys.argv[2] if len(sys.argv) > 2 else "cuda"
    r = measure(Path(sys.argv[1]), uri)
    print(f"invoke {uri}: numpy in/out {r['pyree_numpy_in_out_us']:.1f} us, device-resident "
          f"{r['pyree_device_in_wait_us']:.1f} us")
