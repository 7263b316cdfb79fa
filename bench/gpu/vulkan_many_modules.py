"""Does a Vulkan call get slower as more modules are loaded in the process? hf_tiny's run on
NVIDIA's driver timed the first ten models at 0.36-0.53 ms a call and every later one at
0.9-1.8 ms, where cuda stays at 0.12-0.23 ms. Times one model's call alone, after loading the
other models of FOLDER (each called once), and again after unloading them.

    python3 bench/gpu/vulkan_many_modules.py FOLDER [--device vulkan] [--profile]

``--profile``: where the host's time goes in the first model's calls, alone and with the others
loaded (cProfile, by own time). ``--buffers N``: first, the first model's call with N extra
4 KiB device arrays alive and no other module (is it the count of allocations?).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import statistics
import time
from pathlib import Path

import numpy as np


def per_call_ms(fn, x, calls: int = 200) -> float:
    for _ in range(20):
        fn(x).to_host()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn(x).to_host()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def profile(fn, x, title: str) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(200):
        fn(x).to_host()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(12)
    print(f"--- {title}\n" + "\n".join(out.getvalue().splitlines()[4:24]))


def main() -> None:
    import pyree.runtime as rt
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path)
    p.add_argument("--device", default="vulkan")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--buffers", type=int, default=0)
    a = p.parse_args()
    paths = sorted(a.folder.glob("*.vmfb"))
    inputs = {path: np.load(path.with_suffix(".in.npy")) for path in paths}
    first, last = paths[0], paths[-1]
    one = rt.load_module(first.read_bytes(), device=a.device)["main"]
    print(f"{first.stem} alone: {per_call_ms(one, inputs[first]):.3f} ms", flush=True)
    if a.profile:
        profile(one, inputs[first], f"{first.stem} alone")
    if a.buffers:
        device = rt.get_device(a.device)
        held = []
        for count in sorted({a.buffers // 4, a.buffers // 2, a.buffers}):
            while len(held) < count:
                held.append(rt.asdevicearray(device, np.zeros(1024, np.float32)))
            print(f"{first.stem} with {count} 4 KiB arrays: "
                  f"{per_call_ms(one, inputs[first]):.3f} ms", flush=True)
        del held
        gc.collect()
    others = []
    for path in paths[1:]:
        module = rt.load_module(path.read_bytes(), device=a.device)
        module["main"](inputs[path]).to_host()
        others.append(module)
        if len(others) in (5, 10, 20, len(paths) - 1):
            print(f"{first.stem} with {len(others)} more loaded: "
                  f"{per_call_ms(one, inputs[first]):.3f} ms; {path.stem}: "
                  f"{per_call_ms(module['main'], inputs[path]):.3f} ms", flush=True)
    if a.profile:
        profile(one, inputs[first], f"{first.stem} with {len(others)} more loaded")
    del others, module
    gc.collect()
    print(f"{first.stem} after unloading them: {per_call_ms(one, inputs[first]):.3f} ms")
    alone = rt.load_module(last.read_bytes(), device=a.device)["main"]
    print(f"{last.stem} loaded again: {per_call_ms(alone, inputs[last]):.3f} ms")


if __name__ == "__main__":
    main()
