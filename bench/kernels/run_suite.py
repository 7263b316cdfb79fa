"""Issue 11's kernel suite on a GPU host: every case of cases.py, PyTorch eager against pyree.

    python3 bench/kernels/run_suite.py BUILD_DIR [--device cuda] [--cases RE,..] [--json OUT.json]
                                       [--profile] [--trace]

BUILD_DIR comes from build_modules.py. Per case: fresh random inputs as torch tensors on the GPU,
copied once into pyree device arrays (device-resident, as bench/models/bench_gpu.py does); the
result is checked against the case run by PyTorch in float64 (relative L2 error over the finite
values, limit by output dtype; NaN and +/-inf must sit where PyTorch eager puts them), then both
are timed with bench/gpu_timing.py: torch_ms (CUDA events, median) against pyree_ms's per-call
time with calls queued back to back (median latency goes to the JSON). TF32 and cuBLAS's
reduced-precision f16/bf16 reductions are off, so PyTorch computes what the module computes.

A wrong result is marked WRONG and never counts as a speed; a case that fails to build, load or
run is reported with its error and the suite goes on. Prints a markdown table, the geomean and the
minimum of torch/pyree over the correct cases, and whether issue 11's target holds (all cases
correct, geomean >= 1.0, none below 0.7). Exit status 1 if any case is not ok.

``--device local-task`` runs pyree on the CPU and PyTorch on the CPU (timed by wall clock):
a correctness smoke test of the suite on a machine without a GPU (build with --backend llvm-cpu).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import pyree.runtime as rt
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "models"))
import cases  # noqa: E402
from gpu_timing import pyree_ms, torch_ms  # noqa: E402

# Relative L2 error limits against float64, by result dtype: a few roundings of that type.
TOLERANCE = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 3e-2}
# each suite's goal: (geomean, min) of torch/pyree (issue 11's; issue 31 item 1's LLM kernels)
TARGETS = {"issue11": (1.0, 0.7), "llm": (1.1, 0.8), "breadth": (1.0, 0.5), "breadth2": (1.0, 0.5),
           "gemm": (0.9, 0.8), "windows": (1.0, 0.8),
           "breadth3": (1.0, 0.5), "breadth4": (1.0, 0.5), "breadth5": (1.0, 0.5)}


def copy_gbs() -> float:
    """The GPU's device-to-device copy bandwidth (GB/s, read + write) on 1 GiB, CUDA events."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = torch_ms(lambda: dst.copy_(src), reps=20)
    return 2 * src.numel() / ms / 1e6


def cpu_ms(fn, reps: int, warmup: int = 3) -> float:
    """Median wall time of ``fn`` on the CPU: torch_ms's stand-in when there is no GPU."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Host copy of a tensor; bf16 through its bits, as ml_dtypes.bfloat16 (numpy has no bf16)."""
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def in_float64(t: torch.Tensor) -> torch.Tensor:
    return t.double() if t.is_floating_point() else t


