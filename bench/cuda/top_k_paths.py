"""The two top-k forms a GPU runs, side by side: the counted plans (``sort_scan.topk_plan``) and
the threshold search (``input/threshold_top_k.py``), each forced for every case, against
PyTorch's ``topk`` (eager and CUDA-graph replay, CUDA events, medians); each answer checked
against JAX on the CPU first. It calibrates ``sort_scan.top_k``'s choice between them, and
prints which one the compiler picks for each case.

    python3 bench/cuda/top_k_paths.py build DIR   # any machine: both forms, cuda and Vulkan
    python3 bench/cuda/top_k_paths.py run DIR     # the GPU host
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from unittest import mock

import jax
import numpy as np
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.errors import CompileError
from pyree.compiler.input import threshold_top_k

jax.config.update("jax_platforms", "cpu")
CASES = [((64, 32000), 50, "f32"), ((1, 131072), 1000, "f32"), ((8, 50257), 50, "f32"),
         ((4, 32000), 50, "f32"), ((16, 32000), 8, "f32"), ((1, 1000000), 1000, "f32"),
         ((2, 50257), 40, "f32"), ((1, 32000), 50, "f32"), ((256, 1000), 10, "f32"),
         ((3, 8191), 3, "f32"), ((32, 50257), 50, "f16"), ((1, 1000000), 1000, "f16")]
DTYPES = {"f32": np.float32, "f16": np.float16}
TARGETS = {"cuda": dict(target_backends=["cuda"], cuda_target="sm_90a"),
           "vulkan": dict(target_backends=["vulkan-spirv"], vulkan_target="hopper")}
FORMS = {"counted": mock.patch.object(threshold_top_k, "applies", lambda *a: False),
         "search": mock.patch.object(threshold_top_k, "search_cost", lambda *a: -1.0)}


def program(shape, k, dtype) -> str:
    return jax.jit(lambda v: jax.lax.top_k(v, k)).lower(np.zeros(shape, DTYPES[dtype])).as_text()


def name(shape, k, dtype, device, form) -> str:
    return f"top{k}_{'x'.join(map(str, shape))}_{dtype}_{device}_{form}.vmfb"


def uses_search(text: str) -> bool:
    """Whether the compiler's own choice is the search (it calls ``threshold_top_k``)."""
    with mock.patch.object(threshold_top_k, "threshold_top_k",
                           side_effect=RuntimeError("search")) as search:
        try:
            compile_str(text, CompileOptions(**TARGETS["cuda"]))
        except CompileError:  # the side effect, wrapped
            pass
        return search.called


def build(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    chosen = {}
    for shape, k, dtype in CASES:
        text = program(shape, k, dtype)
        chosen[f"{shape} {k} {dtype}"] = "search" if uses_search(text) else "counted"
        for device, options in TARGETS.items():
            for form, patch in FORMS.items():
                with patch:
                    (out / name(shape, k, dtype, device, form)).write_bytes(
                        compile_str(text, CompileOptions(**options)))
    (out / "chosen.json").write_text(json.dumps(chosen, indent=1))


def run(build_dir: Path) -> None:
    import pyree.runtime as rt
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from gpu_timing import pyree_ms, torch_graph_ms, torch_ms

    chosen = json.loads((build_dir / "chosen.json").read_text())
    print(f"GPU: {torch.cuda.get_device_name(0)}")
    print("| top-k of | dtype | chosen | PyTorch eager / graph ms | cuda counted / search ms "
          "| Vulkan counted / search ms |")
    print("|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for shape, k, dtype in CASES:
        x = rng.standard_normal(shape).astype(DTYPES[dtype])
        want = [np.asarray(w) for w in jax.jit(lambda v, k=k: jax.lax.top_k(v, k))(x)]
        tx = torch.from_numpy(x).cuda()
        eager = torch_ms(lambda tx=tx, k=k: torch.topk(tx, k))
        graph = torch_graph_ms(lambda tx=tx, k=k: torch.topk(tx, k))
        cells = []
        for device in TARGETS:
            times = []
            for form in FORMS:
                module = rt.load_module(
                    (build_dir / name(shape, k, dtype, device, form)).read_bytes(), device=device)
                dx = rt.asdevicearray(module.device, x)
                got = [np.asarray(r.to_host()) for r in module["main"](dx)]
                ok = all(np.array_equal(g, w) for g, w in zip(got, want))
                _, per_call = pyree_ms(lambda f=module["main"], a=dx: f(a)[1], reps=20, rounds=3)
                times.append(f"{per_call:.3f}{'' if ok else ' WRONG'}")
            cells.append(" / ".join(times))
        print(f"| {k} of {shape} | {dtype} | {chosen[f'{shape} {k} {dtype}']} | "
              f"{eager:.3f} / {graph:.3f} | "
              f"{cells[0]} | {cells[1]} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["build", "run"])
    parser.add_argument("dir", type=Path)
    args = parser.parse_args()
    build(args.dir) if args.mode == "build" else run(args.dir)


if __name__ == "__main__":
    main()
