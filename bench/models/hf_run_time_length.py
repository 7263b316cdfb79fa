"""Tiny Hugging Face language models (bench/models/hf_tiny.py) exported with a run-time sequence
length (torch.export ``Dim``): one cuda module per model, checked at 3, 13 and 29 tokens against
the model in float64.

    python3 bench/models/hf_run_time_length.py build OUT [NAME ...]   # needs transformers
    python3 bench/models/hf_run_time_length.py run OUT                 # the GPU host
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np

LENGTHS = (3, 13, 29)


def build(out: Path, names: list[str]) -> None:
    import hf_tiny
    import torch
    from pyree.compiler import CompileOptions, compile_str, import_torch
    out.mkdir(parents=True, exist_ok=True)
    for name in names or ["gpt2", "llama_gqa", "mistral"]:
        model, x = hf_tiny.wrapped(name)
        seq = torch.export.Dim("seq", min=2, max=64)
        mlir = import_torch(model, x, dynamic_shapes={"x": {1: seq}})
        (out / f"{name}.vmfb").write_bytes(compile_str(mlir, CompileOptions(
            target_backends=["cuda"], cuda_target="sm_90a")))
        for n in LENGTHS:
            ids = torch.randint(0, hf_tiny.VOCAB, (1, n), generator=torch.Generator().manual_seed(n))
            np.save(out / f"{name}.{n}.in.npy", ids.numpy())
            np.save(out / f"{name}.{n}.want.npy", hf_tiny.reference(model, ids))
            model.float()
        print("built", name, flush=True)


def run(out: Path) -> int:
    import pyree.runtime as rt
    wrong = 0
    for path in sorted(out.glob("*.vmfb")):
        main = rt.load_module(path.read_bytes(), device="cuda")["main"]
        for n in LENGTHS:
            x, want = np.load(out / f"{path.stem}.{n}.in.npy"), np.load(out / f"{path.stem}.{n}.want.npy")
            err = float(np.linalg.norm(np.asarray(main(x).to_host(), np.float64) - want)
                        / np.linalg.norm(want))
            wrong += err > 1e-4
            print(f"{'ok' if err <= 1e-4 else 'WRONG':6s} {path.stem}[{n}] rel err {err:.1e}", flush=True)
    return int(wrong > 0)


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    verb, folder, *rest = sys.argv[1:]
    sys.exit(build(Path(folder), rest) if verb == "build" else run(Path(folder)))
