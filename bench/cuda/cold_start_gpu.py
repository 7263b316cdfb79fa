"""Process start to first result on the GPU (issue 13): pyree vs IREE (cuda, vulkan) vs PyTorch.

    python3 bench/cuda/cold_start_gpu.py build OUT_DIR     (build machine: compiles tests/data/mlp.mlir
                        with pyree for sm_90 + hopper Vulkan, iree-compile for sm_80 + ampere Vulkan)
    python3 bench/cuda/cold_start_gpu.py run OUT_DIR [--runs 7] [--drivers cuda,vulkan]
                        [--pyree-trees NAME=SITE,...] [--sides REGEX]  (GPU host)

Each API sample is a fresh process that imports numpy and its runtime, loads the module on the
GPU, calls it once on a 37x53 input and reads the result to numpy (PyTorch: builds the same
two-layer perceptron's shapes on the GPU and runs it once). Each CLI sample is one
``pyree-run-module`` / ``iree-run-module`` process (IREE's pip script, which execs its native
binary) with the same input. Each round runs every side once, in an order of its own (a fixed
seed), so no side always follows the same one. Medians, on CLOCK_MONOTONIC, of the time from
spawn to the first result (an API side's result in numpy, a CLI's result line reaching this
process through its stdout pipe) and to the process's exit, and each API side's in-process phases
(numpy's import, the runtime's import, load, first call). The exit adds the NVIDIA kernel
driver's teardown of the process's GPU context, ~100 ms on the H200 host that no user-space code
avoids (``bench/cuda/exit_cost.py``). ``--pyree-trees`` runs the pyree sides once per named
install (``base=/tmp/site-base``: that directory first on PYTHONPATH), in the same rounds, so a
change to the runtime is measured against its base in one run.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import iree_install  # noqa: E402

PYREE = """
import time; t0 = time.perf_counter()
import numpy as np; tn = time.perf_counter()
import pyree.runtime as rt; t1 = time.perf_counter()
m = rt.load_module({module!r}, device={driver!r}); t2 = time.perf_counter()
r = m["mlp"](np.full((37, 53), 0.5, np.float32)).to_host(); t3 = time.perf_counter()
print(float(r.astype(np.float64).sum()), tn - t0, t1 - tn, t2 - t1, t3 - t2, time.monotonic_ns())
"""

IREE = """
import time; t0 = time.perf_counter()
import numpy as np; tn = time.perf_counter()
import iree.runtime as ireert; t1 = time.perf_counter()
config = ireert.Config({driver!r})
ctx = ireert.SystemContext(config=config)
ctx.add_vm_module(ireert.VmModule.mmap(config.vm_instance, {module!r})); t2 = time.perf_counter()
r = ctx.modules.module["mlp"](np.full((37, 53), 0.5, np.float32)).to_host(); t3 = time.perf_counter()
print(float(r.astype(np.float64).sum()), tn - t0, t1 - tn, t2 - t1, t3 - t2, time.monotonic_ns())
"""

TORCH = """
import time; t0 = time.perf_counter()
import numpy as np; tn = time.perf_counter()
import torch; t1 = time.perf_counter()
model = torch.nn.Sequential(torch.nn.Linear(53, 29), torch.nn.ReLU(), torch.nn.Linear(29, 11)).cuda()
t2 = time.perf_counter()
with torch.no_grad():
    r = model(torch.from_numpy(np.full((37, 53), 0.5, np.float32)).cuda()).cpu().numpy()
