"""Where the per-call host time of a tiny invoke goes: cProfile over 2000 calls of the 4-element
add (numpy in/out; device-resident and waited; device-resident queued back to back with each
result dropped, as bench/gpu_timing.py times throughput), on the device URI given (default ``cuda``).

    python3 bench/cuda/profile_invoke.py MODULE_DIR [DEVICE_URI]
"""

from __future__ import annotations

import cProfile
import pstats
import sys
from pathlib import Path

import numpy as np
import pyree.runtime as rt


def main(folder: Path, uri: str) -> None:
    m = rt.load_module(folder / "bench_add_4.vmfb", device=uri)
    fn = m[m.function_names[0]]
    a = np.random.default_rng(0).standard_normal((1, 4)).astype(np.float32)
    da, db = rt.asdevicearray(m.device, a), rt.asdevicearray(m.device, a)
    for label, call in (("numpy in, numpy out", lambda: fn(a, a).to_host()),
                        ("device-resident in, wait", lambda: fn(da, db).wait()),
                        ("device-resident in, queued, result dropped", lambda: fn(da, db))):
        for _ in range(200):
            call()
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(2000):
            call()
        profile.disable()
        print(f"\n=== {uri}: {label} (2000 calls) ===")
        pstats.Stats(profile).sort_stats("tottime").print_stats(22)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "cuda")
