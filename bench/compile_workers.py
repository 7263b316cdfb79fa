"""Compile time with code generation on worker processes (issue 27): forked where the process runs
only pyree's threads, fresh interpreters where JAX's (or any other) thread pools run beside it.

    python bench/compile_workers.py MODEL.mlir [--target cuda] [--jax] [--runs 5]
                                    [--baseline-src DIR]

Each run is a fresh process that imports the compiler (and with --jax starts JAX's CPU backend,
whose thread pools then run), then times ``compile_str`` alone. --baseline-src DIR (a copy of
packages/base-compiler/src, e.g. from ``git archive``) alternates runs of that compiler with this
tree's. Prints each run's wall and CPU seconds (this process and its reaped workers), the
medians, the module's digest (one per tree when every run made the same bytes), and what a run
printed on stderr (a fork beside JAX's threads makes JAX warn).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import hashlib, json, resource, sys, time
path, target, jax = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
if jax:
    import jax.numpy as jnp
    jnp.ones(3).block_until_ready()
import pyree.compiler.pipeline as pipeline
from pyree.compiler.codegen import backend
backend(target)
source = open(path).read()

def cpu():
    return sum(u.ru_utime + u.ru_stime for u in map(resource.getrusage, (
        resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))

start, cpu_start = time.perf_counter(), cpu()
module = pipeline.compile_str(source, target_backends=[target])
seconds, cpu_seconds = time.perf_counter() - start, cpu() - cpu_start
print(json.dumps({"seconds": seconds, "cpu": cpu_seconds,
                  "sha256": hashlib.sha256(module).hexdigest()}))
"""


def run(source: str, target: str, jax: bool, compiler_src: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [compiler_src, env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", CHILD, source, target, "1" if jax else "0"],
                          capture_output=True, text=True, env=env, timeout=1800, check=False)
    if proc.returncode != 0:
        sys.exit(f"the compile failed:\n{proc.stderr}")
    return {**json.loads(proc.stdout), "stderr": proc.stderr.strip()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source", help="an MLIR file")
    p.add_argument("--target", default="cuda")
    p.add_argument("--jax", action="store_true", help="with JAX's thread pools running")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--baseline-src", help="another compiler's src folder to alternate with")
    args = p.parse_args()
    trees = {"this tree": str(ROOT / "packages/base-compiler/src")}
    if args.baseline_src:
        trees = {"baseline": args.baseline_src, **trees}
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(args.runs):  # alternating: the machine's load hits every tree alike
        for name, src in trees.items():
            runs[name].append(run(args.source, args.target, args.jax, src))
            last = runs[name][-1]
            print(f"{name:10s} {last['seconds']:6.2f} s, CPU {last['cpu']:6.2f} s", flush=True)
    for name, rs in runs.items():
        seconds, cpu = [r["seconds"] for r in rs], [r["cpu"] for r in rs]
        digests = sorted({r["sha256"][:12] for r in rs})
        stderr = sorted({r["stderr"] for r in rs if r["stderr"]})
        print(f"{name:10s} median {statistics.median(seconds):.2f} s (min {min(seconds):.2f}, "
              f"max {max(seconds):.2f}), CPU {statistics.median(cpu):.2f} s; {len(rs)} runs; "
              f"module sha256 {', '.join(digests)}"
              + "".join(f"\n  stderr: {line}" for text in stderr for line in text.splitlines()[:2]))


if __name__ == "__main__":
    main()
