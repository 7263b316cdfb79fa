"""pyree-compile's llvm-cpu compile time against iree-compile's, model by model (issue 31 item 6).

    python bench/cpu/compile_time.py [--models resnet18,mobilenet_v2,...] [--rounds 3]
                                     [--flags "--pyree-llvmcpu-variants=none"] [--iree-compile PATH]
                                     [--work /tmp/pyree_compile_time] [--base-src OTHER/src]

Each model of tests/models/definitions.py (default: every one in ``MODELS`` and the zoo subset
of tests/models/test_model_zoo.py) is imported once with ``pyree.compiler.import_torch``, as the
model tests import it, and the MLIR is cached in --work. Then, in rounds, each model is compiled
by ``pyree-compile M.mlir -o M.vmfb [--flags]`` (default flags: the two x86-64 variants; its
bytecode compiled first, as an installed pyree's is) and by
``iree-compile M.mlir --iree-hal-target-backends=llvm-cpu --iree-llvmcpu-target-cpu=generic``,
one after the other, so that both see the same (shared, noisy) machine. Each compile's wall time
and CPU time (user + system of the process and every process it waited for) are recorded; a
side's figure is the median over rounds, and the ratio the median of pyree's over IREE's per round.
With ``--base-src`` a third side, another tree's pyree-compile (main's, for a before/after),
takes its turn in every round too. The 1-minute load average is printed with every round: on a
shared machine CPU time is the steadier figure, wall time is what a user waits.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "models"), str(ROOT / "bench")]
import iree_install  # noqa: E402

ZOO_SUBSET = ["squeezenet1_1", "shufflenet_v2_x0_5"]  # tests/models/test_model_zoo.py's SUBSET


def export(name: str, work: Path) -> Path:
    """The model's MLIR as the model tests import it (cached)."""
    path = work / f"{name}.mlir"
    if not path.exists():
        import definitions
        import torch
        from pyree.compiler import import_torch

        if name in definitions.MODELS:
            factory, _, _, function = definitions.MODELS[name]
            model, x = factory(), definitions.example_input(name)
        else:
            model, x, function = definitions.zoo_model(name), definitions.zoo_input(), "main"
        with torch.no_grad():
            path.write_text(import_torch(model, x, function_name=function))
    return path


def timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall s, CPU s) of running ``cmd``, its waited-for descendants included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _ratio(times: list, reference: list, k: int) -> float:
    return statistics.median(a[k] / b[k] for a, b in zip(times, reference))


def main():
    import definitions

    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default=",".join([*definitions.MODELS, *ZOO_SUBSET]))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flags", default="")
    parser.add_argument("--iree-compile", default="")
    parser.add_argument("--work", default="/tmp/pyree_compile_time")
    parser.add_argument("--base-src", default="",
                        help="also time pyree-compile from another tree's "
                             "packages/base-compiler/src (main's, say), interleaved")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    iree = iree_install.iree_compile(args.iree_compile)
    models = {name: export(name, work) for name in args.models.split(",")}
    # An installed pyree has its bytecode compiled; a source tree run with
    # PYTHONDONTWRITEBYTECODE would compile every module again in every timed process.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    pyree = lambda m: [sys.executable, "-m", "pyree.compiler.tools.compile", str(m), "-o",
                       str(work / "pyree.vmfb"), *args.flags.split()]
    sides = {"pyree": (pyree, env)}
    if args.base_src:
        sides["base"] = (pyree, {**env, "PYTHONPATH": os.pathsep.join(
            [str(Path(args.base_src).resolve()), env.get("PYTHONPATH", "")])})
    sides["iree"] = (lambda m: [iree, str(m), "-o", str(work / "iree.vmfb"),
                                "--iree-hal-target-backends=llvm-cpu",
                                "--iree-llvmcpu-target-cpu=generic"], env)
    results = {(name, side): [] for name in models for side in sides}
    for cmd, side_env in sides.values():  # untimed: bytecode written, files in the page cache
        timed(cmd(next(iter(models.values()))), side_env)
    for r in range(args.rounds):
        print(f"# round {r + 1}, load {os.getloadavg()[0]:.2f}", flush=True)
        for name, mlir in models.items():
            for side, (cmd, side_env) in sides.items():
                results[name, side].append(timed(cmd(mlir), side_env))
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} pyree flags {args.flags or '(default)'}; "
          f"wall s / CPU s, medians of {args.rounds} rounds; ratios: median over rounds of "
          "the side's over IREE's")
    others = [side for side in sides if side != "iree"]
    print("| model | " + " | ".join(f"{side} wall / CPU" for side in sides) + " | "
          + " | ".join(f"{side} / IREE wall, CPU" for side in others) + " |")
    print("|---|" + "---:|" * (len(sides) + len(others)))
    for name in models:
        iree_times = results[name, "iree"]
        cells = [" / ".join(f"{statistics.median(x[k] for x in results[name, side]):.2f}"
                            for k in (0, 1)) for side in sides]
        cells += [", ".join(f"{_ratio(results[name, side], iree_times, k):.2f}x" for k in (0, 1))
                  for side in others]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
