"""Cold start and peak memory of whole processes: pyree vs IREE on local-task (issue 13).

    python bench/cold_start.py [--runs 11] [--iree-python PYTHON] [--importtime]

Each run is a fresh process that returns one result of tests/data/mlp.mlir (compiled once per
side for llvm-cpu, host CPU): (a) the Python API -- import numpy and the runtime, load the module
on local-task, one call, result to numpy; (b) the CLI -- ``pyree-run-module`` vs
``iree-run-module`` (IREE's pip console script, which execs its native binary; the native binary
alone is reported too), the input as text (``--input=37x53xf32=...``: pyree imports no numpy)
and (c) as a .npy file (read without numpy too: tools/npy.py). Runs alternate pyree and IREE so both
see the same (noisy) machine.
Children run with compiled bytecode, as an installed package does (a cache under a temporary
PYTHONPYCACHEPREFIX, filled by a warm-up run of each; PYTHONDONTWRITEBYTECODE is dropped for
them). Wall time is from spawn to exit; peak RSS is GNU time's maximum resident set size (the
largest process of the child's tree). Medians are printed, with the API children's own phase times.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from iree_install import iree_python
from pyree.runtime import format_array

ROOT = Path(__file__).resolve().parent.parent
MLP = ROOT / "tests" / "data" / "mlp.mlir"
TIME = "/usr/bin/time"  # GNU time
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

PYREE_API = """
import time; t0 = time.perf_counter()
import numpy as np; t1 = time.perf_counter()
import pyree.runtime as rt; t2 = time.perf_counter()
m = rt.load_module({module!r}, device="local-task"); t3 = time.perf_counter()
r = m["mlp"](np.load({x!r})).to_host(); t4 = time.perf_counter()
print(float(r.astype(np.float64).sum()), t2 - t1, t3 - t2, t4 - t3)
"""

IREE_API = """
import time; t0 = time.perf_counter()
import numpy as np; t1 = time.perf_counter()
import iree.runtime as ireert; t2 = time.perf_counter()
config = ireert.Config("local-task")
ctx = ireert.SystemContext(config=config)
ctx.add_vm_module(ireert.VmModule.mmap(config.vm_instance, {module!r})); t3 = time.perf_counter()
r = ctx.modules.module["mlp"](np.load({x!r})).to_host(); t4 = time.perf_counter()
print(float(r.astype(np.float64).sum()), t2 - t1, t3 - t2, t4 - t3)
"""


def run_once(argv: list[str]) -> tuple[float, float, str]:
    """(wall s, peak RSS MB, stdout) of one process. ``/usr/bin/time`` reports the peak RSS: a
    child's ru_maxrss starts at its parent's RSS at fork, so this (numpy-importing) script's own
    size would leak into small children's numbers."""
    with tempfile.TemporaryFile("w+") as out, tempfile.NamedTemporaryFile("r") as rss:
        start = time.perf_counter()
        proc = subprocess.run([TIME, "-f", "%M", "-o", rss.name, *argv], stdout=out,
                              stderr=subprocess.PIPE, text=True, env=ENV)
        wall = time.perf_counter() - start
        if proc.returncode:
            raise SystemExit(f"{argv[:3]}... failed ({proc.returncode}): {proc.stderr}")
        out.seek(0)
        return wall, int(rss.read().split()[-1]) / 1024, out.read()


def compile_modules(folder: Path, iree_bin: Path) -> tuple[Path, Path]:
    pyree, iree = folder / "mlp_pyree.vmfb", folder / "mlp_iree.vmfb"
    subprocess.run([str(Path(sys.executable).parent / "pyree-compile"),
                    "--pyree-hal-target-backends=llvm-cpu", str(MLP), "-o", str(pyree)], check=True)
    subprocess.run([str(iree_bin / "iree-compile"), "--iree-hal-target-backends=llvm-cpu",
                    "--iree-llvmcpu-target-cpu=host", str(MLP), "-o", str(iree)], check=True,
                   stderr=subprocess.DEVNULL)
    return pyree, iree


