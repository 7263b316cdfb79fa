"""Where a model's GPU time goes, kernel by kernel: pyree's dispatches next to PyTorch's kernels.

    python3 bench/models/profile_kernels.py BUILD_DIR [--models gpt2_block,...] [--calls 20]

BUILD_DIR comes from build_modules.py. CUPTI (through torch.profiler) records every kernel that
runs in the process, whoever launched it, so pyree's dispatches (launched through libcuda,
graph or stream) are timed by the same clock as PyTorch's eager kernels. Per model: each kernel's
mean GPU time over ``--calls`` calls and its share of the total, pyree's then PyTorch's, and the
sums. (Kernel time only: launch gaps, which CUDA-graph replay removes, are not in these sums.)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "models"))
import definitions  # noqa: E402


def kernel_times(run, calls: int) -> dict[str, list[float]]:
    """GPU microseconds of each kernel name per call (a name launched twice per call sums)."""
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            run()
        torch.cuda.synchronize()
    per_name: dict[str, float] = defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per_name[e.name] += e.device_time
    return {name: total / calls for name, total in per_name.items()}


def table(title: str, times: dict[str, float], width: int = 90) -> float:
    total = sum(times.values())
    print(f"\n{title}: {len(times)} kernel names, {total:.1f} us of kernel time per call")
    for name, us in sorted(times.items(), key=lambda kv: -kv[1]):
        print(f"  {us:8.2f} us {100 * us / total:5.1f}%  {name[:width]}")
    return total


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("build", type=Path)
    p.add_argument("--models", default="")
    p.add_argument("--calls", type=int, default=20)
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    import pyree.runtime as rt

    manifest = json.loads((args.build / "manifest.json").read_text())
    chosen = [m for m in args.models.split(",") if m] or list(manifest)
    for name in chosen:
        info, path = manifest[name], args.build / f"{name}.vmfb"
        base = name.removesuffix("_f16")
        model, x = definitions.MODELS[base][0](), definitions.example_input(base, seed=1)
        if info["dtype"] == "float16":
            model, x = model.half(), x.half()
        model, xg = model.cuda().eval(), x.cuda()
        module = rt.load_module(path, device="cuda")
        fn = module[info["function"]]
        xd = rt.asdevicearray(module.device, x.numpy())
        with torch.no_grad():
            ref = model(xg).float().cpu().numpy()
            got = fn(xd).to_host().astype(np.float32)
            err = float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))
            ours = kernel_times(lambda f=fn, a=xd: f(a).wait(), args.calls)
            theirs = kernel_times(lambda m=model, a=xg: m(a), args.calls)
        print(f"\n== {name} (pyree relative error {err:.1e})")
        a = table("pyree", ours)
        b = table("PyTorch eager", theirs)
        print(f"kernel time per call: pyree {a:.1f} us, PyTorch {b:.1f} us, "
              f"PyTorch/pyree {b / a:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
