"""What a host-program loop iteration costs (issue 9): a scf.for whose trip count is an argument,
each iteration one small dispatch, timed per call at several trip counts on each device given.

    python bench/control_flow.py [--devices local-sync,local-task] [--n 1024] [--calls 30]

The per-iteration cost is the slope of the median call time over the trip counts (one submit,
one wait and one 1-byte condition read per iteration); the intercept is the call without a loop
body. With --module-dir the module is read from there (compiled on the CPU machine for the
devices' targets by ``--build DIR``), so that the GPU host needs no compiler.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

TRIPS = (0, 10, 100, 400)
TARGETS = {"local-sync": "llvm-cpu", "local-task": "llvm-cpu", "cuda": "cuda",
           "vulkan": "vulkan-spirv"}


def mlir(n: int) -> str:
    return f"""
func.func @loop(%x: tensor<{n}xf32>, %trips: tensor<index>) -> tensor<{n}xf32> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %t = tensor.extract %trips[] : tensor<index>
  %r = scf.for %i = %c0 to %t step %c1 iter_args(%a = %x) -> (tensor<{n}xf32>) {{
    %b = math.tanh %a : tensor<{n}xf32>
    scf.yield %b : tensor<{n}xf32>
  }}
  return %r : tensor<{n}xf32>
}}"""


def build(folder: Path, n: int, targets: set[str]) -> None:
    from pyree.compiler import CompileOptions, compile_str
    folder.mkdir(parents=True, exist_ok=True)
    for target in targets:
        options = CompileOptions(target_backends=[target], cuda_target="sm_90")
        (folder / f"loop_{n}.{target}.vmfb").write_bytes(compile_str(mlir(n), options))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", default="local-sync,local-task")
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--calls", type=int, default=30)
    p.add_argument("--module-dir", type=Path)
    p.add_argument("--build", type=Path, help="only compile the modules into this folder")
    args = p.parse_args()
    devices = args.devices.split(",")
    if args.build:
        build(args.build, args.n, {TARGETS[d] for d in devices})
        return
    import pyree.runtime as rt
    folder = args.module_dir
    if folder is None:
        import tempfile
        folder = Path(tempfile.mkdtemp())
        build(folder, args.n, {TARGETS[d] for d in devices})
    rng = np.random.default_rng(0)
    for device in devices:
        module = rt.load_module((folder / f"loop_{args.n}.{TARGETS[device]}.vmfb").read_bytes(),
                                device=device)
        medians = []
        for trips in TRIPS:
            x = rng.standard_normal(args.n).astype(np.float32)
            want = x.copy()
            for _ in range(trips):
                want = np.tanh(want)
            got = np.asarray(module.loop(x, np.int64(trips)))
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
            times = []
            for _ in range(args.calls):
                x = rng.standard_normal(args.n).astype(np.float32)
                start = time.perf_counter()
                module.loop(x, np.int64(trips)).to_host()
                times.append(time.perf_counter() - start)
            medians.append(statistics.median(times))
        slope, intercept = np.polyfit(TRIPS, medians, 1)
        cells = ", ".join(f"{t} trips {m * 1e3:.3f} ms" for t, m in zip(TRIPS, medians))
        print(f"{device}: {cells}; per iteration {slope * 1e6:.1f} us, call {intercept * 1e6:.1f} us")


if __name__ == "__main__":
    main()