def importtime(python: str, args: list[str], top: int = 14) -> None:
    """The slowest imports (cumulative) of ``python args...`` in a fresh interpreter (the second
    one: the first fills the bytecode cache); the total is that of the top-level imports."""
    for _ in range(2):
        proc = subprocess.run([python, "-X", "importtime", *args],
                              capture_output=True, text=True, check=True, env=ENV)
    rows, total = [], 0
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "self" not in line:
            own, cumulative, name = line[12:].split("|")
            rows.append((int(cumulative), int(own), name.strip()))
            total += int(cumulative) if not name[1:].startswith(" ") else 0
    shown = " ".join(a if len(a) < 40 else a[:37] + "..." for a in args)
    print(f"\n# python -X importtime {shown}: {total / 1e3:.1f} ms of imports")
    for cumulative, own, name in sorted(rows, reverse=True)[:top]:
        print(f"  {cumulative / 1e3:7.1f} ms cumulative {own / 1e3:6.1f} ms self  {name}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--iree-python", default="",
                        help="a Python with iree.runtime (default: $IREE_PYTHON, else this one)")
    parser.add_argument("--importtime", action="store_true",
                        help="also show where `import pyree.runtime` and the CLI (text input) "
                        "spend their import time")
    args = parser.parse_args()
    args.iree_python = iree_python(args.iree_python)
    iree_bin = Path(args.iree_python).parent
    native = Path(subprocess.run([args.iree_python, "-c",
                                  "from iree._runtime import libs; print(libs.library_path)"],
                                 capture_output=True, text=True, check=True).stdout.strip())
    bin_dir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ENV["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
        pyree_vmfb, iree_vmfb = compile_modules(folder, iree_bin)
        x = folder / "x.npy"
        x_value = np.random.default_rng(0).standard_normal((37, 53)).astype(np.float32)
        np.save(x, x_value)
        text = format_array(x_value, max_elements=x_value.size)
        cli = {"cli": ["--device=local-task", "--function=mlp", f"--input={text}"],
               "cli .npy": ["--device=local-task", "--function=mlp", f"--input=@{x}"]}
        cases = {
            "api": {
                "pyree": [sys.executable, "-c", PYREE_API.format(module=str(pyree_vmfb), x=str(x))],
                "iree": [args.iree_python, "-c", IREE_API.format(module=str(iree_vmfb), x=str(x))],
            },
            **{case: {
                "pyree": [str(bin_dir / "pyree-run-module"), f"--module={pyree_vmfb}", *flags],
                "iree": [str(iree_bin / "iree-run-module"), f"--module={iree_vmfb}", *flags],
                "iree native": [str(native / "iree-run-module"), f"--module={iree_vmfb}", *flags],
            } for case, flags in cli.items()},
        }
        print(f"# {time.strftime('%Y-%m-%d %H:%M')} {platform.node()} "
              f"{platform.processor() or platform.machine()} cores={os.cpu_count()} "
              f"python={platform.python_version()} runs={args.runs} (medians, alternating)")
        for case, sides in cases.items():
            for argv in sides.values():
                run_once(argv)  # warm the page cache and .pyc files
            samples: dict[str, list] = {side: [] for side in sides}
            for _ in range(args.runs):
                for side, argv in sides.items():
                    samples[side].append(run_once(argv))
            sums = {side: {s[2].split()[0] if case == "api" else "" for s in runs}
                    for side, runs in samples.items()}
            if case == "api":
                print(f"\n## (a) Python API, checksum of the result: {sums}")
            else:
                print("\n## (b) CLI, text input" if case == "cli" else "\n## (c) CLI, .npy input")
            reference = samples["iree"]
            iree_wall = statistics.median(s[0] for s in reference)
            iree_rss = statistics.median(s[1] for s in reference)
            for side, runs in samples.items():
                wall = statistics.median(s[0] for s in runs)
                rss = statistics.median(s[1] for s in runs)
                line = (f"  {side:<12} wall {wall * 1e3:7.1f} ms ({wall / iree_wall:4.2f}x IREE)   "
                        f"peak RSS {rss:6.1f} MB ({rss / iree_rss:4.2f}x IREE)")
                if case == "api":
                    phases = [statistics.median(float(s[2].split()[i]) for s in runs)
                              for i in (1, 2, 3)]
                    line += ("   import {:.1f} ms, load {:.1f} ms, first call {:.1f} ms"
                             .format(*(p * 1e3 for p in phases)))
                print(line)
        if args.importtime:
            importtime(sys.executable, ["-c", "import pyree.runtime"])
            importtime(sys.executable, ["-m", "pyree.runtime.tools.run_module",
                                        f"--module={pyree_vmfb}", *cli["cli"]])


if __name__ == "__main__":
    main()
