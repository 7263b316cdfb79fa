"""One zoo module on one device, in a process of its own (zoo.py starts it, so that a crash or a
hang costs one row of the table, not the sweep):

    python3 bench/models/zoo_run.py DEVICE MODULE PARAMS X.npy Y.npy REPS

Loads MODULE with its weights from the archive PARAMS, calls ``main`` on X.npy, saves the result
to Y.npy and prints one JSON line: seconds to load, seconds of the first call, and the median
milliseconds of REPS further calls (input resident on the device, result read back; none when
REPS is 0). Imports only the runtime and numpy: a deploy host needs nothing else.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np


def main() -> None:
    device, module_path, params, x_path, y_path, reps = sys.argv[1:7]
    import pyree.runtime as rt
    t0 = time.perf_counter()
    module = rt.load_module(module_path, device=device, parameters=[params])
    load_s = time.perf_counter() - t0
    fn = module["main"]
    x = rt.asdevicearray(module.device, np.load(x_path))
    t0 = time.perf_counter()
    y = fn(x).to_host()
    first_s = time.perf_counter() - t0
    np.save(y_path, y)
    row = {"load_s": load_s, "first_s": first_s}
    times = []
    for _ in range(int(reps)):
        t0 = time.perf_counter()
        fn(x).to_host()
        times.append((time.perf_counter() - t0) * 1e3)
    if times:
        row["ms"] = statistics.median(times)
    print(json.dumps(row))


if __name__ == "__main__":
    main()
