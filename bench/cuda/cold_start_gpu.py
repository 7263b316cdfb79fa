"""Process start to first result on the GPU (issue 13): pyree (cuda) vs IREE (cuda) vs PyTorch.

    python3 bench/cuda/cold_start_gpu.py build OUT_DIR     (build machine: compiles tests/data/mlp.mlir
                                                            with pyree for sm_90 and iree-compile for sm_80)
    python3 bench/cuda/cold_start_gpu.py run OUT_DIR [--runs 7]   (GPU host)

Each sample is a fresh process that imports numpy and its runtime, loads the module on the GPU,
calls it once on a 37x53 input and reads the result to numpy (PyTorch: builds the same two-layer
perceptron's shapes on the GPU and runs it once). Sides alternate; medians of wall time from spawn
to exit, and each side's in-process phases (import, load, first call).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PYREE = """
import time; t0 = time.perf_counter()
import numpy as np
import pyree.runtime as rt; t1 = time.perf_counter()
m = rt.load_module({module!r}, device="cuda"); t2 = time.perf_counter()
r = m["mlp"](np.full((37, 53), 0.5, np.float32)).to_host(); t3 = time.perf_counter()
print(float(r.astype(np.float64).sum()), t1 - t0, t2 - t1, t3 - t2)
"""

IREE = """
import time; t0 = time.perf_counter()
import numpy as np
import iree.runtime as ireert; t1 = time.perf_counter()
config = ireert.Config("cuda")
ctx = ireert.SystemContext(config=config)
ctx.add_vm_module(ireert.VmModule.mmap(config.vm_instance, {module!r})); t2 = time.perf_counter()
r = ctx.modules.module["mlp"](np.full((37, 53), 0.5, np.float32)).to_host(); t3 = time.perf_counter()
print(float(r.astype(np.float64).sum()), t1 - t0, t2 - t1, t3 - t2)
"""

TORCH = """
import time; t0 = time.perf_counter()
import numpy as np
import torch; t1 = time.perf_counter()
model = torch.nn.Sequential(torch.nn.Linear(53, 29), torch.nn.ReLU(), torch.nn.Linear(29, 11)).cuda()
t2 = time.perf_counter()
with torch.no_grad():
    r = model(torch.from_numpy(np.full((37, 53), 0.5, np.float32)).cuda()).cpu().numpy()
t3 = time.perf_counter()
print(float(r.astype(np.float64).sum()), t1 - t0, t2 - t1, t3 - t2)
"""


def build(out: Path) -> None:
    from pyree.compiler import CompileOptions, compile_file
    out.mkdir(parents=True, exist_ok=True)
    mlp = ROOT / "tests" / "data" / "mlp.mlir"
    (out / "mlp.pyree.vmfb").write_bytes(
        compile_file(mlp, CompileOptions(target_backends=["cuda"], cuda_target="sm_90")))
    subprocess.run(["/work/iree-venv/bin/iree-compile", str(mlp), "--iree-hal-target-backends=cuda",
                    "--iree-cuda-target=sm_80", "-o", str(out / "mlp.iree.vmfb")], check=True)


def sample(code: str) -> tuple[float, list[float], str]:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    value, *phases = done.stdout.split()
    return wall, [float(p) for p in phases], value


def run(out: Path, runs: int) -> None:
    sides = {"pyree": PYREE.format(module=str(out / "mlp.pyree.vmfb")),
             "iree": IREE.format(module=str(out / "mlp.iree.vmfb")), "torch": TORCH}
    for code in sides.values():  # warm the page cache and bytecode caches
        sample(code)
    results: dict[str, list] = {name: [] for name in sides}
    for _ in range(runs):
        for name, code in sides.items():
            results[name].append(sample(code))
    print(f"{'side':6s} {'wall ms':>8s} {'import':>8s} {'load':>8s} {'1st call':>8s}  result")
    for name, samples in results.items():
        wall = statistics.median(s[0] for s in samples) * 1e3
        phases = [statistics.median(s[1][i] for s in samples) * 1e3 for i in range(3)]
        print(f"{name:6s} {wall:8.1f} {phases[0]:8.1f} {phases[1]:8.1f} {phases[2]:8.1f}  "
              f"{samples[-1][2]}")


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(Path(sys.argv[2]))
    else:
        run(Path(sys.argv[2]), int(sys.argv[4]) if len(sys.argv) > 4 else 7)
