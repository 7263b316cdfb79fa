"""Recurrent layers (LSTM, GRU) unrolled by torch.export, on a GPU host: correctness against
PyTorch in float64, and time against PyTorch's cuDNN kernels.

    python3 bench/models/recurrent.py build OUT_DIR [--backend cuda] [--target sm_90a]   # compiler + torch-mlir
    python3 bench/models/recurrent.py run OUT_DIR [--device cuda]                        # runtime + torch

``build`` writes, per case, the module, its inputs and PyTorch's float64 outputs, the number of
distinct kernels and the compile time; ``run`` checks pyree's result (max error relative to the
output's scale) and times pyree (calls queued back to back) and PyTorch (CUDA events; eager cuDNN,
the weights the module holds), printing one line per case with the ratio (PyTorch's time over
pyree's)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests")]
CASES = {  # name -> (layer kind, input width, hidden, layers, bidirectional, batch, steps)
    "lstm_2x256_b1_t64": ("LSTM", 128, 256, 2, False, 1, 64),
    "gru_bi_128_b8_t50": ("GRU", 80, 128, 1, True, 8, 50),
    "lstm_odd_13_b3_t17": ("LSTM", 11, 13, 1, False, 3, 17),
}


def _model(name: str):
    import torch

    kind, width, hidden, layers, bidirectional, batch, steps = CASES[name]
    torch.manual_seed(0)
    layer = getattr(torch.nn, kind)(width, hidden, num_layers=layers, batch_first=True,
                                    bidirectional=bidirectional).eval()

    class Recurrence(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, x):
            return self.layer(x)[0]

    return Recurrence(), torch.randn(batch, steps, width, generator=torch.Generator().manual_seed(1))


def build(out: Path, backend: str, target: str) -> None:
    import pyree.runtime as rt
    import torch
    from pyree.compiler import CompileOptions, compile_str, import_torch

    out.mkdir(parents=True, exist_ok=True)
    for name in CASES:
        model, x = _model(name)
        t0 = time.perf_counter()
        target_options = {"cuda_target": target} if backend == "cuda" else {}
        options = CompileOptions(target_backends=[backend], **target_options)
        vmfb = compile_str(import_torch(model, x), options)
        seconds = time.perf_counter() - t0
        (out / f"{name}.vmfb").write_bytes(vmfb)
        with torch.no_grad():
            want = model.double()(x.double()).numpy()
        np.savez(out / f"{name}.npz", x=x.numpy(), want=want)
        kernels = len(rt.read_module(vmfb).tree.kernels)
        info = {"kernels": kernels, "import_compile_s": round(seconds, 1)}
        (out / f"{name}.json").write_text(json.dumps(info))
        print(f"built {name}: {kernels} distinct kernels, import+compile {seconds:.1f} s", flush=True)


def run(out: Path, device: str) -> None:
    for name in CASES:
        _run_case(out, name, device)


def _run_case(out: Path, name: str, device: str) -> None:
    import pyree.runtime as rt
    import torch
    from gpu_timing import pyree_ms, torch_ms

    data = np.load(out / f"{name}.npz")
    info = json.loads((out / f"{name}.json").read_text())
    module = rt.load_module(out / f"{name}.vmfb", device=device)
    fn = module["main"]
    x = rt.asdevicearray(module.device, data["x"])
    got = np.asarray(fn(x).to_host(), np.float64)
    err = float(np.max(np.abs(got - data["want"])) / max(1e-30, np.max(np.abs(data["want"]))))
    model = _model(name)[0].cuda()
    xs = torch.from_numpy(data["x"]).cuda()
    with torch.no_grad():
        theirs = torch_ms(lambda: model(xs), reps=100, warmup=10)
    ours = pyree_ms(lambda: fn(x), reps=100, warmup=10)[1]
    print(f"{name}: {info['kernels']} kernels, rel err {err:.1e}, torch {theirs:.4f} ms, "
          f"pyree {ours:.4f} ms, ratio {theirs / ours:.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("verb", choices=["build", "run"])
    parser.add_argument("out", type=Path)
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--target", default="sm_90a")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    build(args.out, args.backend, args.target) if args.verb == "build" else run(args.out, args.device)


if __name__ == "__main__":
    main()
