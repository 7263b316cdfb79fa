"""Where a prefill's GPU time goes, kernel by kernel (CUPTI through torch.profiler): a module of
bench/gpu/llm_decode.py's build, its weights made from the model's seed as that script does.

    python3 bench/gpu/llm_prefill_profile.py MODULE.vmfb [--tokens 128,1024] [--calls 5] [--top 15]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "bench" / "gpu"), str(ROOT / "bench" / "models")]


def main() -> None:
    import llm_decode
    import pyree.runtime as rt
    from profile_kernels import kernel_times
    from pyree.compiler.llm.decoder import write_parameters
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("module", type=Path)
    p.add_argument("--tokens", default="128,1024")
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--top", type=int, default=15)
    args = p.parse_args()
    name = args.module.name.split(".")[0]
    weights = Path("/tmp/llm_weights") / f"{name}.safetensors"
    weights.parent.mkdir(exist_ok=True)
    write_parameters(llm_decode._model(name), weights)
    module = rt.load_module(args.module.read_bytes(), device="cuda", parameters=[f"model={weights}"])
    rng = np.random.default_rng(0)
    for n in map(int, args.tokens.split(",")):
        prompt = rng.integers(0, 1000, (1, n))
        times = kernel_times(lambda p=prompt: module["prefill"](p)[1].to_host(), args.calls)
        total = sum(times.values())
        print(f"== {name} prefill of {n} tokens: {len(times)} kernels, {total / 1e3:.3f} ms of kernels")
        for k, us in sorted(times.items(), key=lambda kv: -kv[1])[:args.top]:
            print(f"{us:9.1f} us {100 * us / total:5.1f}%  {k[:110]}")


if __name__ == "__main__":
    main()
