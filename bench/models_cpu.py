"""Whole CNNs on the CPU: pyree (llvm-cpu, local-task) against IREE's llvm-cpu and onnxruntime.

    python bench/models_cpu.py [--models mobilenet_v2,resnet18] [--rounds 7]
                               [--iree-python PYTHON] [--work /tmp/pyree_models_cpu]
    python bench/models_cpu.py --profile [--top 25] [--cpu host]   # pyree's kernels one by one instead

Each model comes from tests/models/definitions.py (batch 1, fp32, fixed seed) and is exported once
to linalg-on-tensors MLIR with torch_mlir.fx.export_and_import (cached in --work). pyree and IREE
compile that same file (``iree-compile --iree-hal-target-backends=llvm-cpu
--iree-llvmcpu-target-cpu=host``; IREE (bench/iree_install.py finds it) runs in a worker subprocess that
times its own calls); onnxruntime runs the torch.onnx export of the model. Every output is checked
against PyTorch (relative error). The sides take turns in rounds, so that all three see the same
(shared, noisy) machine: in a round each side runs WARM untimed calls and then TIMED timed ones
back to back, with its weights in cache as in a steady serving loop (interleaving single calls
measured every side 2-3x slower, its weights evicted by the other two). A side's time is the
median of its timed calls, with a device-resident input and the result read back to the host; a
ratio is the median over rounds of (other side's round median / pyree's): above 1, pyree is faster.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "models"), str(ROOT / "bench")]
import iree_install  # noqa: E402

GAP_S = 0.1  # onnxruntime's and IREE's worker threads spin for a while after a call
WARM, TIMED = 3, 5

# Runs in IREE's venv: compiles, loads on local-task, checks in, then times one call per "run".
IREE_WORKER = r"""
import sys, time, subprocess, numpy as np
import iree.runtime as rt
mlir, vmfb, inp, iree_compile = sys.argv[1:5]
t0 = time.perf_counter()
subprocess.run([iree_compile, mlir, "-o", vmfb,
                "--iree-hal-target-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host"], check=True)
compile_s = time.perf_counter() - t0
config = rt.Config("local-task")
ctx = rt.SystemContext(config=config)
ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, open(vmfb, "rb").read()))
fn = ctx.modules.module["main"]
x = rt.asdevicearray(config.device, np.load(inp))
np.save(inp + ".iree_out.npy", np.asarray(fn(x).to_host()))
print(f"ready {compile_s}", flush=True)
for line in sys.stdin:
    times = []
    for _ in range(int(line)):
        t0 = time.perf_counter()
        fn(x).to_host()
        times.append((time.perf_counter() - t0) * 1e3)
    print(*times, flush=True)