t3 = time.perf_counter()
print(float(r.astype(np.float64).sum()), tn - t0, t1 - tn, t2 - t1, t3 - t2, time.monotonic_ns())
"""


IREE_FLAGS = {"cuda": ["--iree-hal-target-backends=cuda", "--iree-cuda-target=sm_80"],
              "vulkan": ["--iree-hal-target-backends=vulkan-spirv", "--iree-vulkan-target=ampere"]}
CLI_INPUT = "--input=37x53xf32=0.5"


def build(out: Path) -> None:
    from pyree.compiler import CompileOptions, compile_file
    out.mkdir(parents=True, exist_ok=True)
    mlp = ROOT / "tests" / "data" / "mlp.mlir"
    (out / "mlp.pyree.vmfb").write_bytes(compile_file(mlp, CompileOptions(
        target_backends=["cuda", "vulkan-spirv"], cuda_target="sm_90",
        vulkan_target="hopper-h100-linux")))
    for driver, flags in IREE_FLAGS.items():
        subprocess.run([iree_install.iree_compile(), str(mlp), *flags,
                        "-o", str(out / f"mlp.iree_{driver}.vmfb")], check=True)


def sample(command: list[str], env: dict | None = None) -> tuple[float, float, list[float], str]:
    """(seconds to the first result, seconds to exit, in-process phases, the result's text)."""
    t0 = time.monotonic_ns()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    lines, result_at, header = [], None, False
    for line in proc.stdout:  # a CLI's result: the line after "result[0]: hal.buffer_view"
        if header and result_at is None:
            result_at = time.monotonic_ns()
        header = line.startswith("result[0]")
        lines.append(line)
    errors = proc.stderr.read()
    if proc.wait():
        sys.exit(f"{command[:3]} failed: {errors[-1500:]}")
    end = time.monotonic_ns()
    if not command[-1].startswith("--input"):
        value, *phases, at = "".join(lines).split()
        return (int(at) - t0) / 1e9, (end - t0) / 1e9, [float(p) for p in phases], value
    return (result_at - t0) / 1e9, (end - t0) / 1e9, [], lines[-1].split()[-1]


def sides(out: Path, driver: str, trees: dict[str, str]) -> dict[str, tuple[list[str], dict | None]]:
    py, pyree_vmfb = sys.executable, str(out / "mlp.pyree.vmfb")
    iree_vmfb = str(out / f"mlp.iree_{driver}.vmfb")
    cli = ["--function=mlp", f"--device={driver}", CLI_INPUT]
    # IREE's pip console script, as its entry point runs it (pip --target installs have no bin/).
    iree_cli = [py, "-c", "import sys; from iree._runtime.scripts.iree_run_module.__main__ "
                "import main; sys.exit(main())"]
    pyree_api = [py, "-c", PYREE.format(module=pyree_vmfb, driver=driver)]
    pyree_cli = [py, "-m", "pyree.runtime.tools.run_module", f"--module={pyree_vmfb}", *cli]
    out: dict[str, tuple[list[str], dict | None]] = {}
    for tree, site in (trees or {"": ""}).items():
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (site, os.environ.get("PYTHONPATH", "")) if p)} if site else None
        label = f"pyree{'-' + tree if tree else ''} {driver}"
        out[f"{label} api"], out[f"{label} cli"] = (pyree_api, env), (pyree_cli, env)
    out[f"iree {driver} api"] = ([py, "-c", IREE.format(module=iree_vmfb, driver=driver)], None)
    out[f"iree {driver} cli"] = ([*iree_cli, f"--module={iree_vmfb}", *cli], None)
    return out


def run(out: Path, runs: int, drivers: list[str], trees: dict[str, str], only: str) -> None:
    commands = {"torch api": ([sys.executable, "-c", TORCH], None)}
    for driver in drivers:
        commands.update(sides(out, driver, trees))
    commands = {name: side for name, side in commands.items() if re.search(only, name)}
    for command, env in commands.values():  # warm the page cache and bytecode caches
        sample(command, env)
    results: dict[str, list] = {name: [] for name in commands}
    order = random.Random(13)
    for _ in range(runs):  # each round in a new order: no side always follows the same one
        for name in order.sample(list(commands), len(commands)):
            results[name].append(sample(*commands[name]))
    print(f"{'side':18s} {'result ms':>9s} {'exit ms':>8s} {'numpy':>8s} {'runtime':>8s} "
          f"{'load':>8s} {'1st call':>8s}  result")
    for name, samples in results.items():
        result, wall = (statistics.median(s[i] for s in samples) * 1e3 for i in (0, 1))
        phases = [statistics.median(s[2][i] for s in samples) * 1e3 for i in range(4)] \
            if samples[0][2] else []
        print(f"{name:18s} {result:9.1f} {wall:8.1f} "
              + "".join(f"{p:8.1f} " for p in phases).ljust(36) + f"  {samples[-1][3]}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["build", "run"])
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--drivers", default="cuda,vulkan")
    parser.add_argument("--sides", default="", help="REGEX: run only the sides it matches")
    parser.add_argument("--pyree-trees", default="",
                        help="NAME=SITE,...: run the pyree sides once per install")
    args = parser.parse_args()
    if args.mode == "build":
        build(args.out)
    else:
        trees = dict(item.split("=", 1) for item in args.pyree_trees.split(",") if item)
        run(args.out, args.runs, args.drivers.split(","), trees, args.sides)
