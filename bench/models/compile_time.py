"""Compile time of a model for one target, pyree-compile against iree-compile, alternating runs:

    python3 bench/models/compile_time.py [MODEL] [--target cuda] [--runs 3]

The model comes from tests/models/definitions.py through pyree's torch importer (both compilers
read the same linalg MLIR file; importing is not timed). IREE_COMPILE names iree-compile
(default: the one on PATH, bench/iree_install.py). Prints each run's wall time and the medians.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "models"), str(ROOT / "bench")]
import definitions  # noqa: E402
import iree_install  # noqa: E402

PYREE = {"cuda": ["--pyree-hal-target-backends=cuda", "--pyree-cuda-target=sm_80"],
         "vulkan-spirv": ["--pyree-hal-target-backends=vulkan-spirv"],
         "llvm-cpu": ["--pyree-hal-target-backends=llvm-cpu"]}
IREE = {"cuda": ["--iree-hal-target-backends=cuda", "--iree-cuda-target=sm_80"],
        "vulkan-spirv": ["--iree-hal-target-backends=vulkan-spirv"],
        "llvm-cpu": ["--iree-hal-target-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host"]}


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model", nargs="?", default="mobilenet_v2")
    p.add_argument("--target", default="cuda", choices=sorted(PYREE))
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    from pyree.compiler import import_torch
    factory, _, _, function = definitions.MODELS[args.model]
    iree_compile = iree_install.iree_compile()
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / f"{args.model}.mlir"
        source.write_text(import_torch(factory(), definitions.example_input(args.model),
                                       function_name=function))
        pyree_compile = [sys.executable, "-m", "pyree.compiler.tools.compile"]
        times = {"pyree": [], "iree": []}
        for _ in range(args.runs):
            times["pyree"].append(timed([*pyree_compile, str(source), "-o", f"{tmp}/p.vmfb",
                                         *PYREE[args.target]]))
            times["iree"].append(timed([iree_compile, str(source), "-o", f"{tmp}/i.vmfb",
                                        *IREE[args.target]]))
            print(f"pyree {times['pyree'][-1]:.2f} s   iree {times['iree'][-1]:.2f} s", flush=True)
    pm, im = statistics.median(times["pyree"]), statistics.median(times["iree"])
    print(f"{args.model} for {args.target}: pyree {pm:.2f} s, iree-compile {im:.2f} s "
          f"(median of {args.runs}; pyree {im / pm:.2f}x faster)")


if __name__ == "__main__":
    main()