"""


def call_times(call, n: int) -> list[float]:
    """Milliseconds of each of ``n`` calls of ``call``, one after another."""
    out = []
    for _ in range(n):
        t = time.perf_counter()
        call()
        out.append((time.perf_counter() - t) * 1e3)
    return out

def relative_error(got, ref) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if got.shape != ref.shape or not np.all(np.isfinite(got)):
        return float("inf")
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def export(name: str, work: Path):
    """(MLIR path, ONNX path, input, PyTorch output) for model ``name``."""
    import definitions
    import torch

    factory, _, _, func = definitions.MODELS[name]
    model, x = factory(), definitions.example_input(name)
    with torch.no_grad():
        ref = model(x).numpy()
    mlir, onnx = work / f"{name}.mlir", work / f"{name}.onnx"
    if not mlir.exists():
        from torch_mlir import fx
        mlir.write_text(str(fx.export_and_import(model, x, output_type="linalg-on-tensors",
                                                 func_name=func)))
    if not onnx.exists():
        torch.onnx.export(model, (x,), str(onnx), dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"])
    return mlir, onnx, x.numpy(), ref


class Iree:
    def __init__(self, python: str, mlir: Path, x: np.ndarray, work: Path):
        inp = work / f"{mlir.stem}.input.npy"
        np.save(inp, x)
        self.proc = subprocess.Popen(
            [python, "-c", IREE_WORKER, str(mlir), str(work / f"{mlir.stem}.iree.vmfb"), str(inp),
             iree_install.iree_compile()],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().split()
        if not line or line[0] != "ready":
            raise RuntimeError("IREE worker failed")
        self.compile_s = float(line[1])
        self.output = np.load(str(inp) + ".iree_out.npy")

    def __call__(self, calls: int) -> list[float]:
        self.proc.stdin.write(f"{calls}\n")
        self.proc.stdin.flush()
        return [float(t) for t in self.proc.stdout.readline().split()]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def bench(name: str, args, work: Path) -> dict:
    import onnxruntime
    import pyree.runtime as rt
    from pyree.compiler import CompileOptions, compile_file

    mlir, onnx, x, ref = export(name, work)
    t0 = time.perf_counter()
    vmfb = compile_file(mlir, CompileOptions(target_backends=["llvm-cpu"], llvmcpu_target_cpu="host"))
    pyree_compile_s = time.perf_counter() - t0
    module = rt.load_module(vmfb, device="local-task")
    fn = module["main"]
    x_dev = rt.asdevicearray(module.device, x)
    ours_out = fn(x_dev).to_host()

    session = onnxruntime.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
    ort_out = session.run(None, {"x": x})[0]
    iree = Iree(iree_install.iree_python(args.iree_python), mlir, x, work)

    def timed(call):
        return functools.partial(call_times, call)

    sides = {"pyree": timed(lambda: fn(x_dev).to_host()), "iree": iree,
             "onnxruntime": timed(lambda: session.run(None, {"x": x}))}
    times = {side: [] for side in sides}
    rounds = {side: [] for side in sides}
    for _ in range(args.rounds):
        for side, calls in sides.items():
            time.sleep(GAP_S)
            calls(WARM)
            t = calls(TIMED)
            times[side] += t
            rounds[side].append(statistics.median(t))
    iree.close()
    mine = rounds["pyree"]
    return {
        "model": name,
        "ms": {k: statistics.median(v) for k, v in times.items()},
        "pyree_speed_vs": {k: statistics.median(t / m for m, t in zip(mine, v))
                           for k, v in rounds.items() if k != "pyree"},
        "compile_s": {"pyree": pyree_compile_s, "iree": iree.compile_s},
        "relative_error": {"pyree": relative_error(ours_out, ref), "iree": relative_error(iree.output, ref),
                           "onnxruntime": relative_error(ort_out, ref)},
    }


def profile(name: str, work: Path, top: int, cpu: str = "host") -> None:
    """Each distinct kernel of the fused program alone, one thread, best of 5, on random data
    (tests/codegen/llvm_cpu's ctypes harness): where the time goes, without the runtime."""
    import collections

    sys.path.insert(0, str(ROOT / "tests" / "codegen" / "llvm_cpu"))
    from llvmcpu_harness import Compiled
    from pyree.compiler.codegen.common.normalize import normalize
    from pyree.compiler.flow.convolution import rewrite_convolutions
    from pyree.compiler.flow.kernels import KernelTable, outline
    from pyree.compiler.flow.passes import form_dispatch_regions
    from pyree.compiler.input import import_mlir
    from pyree.compiler.kernel import DTYPES
    from pyree.compiler.tensor_program import Generic

    mlir = export(name, work)[0]
    function = form_dispatch_regions(rewrite_convolutions(import_mlir(mlir.read_text()).functions[0]))
    table, uses = KernelTable(), []
    for op in function.ops:
        if isinstance(op, Generic):
            uses.append(table.add(outline(op, f"{op.origin.split('+')[0]} {op.loop_ranges}")))
    compiled = Compiled(table.kernels, cpu)
    rng = np.random.default_rng(0)
    best = {}
    for k, kernel in enumerate(table.kernels):
        buffers = [rng.standard_normal(b.shape).astype(DTYPES[b.dtype]) for b in kernel.bindings]
        times = []
        for _ in range(6):
            t = time.perf_counter()
            compiled.call(k, buffers, threads=1)
            times.append(time.perf_counter() - t)
        best[k] = min(times[1:]) * 1e3
    total = collections.Counter()
    for k in uses:
        total[k] += best[k]
    print(f"{name} ({cpu}): {len(uses)} dispatches, {len(table.kernels)} kernels, "
          f"{sum(total.values()):.2f} ms on one thread")
    for k, ms in total.most_common(top):
        kernel = table.kernels[k]
        print(f"  {ms:8.3f} ms  x{uses.count(k):<3} {kernel.name[:60]:60} "
              f"normalized {normalize(kernel).loop_ranges}, {compiled.export(k).workgroupCount} workgroups")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="mobilenet_v2,resnet18")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iree-python", default="",
                        help="a Python with iree.runtime (default: $IREE_PYTHON, else this one)")
    parser.add_argument("--work", default="/tmp/pyree_models_cpu")
    parser.add_argument("--json")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--cpu", default="host",
                        help="--profile: the CPU to compile the kernels for (host, x86-64-v3, ...)")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.profile:
        for name in args.models.split(","):
            profile(name, work, args.top, args.cpu)
        return
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {platform.node()} {platform.processor() or platform.machine()}"
          f" cores={os.cpu_count()} rounds={args.rounds} x {TIMED} timed calls")
    rows = [bench(name, args, work) for name in args.models.split(",")]
    print(f"{'model':14} {'pyree ms':>9} {'IREE ms':>9} {'ORT ms':>9} {'vs IREE':>8} {'vs ORT':>8}"
          f" {'pyree compile s':>16} {'IREE compile s':>15}  rel. error pyree/IREE/ORT")
    for r in rows:
        ms, sp, cs, err = r["ms"], r["pyree_speed_vs"], r["compile_s"], r["relative_error"]
        print(f"{r['model']:14} {ms['pyree']:9.2f} {ms['iree']:9.2f} {ms['onnxruntime']:9.2f}"
              f" {sp['iree']:7.2f}x {sp['onnxruntime']:7.2f}x {cs['pyree']:16.1f} {cs['iree']:15.1f}"
              f"  {err['pyree']:.1e}/{err['iree']:.1e}/{err['onnxruntime']:.1e}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
