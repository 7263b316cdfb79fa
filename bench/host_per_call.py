"""The runtime's host cost per call of a small static function (issue 11): microseconds per call
with calls queued back to back (each result dropped as the next is made, one wait at the end, as
bench/gpu_timing.py's pyree_ms times them) and per call+wait, on device-resident inputs.

    python bench/host_per_call.py [--devices local-sync,local-task] [--module M.vmfb --function F]
                                  [--baseline-src DIR] [--profile] [--sized]

Without --module a 1x4 f32 add is compiled for llvm-cpu (the compiler must be installed); with
it, inputs are random arrays of the function's argument types, so a module compiled for cuda
times the CUDA driver's path the same way (``--devices cuda``). Each number is the median over
--rounds rounds of --calls calls, queued and waited rounds alternating. --baseline-src DIR (a
copy of packages/base-runtime/src, e.g. from ``git archive``) runs the same measurement with that
runtime in a subprocess, alternating with this tree's round by round, and prints both.

--sized times a function with run-time sizes against its static twin (issue 29: within 10 µs):
tests/runtime/module_factory.py's ``scale`` (x: ?xf32) at n = 4, a size it has recorded, and
``scale4`` (x: 4xf32), the same kernel with static sizes (gcc and pyree.compiler's module
writer build the module). A dynamic dim of a --module function's argument takes --dim.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ADD = """func.func @add(%a: tensor<1x4xf32>, %b: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %e = tensor.empty() : tensor<1x4xf32>
  %r = linalg.add ins(%a, %b : tensor<1x4xf32>, tensor<1x4xf32>) outs(%e : tensor<1x4xf32>) -> tensor<1x4xf32>
  return %r : tensor<1x4xf32>
}"""


def measure(module_path: str, function: str, device: str, calls: int, rounds: int,
            profile: bool, dim: int = 4) -> dict[str, float]:
    """Median µs per call, queued and waited, of ``function`` on device-resident inputs (each
    dynamic dim ``dim``)."""
    import numpy as np
    import pyree.runtime as rt

    with open(module_path, "rb") as f:
        module = rt.load_module(f.read(), device=device)
    fn = module[function]
    rng = np.random.default_rng(0)
    inputs = [rt.asdevicearray(module.device, rng.standard_normal(
        tuple(dim if d < 0 else d for d in t.shape)).astype(t.dtype)) for t in fn.argument_types]
    for _ in range(max(200, calls // 4)):  # warm: the pool's buffers, the driver's tables
        fn(*inputs).wait()
    queued, waited = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            r = fn(*inputs)
        r.wait()
        queued.append((time.perf_counter() - t0) / calls * 1e6)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(*inputs).wait()
        waited.append((time.perf_counter() - t0) / calls * 1e6)
    if profile:
        import cProfile
        import pstats

        p = cProfile.Profile()
        p.enable()
        for _ in range(calls):
            r = fn(*inputs)
        r.wait()
        p.disable()
        pstats.Stats(p, stream=sys.stderr).sort_stats("tottime").print_stats(20)
    return {"queued_us": statistics.median(queued), "waited_us": statistics.median(waited)}


def _child(src: str | None, module: str, function: str, device: str, calls: int,
           rounds: int) -> dict[str, float]:
    """One measurement in a fresh process, with the runtime at ``src`` (None: this tree's)."""
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, __file__, "--child", "--module", module,
                          "--function", function, "--devices", device, "--calls", str(calls),
                          "--rounds", str(rounds)],
                         env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def sized_module() -> str:
    """tests/runtime/module_factory.py's module of functions with run-time sizes, as a file."""
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from runtime.module_factory import compile_kernels, sized_builder

    folder = Path(tempfile.mkdtemp())
    path = folder / "sized.vmfb"
    path.write_bytes(sized_builder(compile_kernels(folder)).finish())
    return str(path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", default="local-sync,local-task")
    p.add_argument("--module", help="a .vmfb; default: a 1x4 f32 add compiled for llvm-cpu")
    p.add_argument("--function", default="add")
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--baseline-src", help="another runtime's src folder to alternate with")
    p.add_argument("--repeats", type=int, default=5,
                   help="alternations with --baseline-src or of --sized's two functions")
    p.add_argument("--profile", action="store_true", help="cProfile one queued round")
    p.add_argument("--dim", type=int, default=4, help="the size of a dynamic dim")
    p.add_argument("--sized", action="store_true",
                   help="a function with run-time sizes against its static twin")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(measure(args.module, args.function, args.devices, args.calls,
                                 args.rounds, False, args.dim)))
        return
    if args.sized:
        module = sized_module()
        for device in args.devices.split(","):
            runs: dict[str, list[dict]] = {"static 4xf32": [], "dynamic ?xf32, n = 4": []}
            for _ in range(args.repeats):  # alternating: the machine's load hits both
                for name, label in (("scale4", "static 4xf32"), ("scale", "dynamic ?xf32, n = 4")):
                    runs[label].append(measure(module, name, device, args.calls, args.rounds,
                                               args.profile, 4))
            for label, rs in runs.items():
                q = statistics.median(r["queued_us"] for r in rs)
                w = statistics.median(r["waited_us"] for r in rs)
                print(f"{device:12s} {label:22s} queued {q:7.2f} us/call   call+wait {w:7.2f} "
                      f"us/call   (medians of {len(rs)} runs)")
        return
    module = args.module
    if module is None:
        from pyree.compiler import compile_str

        module = os.path.join(tempfile.mkdtemp(), "add.vmfb")
        compile_str(ADD, target_backends=["llvm-cpu"], output_file=module)
    for device in args.devices.split(","):
        if not args.baseline_src:
            r = measure(module, args.function, device, args.calls, args.rounds, args.profile)
            print(f"{device:12s} queued {r['queued_us']:7.2f} us/call   "
                  f"call+wait {r['waited_us']:7.2f} us/call")
            continue
        runs: dict[str, list[dict]] = {"baseline": [], "this tree": []}
        for _ in range(args.repeats):  # alternating processes: the machine's load hits both
            runs["baseline"].append(_child(args.baseline_src, module, args.function, device,
                                           args.calls, args.rounds))
            runs["this tree"].append(_child(None, module, args.function, device, args.calls,
                                            args.rounds))
        for name, rs in runs.items():
            q = statistics.median(r["queued_us"] for r in rs)
            w = statistics.median(r["waited_us"] for r in rs)
            print(f"{device:12s} {name:10s} queued {q:7.2f} us/call   call+wait {w:7.2f} us/call"
                  f"   (medians of {len(rs)} processes)")


if __name__ == "__main__":
    main()
