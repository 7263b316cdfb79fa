"""The llvm-cpu default against explicit CPUs and onnxruntime, on whole CNNs (issue 31, item 5).

    python bench/cpu/variants.py [--models resnet18,mobilenet_v2] [--rounds 7]
                                 [--configs default,generic,host] [--work /tmp/pyree_models_cpu]

Each config is a pyree compile of the same MLIR (bench/models_cpu.py exports it from
tests/models/definitions.py): ``default`` with no CPU flag (the module's x86-64 variants, the
runtime picking one at load), ``generic`` (``--iree-llvmcpu-target-cpu=generic``: baseline
x86-64 alone), ``host``, ``v4`` (``--pyree-llvmcpu-variants=generic,x86-64-v3,x86-64-v4``: the
default's variants plus AVX-512 code, which the runtime loads where the host has AVX-512), or
any other LLVM CPU name given as ``--iree-llvmcpu-target-cpu``, or ``@PATH``: a module compiled
beforehand (``{model}`` in PATH stands for the model's name), to compare code versions in one
process (compile each with its own checkout, ``pyree-compile M.mlir -o PATH``). For each it prints the compile
time and module size, then times every config and onnxruntime in interleaved rounds on
local-task, as bench/models_cpu.py does (WARM untimed then TIMED timed calls per side per round;
a side's time is the median of its timed calls; ratios are medians over rounds). Outputs are
checked against PyTorch.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "bench")]
from models_cpu import GAP_S, TIMED, WARM, call_times, export, relative_error  # noqa: E402

# ``v4``: the default variants plus x86-64-v4 (AVX-512), the opt-in of docs/FLAGS.md.
V4_VARIANTS = "generic,x86-64-v3,x86-64-v4"


def _call(fn, x_dev):
    return fn(x_dev).to_host()


def compile_config(mlir: Path, config: str) -> tuple[bytes, float]:
    from pyree.compiler import compile_file

    if config == "default":
        flags = []
    elif config == "v4":
        flags = [f"--pyree-llvmcpu-variants={V4_VARIANTS}"]
    else:
        flags = [f"--iree-llvmcpu-target-cpu={config}"]
    t0 = time.perf_counter()
    vmfb = compile_file(mlir, target_backends=["llvm-cpu"], extra_args=flags)
    return vmfb, time.perf_counter() - t0


def bench(name: str, configs: list[str], rounds_count: int, work: Path) -> None:
    import onnxruntime
    import pyree.runtime as rt

    mlir, onnx, x, ref = export(name, work)
    sides, errors = {}, {}
    for config in configs:
        if config.startswith("@"):
            vmfb, seconds = Path(config[1:].format(model=name)).read_bytes(), 0.0
        else:
            vmfb, seconds = compile_config(mlir, config)
        module = rt.load_module(vmfb, device="local-task")
        fn, x_dev = module["main"], rt.asdevicearray(module.device, x)
        errors[config] = relative_error(fn(x_dev).to_host(), ref)
        print(f"{name} {config:10} compile {seconds:6.1f} s, module {len(vmfb) / 1e6:6.2f} MB, "
              f"relative error {errors[config]:.1e}", flush=True)
        sides[config] = functools.partial(_call, fn, x_dev)
    session = onnxruntime.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
    errors["onnxruntime"] = relative_error(session.run(None, {"x": x})[0], ref)
    sides["onnxruntime"] = lambda: session.run(None, {"x": x})

    times = {side: [] for side in sides}
    rounds = {side: [] for side in sides}
    for _ in range(rounds_count):
        for side, call in sides.items():
            time.sleep(GAP_S)
            call_times(call, WARM)
            t = call_times(call, TIMED)
            times[side] += t
            rounds[side].append(statistics.median(t))
    ort = rounds["onnxruntime"]
    for side in sides:
        ratio = statistics.median(m / o for m, o in zip(rounds[side], ort))
        print(f"{name} {side:12} {statistics.median(times[side]):8.2f} ms  "
              f"{ratio:5.2f}x onnxruntime's time")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="resnet18,mobilenet_v2")
    parser.add_argument("--configs", default="default,generic,host")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--work", default="/tmp/pyree_models_cpu")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {platform.node()} "
          f"{platform.processor() or platform.machine()} cores={os.cpu_count()} "
          f"load={os.getloadavg()[0]:.2f} rounds={args.rounds} x {TIMED} timed calls")
    for name in args.models.split(","):
        bench(name, args.configs.split(","), args.rounds, work)


if __name__ == "__main__":
    main()
