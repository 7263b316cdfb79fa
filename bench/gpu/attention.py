"""Attention on an NVIDIA GPU: pyree (flow/attention.py's one kernel) against PyTorch's
scaled_dot_product_attention (its flash kernel where it takes the case), issue 30 item 6.

    python3 bench/gpu/attention.py build OUT_DIR [--target sm_90a]   # needs the compiler + torch-mlir
    python3 bench/gpu/attention.py run OUT_DIR [--base DIR]          # GPU host: runtime, hal-cuda, torch

Cases: causal prefill, f16, 1 x 12 heads x T x 64 for T in 128, 512, 1024, 2048 and 1 x 32 heads
x T x 128 for T in 512, 2048 (tensor cores, codegen/cuda/attention_mma.py); a decode step, f16,
one query (1 x 12 x 1 x 64) over a 1024-long cache with a position mask (the first 700 keys),
over 1021 keys (a prime: flash-decoding's ragged last chunk), and 1 x 32 x 1 x 128 over 4096
keys (LLaMA-7B's heads). ``run`` times both with CUDA events (PyTorch; median) and pyree's
per-call time with calls queued back to back (gpu_timing.pyree_ms), on fresh random inputs held on
the device, checks pyree's result against PyTorch's in float64, and prints one line per case
with the ratio (PyTorch's time over pyree's: above 1, pyree is faster)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests")]
HEADS, DIM, CACHE, POSITION = 12, 64, 1024, 700
CASES = {**{f"causal_{t}": ((1, HEADS, t, DIM), (1, HEADS, t, DIM)) for t in (128, 512, 1024, 2048)},
         **{f"causal_32x{t}x128": ((1, 32, t, 128), (1, 32, t, 128)) for t in (512, 2048)},
         "decode_1024": ((1, HEADS, 1, DIM), (1, HEADS, CACHE, DIM)),
         "decode_1021": ((1, HEADS, 1, DIM), (1, HEADS, 1021, DIM)),  # a prime: a ragged chunk
         "decode_32x4096x128": ((1, 32, 1, 128), (1, 32, 4096, 128))}  # LLaMA-7B's heads


def _module(name: str):
    import torch
    import torch.nn.functional as F

    class Causal(torch.nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    class Decode(torch.nn.Module):
        def forward(self, q, k, v, mask):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    return Causal() if name.startswith("causal") else Decode()


def _inputs(name: str, rng) -> list[np.ndarray]:
    q_shape, kv_shape = CASES[name]
    out = [rng.standard_normal(s).astype(np.float16) for s in (q_shape, kv_shape, kv_shape)]
    if name.startswith("decode"):
        keys = kv_shape[2]
        out.append(np.arange(keys).reshape(1, 1, 1, keys) < min(POSITION, keys))
    return out


def build(out: Path, target: str) -> None:
    import torch
    from pyree.compiler import CompileOptions, compile_str, import_torch
    out.mkdir(parents=True, exist_ok=True)
    for name in CASES:
        args = [torch.from_numpy(a) for a in _inputs(name, np.random.default_rng(0))]
        mlir = import_torch(_module(name), *args)
        vmfb = compile_str(mlir, CompileOptions(target_backends=["cuda"], cuda_target=target))
        (out / f"{name}.vmfb").write_bytes(vmfb)
        print(name, "built", flush=True)


def run(folder: Path, base: Path | None) -> None:
    rng = np.random.default_rng()
    for name in CASES:
        if base is not None:
            _case(name, base, rng, "base ")
        _case(name, folder, rng)


def _case(name: str, folder: Path, rng, label: str = "") -> None:
    import pyree.runtime as rt
    import torch
    from gpu_timing import pyree_ms, torch_ms
    args = _inputs(name, rng)
    torch_args = [torch.from_numpy(a).cuda() for a in args]
    model = _module(name)
    with torch.no_grad():
        ref = model(*[t.double() if t.is_floating_point() else t for t in torch_args])
        torch_t = torch_ms(lambda: model(*torch_args), reps=200, warmup=20)
    module = rt.load_module(folder / f"{name}.vmfb", device="cuda")
    fn = module[module.function_names[0]]
    device_args = [rt.asdevicearray(module.device, a) for a in args]
    got = np.asarray(fn(*device_args).to_host(), np.float64)
    want = ref.cpu().numpy()
    error = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    pyree_t = pyree_ms(lambda: fn(*device_args), reps=200, warmup=20)[1]
    print(f"{label}{name:>18}: pyree {pyree_t * 1e3:8.1f} us  torch {torch_t * 1e3:8.1f} us  "
          f"ratio {torch_t / pyree_t:5.2f}x  max rel error {error:.1e}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["build", "run"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--target", default="sm_90a")
    parser.add_argument("--base", type=Path, help="run: also time this folder's modules (built "
                        "by another compiler), case by case before the folder's")
    ns = parser.parse_args()
    build(ns.folder, ns.target) if ns.what == "build" else run(ns.folder, ns.base)


if __name__ == "__main__":
    main()
