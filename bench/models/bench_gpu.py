"""Whole models on a GPU host: pyree (cuda, vulkan) and IREE against PyTorch, in one process.

    python3 bench/models/bench_gpu.py BUILD_DIR [--drivers cuda,vulkan] [--json OUT.json]

BUILD_DIR comes from build_modules.py. Each model is rebuilt here from tests/models/definitions.py
(same seed; its weights checksum must match the manifest's, else the run stops; ``<model>_f16``
entries are converted with ``.half()``, and PyTorch then runs in f16 too), moved to the GPU
with TF32 off, and given one fresh random input. Every module found for it (``<model>.vmfb`` for
pyree, ``<model>.iree_<driver>.vmfb`` for IREE) is checked against PyTorch's output (relative
error, fp32 limit 1e-4) and timed the same way for both compilers: median wall time of a call
with a device-resident input, result read back to the host; for pyree also the time per call with
calls queued back to back (the host's work overlapping the GPU's, as a stream of requests runs;
the measure closest to a CUDA graph replay timed by events). Each module runs in its own process
under a time limit, so a hang is reported as such and the run goes on. PyTorch: eager and
CUDA-graph replay, timed with CUDA events. Kernels per model: pyree's dispatch commands in the
function (the module says), PyTorch's CUDA kernels in one eager forward (torch.profiler).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "models"))
sys.path.insert(0, str(ROOT / "bench"))
import definitions  # noqa: E402
from gpu_timing import pyree_ms, torch_ms  # noqa: E402
from gpu_timing import torch_graph_ms as graph_ms  # noqa: E402

REPS = 100


def wall_ms(call, reps=REPS, warmup=10) -> float:
    for _ in range(warmup):
        call()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def relative_error(got: np.ndarray, ref: np.ndarray) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if got.shape != ref.shape or not np.all(np.isfinite(got)):
        return float("inf")
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


def torch_graph_ms(model, x) -> float:
    static = x.clone()
    with torch.no_grad():
        return graph_ms(lambda: model(static), reps=REPS)


def torch_kernels(model, x) -> int:
    """CUDA kernels one eager forward launches (what its CUDA graph replays)."""
    from torch.profiler import ProfilerActivity, profile
    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        model(x)
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def pyree_dispatches(path: Path, function: str) -> int:
    """Dispatch commands in the module's function (one kernel launch each)."""
    import pyree.runtime as rt
    from pyree.runtime._fb import CommandKind
    module = rt.read_module(path.read_bytes())
    [f] = [f for f in module.tree.functions if f.name == function]
    return sum(1 for c in f.commands if c.kind == CommandKind.dispatch)


def pyree_run(path: Path, driver: str, function: str, x: np.ndarray):
    """(result, wall ms of call + read back, ms per call with calls queued back to back)."""
    import pyree.runtime as rt
    module = rt.load_module(path, device=driver)
    fn = module[function]
    xd = rt.asdevicearray(module.device, x)
    return fn(xd).to_host(), wall_ms(lambda: fn(xd).to_host()), \
        pyree_ms(lambda: fn(xd), reps=REPS)[1]


def iree_run(path: Path, driver: str, function: str, x: np.ndarray):
    import iree.runtime as ireert
    config = ireert.Config(driver)
    ctx = ireert.SystemContext(config=config)
    ctx.add_vm_module(ireert.VmModule.copy_buffer(ctx.instance, path.read_bytes()))
    fn = ctx.modules.module[function]
    xd = ireert.asdevicearray(config.device, x)
    return fn(xd).to_host(), wall_ms(lambda: fn(xd).to_host()), float("nan")


def measure_in_process(compiler: str, driver: str, path: Path, function: str, x: torch.Tensor,
                       ref: np.ndarray, limit_s: float) -> tuple[float, float, float]:
    """(ms, queued ms per call, relative error) from a child process running one module; raises
    on failure."""
    folder = path.parent
    np.save(folder / "_x.npy", x.numpy())
    np.save(folder / "_ref.npy", ref)
    proc = subprocess.run([sys.executable, __file__, "--one", compiler, driver, str(path), function],
                          capture_output=True, text=True, timeout=limit_s)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else
                           f"exit {proc.returncode}")
    ms, queued, err = proc.stdout.split()[-3:]
    return float(ms), float(queued), float(err)


