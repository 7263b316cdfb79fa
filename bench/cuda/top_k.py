"""JAX's ``lax.top_k`` on pyree's cuda and Vulkan drivers against PyTorch's ``topk`` on the same
GPU (eager and CUDA-graph replay; CUDA events, medians; pyree's time per call with calls queued
back to back), each answer checked against JAX on the CPU first. ``--write DIR`` only compiles
the modules into DIR (run with an older tree to make a "before" set), ``--before DIR`` times
those too.

    python3 bench/cuda/top_k.py [--before DIR]
    PYTHONPATH=<old tree>/packages/base-compiler/src python3 bench/cuda/top_k.py --write DIR
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import numpy as np
from pyree.compiler import CompileOptions, compile_str

jax.config.update("jax_platforms", "cpu")
CASES = [((100003,), 3), ((3, 8191), 3), ((64, 32000), 50), ((2, 50257), 40), ((1, 131072), 1000),
         ((8, 1000), 5)]
TARGETS = {"cuda": dict(target_backends=["cuda"], cuda_target="sm_90"),
           "vulkan": dict(target_backends=["vulkan-spirv"], vulkan_target="hopper")}


def program(shape, k) -> str:
    return jax.jit(lambda v: jax.lax.top_k(v, k)).lower(np.zeros(shape, np.float32)).as_text()


def file_name(shape, k, device) -> str:
    return f"top{k}_{'x'.join(map(str, shape))}_{device}.vmfb"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", type=Path)
    parser.add_argument("--before", type=Path)
    args = parser.parse_args()
    if args.write:
        args.write.mkdir(parents=True, exist_ok=True)
        for shape, k in CASES:
            for device, options in TARGETS.items():
                (args.write / file_name(shape, k, device)).write_bytes(
                    compile_str(program(shape, k), CompileOptions(**options)))
        return
    import pyree.runtime as rt
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from gpu_timing import pyree_ms, torch_graph_ms, torch_ms

    print(f"GPU: {torch.cuda.get_device_name(0)}")
    rng = np.random.default_rng(0)
    for shape, k in CASES:
        x = rng.standard_normal(shape).astype(np.float32)
        want = [np.asarray(w) for w in jax.jit(lambda v, k=k: jax.lax.top_k(v, k))(x)]
        tx = torch.from_numpy(x).cuda()
        eager = torch_ms(lambda tx=tx, k=k: torch.topk(tx, k))
        graph = torch_graph_ms(lambda tx=tx, k=k: torch.topk(tx, k))
        line = f"top-{k} of {shape}: PyTorch {eager:.3f} ms eager, {graph:.3f} ms graph"
        for device, options in TARGETS.items():
            builds = {"now": compile_str(program(shape, k), CompileOptions(**options))}
            if args.before:
                builds["before"] = (args.before / file_name(shape, k, device)).read_bytes()
            for label, vmfb in builds.items():
                module = rt.load_module(vmfb, device=device)
                dx = rt.asdevicearray(module.device, x)
                got = [np.asarray(r.to_host()) for r in module["main"](dx)]
                ok = all(np.array_equal(g, w) for g, w in zip(got, want))
                _, per_call = pyree_ms(lambda f=module["main"], a=dx: f(a)[1], reps=20, rounds=3)
                line += (f"; {device} {label} {per_call:.3f} ms ({per_call / graph:.2f}x graph)"
                         f"{'' if ok else ' WRONG'}")
        print(line, flush=True)


if __name__ == "__main__":
    main()
