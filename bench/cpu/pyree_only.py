"""Times the modules of a kernel-suite build (bench/kernels/build_modules.py --backend llvm-cpu)
on local-task, pyree alone: median wall-clock ms of calls on fixed random inputs. Several build
folders are timed in turns, so a change's builds meet the same machine state.

    python bench/cpu/pyree_only.py BUILD_DIR [BUILD_DIR ...] [--cases RE] [--reps N] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

import numpy as np
import pyree.runtime as rt

NUMPY = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32,
         "i16": np.int16, "i8": np.int8}


def inputs_for(fn) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    out = []
    for _, dtype, _rank, *shape in json.loads(fn.reflection["iree.abi"])["a"]:
        dtype = np.dtype(NUMPY.get(dtype, dtype))
        out.append((rng.standard_normal(shape) if dtype.kind == "f"
                    else rng.integers(-8, 8, shape)).astype(dtype))
    return out


def time_ms(fn, args, reps: int) -> float:
    fn(*args)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn(*args).to_host()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("builds", nargs="+", type=Path)
    p.add_argument("--cases", default="")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    names = sorted(f.stem for f in args.builds[0].glob("*.vmfb") if re.search(args.cases, f.stem))
    for name in names:
        fns = [rt.load_module((b / f"{name}.vmfb").read_bytes(), device="local-task")["main"]
               for b in args.builds]
        ins = inputs_for(fns[0])
        best = [min(time_ms(fn, ins, args.reps) for _ in range(args.rounds)) for fn in fns]
        print(f"{name:55s} " + "  ".join(f"{ms:9.3f}" for ms in best), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