def check(got: np.ndarray, eager: torch.Tensor, ref: torch.Tensor) -> tuple[bool, float, str]:
    """(ok, relative error of pyree's result against float64, why not ok)."""
    expect = eager.detach().cpu().double().numpy()
    got = np.asarray(got, np.float64)
    if got.shape != expect.shape:
        return False, math.inf, f"shape {got.shape}, torch {expect.shape}"
    for name, test in (("NaN", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        mismatched = int(np.count_nonzero(test(got) != test(expect)))
        if mismatched:
            return False, math.inf, f"{name} at {mismatched} places where torch differs"
    finite = np.isfinite(expect)
    ref = ref.detach().cpu().double().numpy()[finite]
    err = float(np.linalg.norm(got[finite] - ref) / max(np.linalg.norm(ref), 1e-30))
    limit = TOLERANCE.get(eager.dtype, 0.0)
    return err <= limit, err, "" if err <= limit else f"rel err {err:.1e} > {limit:.0e}"


def run_case(case: cases.Case, entry: dict, build: Path, args, torch_device: str) -> dict:
    row = {"case": case.key, "name": case.name, "kernels": entry.get("kernels")}
    if "error" in entry:
        return {**row, "status": "BUILD FAILED", "error": entry["error"]}
    if entry["inputs"] != [i.spelling for i in case.inputs]:
        return {**row, "status": "STALE", "error": f"built for {entry['inputs']}; rebuild"}
    inputs = case.make_inputs(args.seed, torch_device)
    module = rt.load_module(build / f"{case.key}.vmfb", device=args.device)
    fn = module[entry["function"]]
    device_inputs = [rt.asdevicearray(module.device, to_numpy(t)) for t in inputs]
    with torch.no_grad():
        eager = case.fn(*inputs)
        ref = case.fn(*map(in_float64, inputs))
    got = fn(*device_inputs).to_host()
    row["bytes"] = sum(t.numel() * t.element_size() for t in inputs) + got.nbytes
    ok, err, why = check(got, eager, ref)
    _, torch_err, _ = check(to_numpy(eager), eager, ref)
    row.update(rel_err=err, torch_rel_err=torch_err)
    if not ok and not args.time_wrong:
        return {**row, "status": "WRONG", "error": why}
    with torch.no_grad():
        timer = torch_ms if torch_device == "cuda" else cpu_ms
        row["torch_ms"] = timer(lambda: case.fn(*inputs), reps=args.reps)
    row["pyree_latency_ms"], row["pyree_ms"] = pyree_ms(lambda: fn(*device_inputs), reps=args.reps)
    if args.profile:
        from profile_kernels import kernel_times
        from profile_kernels import table as kernel_table
        kernel_table(f"{case.key}, pyree", kernel_times(lambda: fn(*device_inputs), 20))
        with torch.no_grad():
            kernel_table(f"{case.key}, PyTorch", kernel_times(lambda: case.fn(*inputs), 20))
    if args.trace:  # any device: its own timestamps per dispatch (README, "Profiling")
        with rt.trace() as t:
            for _ in range(20):
                fn(*device_inputs).to_host()
        print(f"\n{case.key}, pyree:\n{t.format_summary()}")
    row["pyree_gbs"] = row["bytes"] / row["pyree_ms"] / 1e6
    if not ok:  # --time-wrong: a probe's time, never a result
        return {**row, "status": "WRONG", "error": why}
    return {**row, "status": "ok", "ratio": row["torch_ms"] / row["pyree_ms"]}


def table(rows: list[dict]) -> str:
    lines = ["| case | torch ms | pyree ms | torch/pyree | pyree GB/s | kernels | ok |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        ms = (f"{r['torch_ms']:.4f} | {r['pyree_ms']:.4f} | {r['ratio']:.2f}x | {r['pyree_gbs']:.0f}"
              if r["status"] == "ok" else "| | |")
        status = (r["status"] if r["status"] == "ok"
                  else f"**{r['status']}**: {r['error'][:160]}".replace("|", "/"))
        lines.append(f"| {r['name']} | {ms} | {r['kernels'] if r['kernels'] is not None else ''}"
                     f" | {status} |".replace("\n", " "))
    return "\n".join(lines)


def summary(rows: list[dict], suite: str) -> dict:
    ratios = [r["ratio"] for r in rows if r["status"] == "ok"]
    geomean = math.exp(statistics.fmean(map(math.log, ratios))) if ratios else None
    slowest = min(rows, key=lambda r: r.get("ratio", math.inf)) if ratios else None
    not_ok = [r["case"] for r in rows if r["status"] != "ok"]
    target_geomean, target_min = TARGETS[suite]
    met = (not not_ok and geomean is not None and geomean >= target_geomean
           and slowest["ratio"] >= target_min)
    return {"cases": len(rows), "ok": len(ratios), "not_ok": not_ok, "geomean": geomean,
            "min": slowest["ratio"] if slowest else None,
            "min_case": slowest["case"] if slowest else None, "target_met": met}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("build", type=Path, help="folder of build_modules.py (modules + manifest.json)")
    p.add_argument("--device", default="cuda",
                   help="pyree device: cuda, cuda://0?command_buffer=..., or local-task (CPU run)")
    p.add_argument("--cases", default="", help="comma-separated regexes of case keys (default all)")
    p.add_argument("--suite", default="issue11", choices=sorted(cases.SUITES))
    p.add_argument("--reps", type=int, default=100, help="timed runs per case and side")
    p.add_argument("--seed", type=int, default=1, help="input seed (the build used 0)")
    p.add_argument("--json", type=Path)
    p.add_argument("--time-wrong", action="store_true",
                   help="time cases whose result is wrong too (the JSON only: bench/cuda/forced_tiles.py's "
                        "probes, which leave out part of a kernel's work)")
    p.add_argument("--trace", action="store_true",
                   help="print each case's dispatches by device time (pyree's trace, any device)")
    p.add_argument("--profile", action="store_true",
                   help="also print each case's kernels and their GPU times, pyree's and PyTorch's")
    args = p.parse_args()
    torch_device = "cpu" if args.device.startswith("local") else "cuda"
    if torch_device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    manifest = json.loads((args.build / "manifest.json").read_text())
    rows = []
    for case in cases.select(args.cases, args.suite):
        entry = manifest["cases"].get(case.key, {"error": "not in the manifest: not built"})
        try:
            row = run_case(case, entry, args.build, args, torch_device)
        except Exception as e:  # noqa: BLE001 -- one case's failure must not stop the suite
            traceback.print_exc(limit=4)
            row = {"case": case.key, "name": case.name, "kernels": entry.get("kernels"),
                   "status": "FAILED", "error": f"{type(e).__name__}: {e}"}
        rows.append(row)
        print(f"{row['status']:12s} {case.key}"
              + (f"  torch {row['torch_ms']:.4f} ms  pyree {row['pyree_ms']:.4f} ms  "
                 f"{row['ratio']:.2f}x  err {row['rel_err']:.1e}" if row["status"] == "ok"
                 else f"  {row['error'].splitlines()[0][:300] if row['error'] else ''}"), flush=True)
    total = summary(rows, args.suite)
    copy = copy_gbs() if torch_device == "cuda" else None
    where = torch.cuda.get_device_name(0) if torch_device == "cuda" else "CPU"
    print(f"\n## pyree ({manifest['backend']} {manifest['target']}".rstrip() + f", device {args.device}) "
          f"vs PyTorch {torch.__version__} eager on {where}\n")
    print(table(rows))
    if total["geomean"] is not None:
        print(f"\ngeomean torch/pyree {total['geomean']:.3f}x over {total['ok']} correct cases; "
              f"min {total['min']:.3f}x ({total['min_case']})")
    print(f"not ok: {', '.join(total['not_ok']) or 'none'}")
    if copy:
        print(f"device copy bandwidth {copy:.0f} GB/s (read + write, 1 GiB)")
    target_geomean, target_min = TARGETS[args.suite]
    print(f"{args.suite} target (all correct, geomean >= {target_geomean}, min >= {target_min}): "
          f"{'MET' if total['target_met'] else 'NOT MET'}")
    if args.json:
        args.json.write_text(json.dumps({"device": args.device, "host": where,
                                         "torch": torch.__version__, "seed": args.seed,
                                         "build": {k: manifest[k] for k in ("backend", "target")},
                                         "copy_gbs": copy, "summary": total, "rows": rows},
                                        indent=1))
    return 0 if not total["not_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