def one(compiler: str, driver: str, path: Path, function: str) -> None:
    x, ref = np.load(path.parent / "_x.npy"), np.load(path.parent / "_ref.npy")
    got, ms, queued = (pyree_run if compiler == "pyree" else iree_run)(path, driver, function, x)
    print(ms, queued, relative_error(got, ref))


def main() -> int:
    if sys.argv[1] == "--one":
        one(sys.argv[2], sys.argv[3], Path(sys.argv[4]), sys.argv[5])
        return 0
    p = argparse.ArgumentParser()
    p.add_argument("build", type=Path)
    p.add_argument("--limit", type=float, default=120.0, help="seconds per module")
    p.add_argument("--drivers", default="cuda,vulkan")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    manifest = json.loads((args.build / "manifest.json").read_text())
    rows, failed = [], False
    for name, info in manifest.items():
        files = {("pyree", d): args.build / f"{name}.vmfb" for d in args.drivers.split(",")}
        files.update({("iree", d): args.build / f"{name}.iree_{d}.vmfb"
                      for d in args.drivers.split(",")})
        files = {k: v for k, v in files.items() if v.exists()}
        if not files:
            continue
        base = name.removesuffix("_f16")
        model, x = definitions.MODELS[base][0](), definitions.example_input(base, seed=1)
        if info["dtype"] == "float16":
            model, x = model.half(), x.half()
        if abs(definitions.weights_checksum(model) - info["checksum"]) > 1e-6 * info["checksum"]:
            print(f"{name}: weights differ from the build host's; torch builds models differently")
            return 2
        model, xg = model.cuda(), x.cuda()
        with torch.no_grad():
            ref = model(xg).float().cpu().numpy()
            eager = torch_ms(lambda m=model, a=xg: m(a), reps=REPS)
        graph = torch_graph_ms(model, xg)
        kernels = torch_kernels(model, xg)
        limit = 1e-2 if x.dtype == torch.float16 else 1e-4
        for (compiler, driver), path in sorted(files.items()):
            try:
                ms, queued, err = measure_in_process(compiler, driver, path, info["function"], x,
                                                     ref, args.limit)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                print(f"{name} {compiler} {driver}: FAILED: {e}", flush=True)
                failed |= compiler == "pyree"
                continue
            ok = err <= limit
            failed |= compiler == "pyree" and not ok
            dispatches = pyree_dispatches(path, info["function"]) if compiler == "pyree" else None
            rows.append({"model": name, "compiler": compiler, "driver": driver, "ms": ms,
                         "queued_ms": queued, "rel_err": err, "ok": ok, "torch_eager_ms": eager,
                         "torch_graph_ms": graph, "kernels": dispatches,
                         "torch_kernels": kernels})
            print(f"{name:18s} {compiler:5s} {driver:6s} {ms:8.3f} ms (queued {queued:.3f}) "
                  f"err {err:.1e} "
                  f"{'ok' if ok else 'WRONG'}  torch eager {eager:.3f} graph {graph:.3f}",
                  flush=True)
    print(f"\n{'model':18s} {'compiler':8s} {'driver':6s} {'ms':>8s} {'vs eager':>8s} "
          f"{'vs graph':>8s} {'queued':>7s} {'vs graph':>8s} {'kernels':>7s} {'torch':>5s}  rel err")
    for r in rows:
        print(f"{r['model']:18s} {r['compiler']:8s} {r['driver']:6s} {r['ms']:8.3f} "
              f"{r['torch_eager_ms'] / r['ms']:8.2f} {r['torch_graph_ms'] / r['ms']:8.2f} "
              f"{r['queued_ms']:7.3f} {r['torch_graph_ms'] / r['queued_ms']:8.2f} "
              f"{r['kernels'] if r['kernels'] is not None else '-':>7} {r['torch_kernels']:5d}  "
              f"{r['rel_err']:.1e}{'' if r['ok'] else ' WRONG'}")
    if args.json:
        args.json.write_text(json.dumps({"gpu": torch.cuda.get_device_name(0), "rows": rows},
                                        indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
