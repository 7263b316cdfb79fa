"""Where an llvm-cpu compile's time goes, stage by stage (issue 31 item 6).

    python bench/cpu/compile_stages.py MODEL.mlir [--flags "..."] [--serial]

Runs one compile in this process and prints, for each progress stage, its wall time and CPU time
(this process's, plus that of the code-generation workers, counted once they are reaped). With
``--serial`` the code-generation jobs run here one after another, each timed by step (LLVM IR
construction and printing per variant, then parse + verify, optimize, emit per variant): the
CPU cost of each step, free of the worker pool's scheduling.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import time
from pathlib import Path


def _clock():
    t = os.times()
    return time.perf_counter(), time.process_time(), t.children_user + t.children_system


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mlir")
    parser.add_argument("--flags", default="")
    parser.add_argument("--serial", action="store_true")
    args = parser.parse_args()

    import pyree.compiler.codegen.llvm_cpu as cpu
    from pyree.compiler import CompileOptions, compile_str
    from pyree.compiler.codegen.llvm_cpu import object_file

    steps = collections.defaultdict(float)  # (step, variant) -> CPU seconds

    def timed(name, fn):
        def wrapper(*a, **k):
            t = time.process_time()
            result = fn(*a, **k)
            steps[name(*a, **k) if callable(name) else name] += time.process_time() - t
            return result
        return wrapper

    if args.serial:
        cpu.map_jobs = lambda fn, items, done=None: [
            (fn(item), done(i) if done else None)[0] for i, item in enumerate(items)]
        cpu.lower_part = timed(lambda kernels, target, count, p: ("lower", target.cpu),
                               cpu.lower_part)
        cpu.emit_worker_loop = timed("worker loop", cpu.emit_worker_loop)
        from llvmlite import ir
        ir.Module.__str__ = timed("LLVM IR text", ir.Module.__str__)

        object_file.parse = timed(lambda text, target: ("parse+verify", target.cpu),
                                  object_file.parse)
        object_file.run_passes = timed(lambda module, target: ("optimize", target.cpu),
                                       object_file.run_passes)
        cpu.compile_object = timed(lambda text, target, listings=False: ("parse+optimize+emit", target.cpu),
                                   cpu.compile_object)

    text = Path(args.mlir).read_text()
    marks = []
    options = CompileOptions(progress=lambda line: marks.append((line, _clock())))
    compile_str(text, options, target_backends=["llvm-cpu"], extra_args=args.flags.split())
    marks.append(("end", _clock()))
    marks = [m for m in marks if not re.search(r"\d+/\d+ kernels", m[0])]
    w0, p0, c0 = marks[0][1]
    print(f"load {os.getloadavg()[0]:.2f}")
    for (line, (w, p, c)), (_, (w1, p1, c1)) in zip(marks, marks[1:]):
        print(f"{w - w0:6.2f}s  wall {w1 - w:6.2f}  cpu {p1 - p:6.2f} + workers {c1 - c:6.2f}  {line}")
    print(f"total wall {marks[-1][1][0] - w0:.2f}  cpu {marks[-1][1][1] - p0:.2f} + workers "
          f"{marks[-1][1][2] - c0:.2f}")
    for key, seconds in sorted(steps.items(), key=str):
        print(f"  {key}: {seconds:.2f} s")
    for cpu_name in {key[1] for key in steps if isinstance(key, tuple)}:
        emit = steps["parse+optimize+emit", cpu_name] - steps["parse+verify", cpu_name] - \
            steps["optimize", cpu_name]
        print(f"  ('emit', '{cpu_name}'): {emit:.2f} s")


if __name__ == "__main__":
    main()
