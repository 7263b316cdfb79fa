"""ONNX recurrent models (LSTM, GRU, RNN; one and two directions, two layers) on the GPU drivers
against onnxruntime on the CPU: torch-mlir's scf.for over the time steps runs as a device loop
whose kernels slice step ``t`` at a computed offset.

    python3 bench/gpu/onnx_recurrences.py build DIR      # here: the ONNX files and the modules
    python3 bench/gpu/onnx_recurrences.py run DIR        # there (onnxruntime, numpy, pyree)
"""

from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path

import numpy as np

TARGETS = {"cuda": dict(target_backends=["cuda"], cuda_target="sm_90a"),
           "vulkan": dict(target_backends=["vulkan-spirv"], vulkan_target="hopper-h100-linux")}


def build(out: Path) -> None:
    import torch
    from pyree.compiler import CompileOptions, compile_str, import_onnx

    out.mkdir(parents=True, exist_ok=True)
    for kind in ("LSTM", "GRU", "RNN"):
        for bidirectional in (False, True):
            torch.manual_seed(0)
            m = getattr(torch.nn, kind)(32, 48, num_layers=2, batch_first=True,
                                        bidirectional=bidirectional).eval()
            f = io.BytesIO()
            torch.onnx.export(m, (torch.randn(4, 25, 32),), f, opset_version=17, dynamo=False)
            name = f"{kind.lower()}_{'bi' if bidirectional else 'uni'}"
            (out / f"{name}.onnx").write_bytes(f.getvalue())
            text = import_onnx(f.getvalue())
            for device, options in TARGETS.items():
                (out / f"{name}.{device}.vmfb").write_bytes(compile_str(text, CompileOptions(**options)))
            print("built", name, flush=True)


def run(folder: Path) -> int:
    import onnxruntime as ort
    import pyree.runtime as rt

    rows, bad = [], 0
    for model in sorted(folder.glob("*.onnx")):
        session = ort.InferenceSession(model.read_bytes(), providers=["CPUExecutionProvider"])
        x = np.random.default_rng(1).standard_normal((4, 25, 32)).astype(np.float32)
        want = session.run(None, {session.get_inputs()[0].name: x})
        for device in TARGETS:
            module = rt.load_module(folder / f"{model.stem}.{device}.vmfb", device=device)
            fn = module[module.function_names[0]]
            got = [np.asarray(g) for g in fn(x)]
            err = max(float(np.abs(g - w).max()) for g, w in zip(got, want))
            t0 = time.perf_counter()
            for _ in range(20):
                [np.asarray(g) for g in fn(x)]
            ms = (time.perf_counter() - t0) / 20 * 1e3
            ok = err < 1e-4
            bad += not ok
            rows.append({"model": model.stem, "device": device, "max_abs_err": err, "ok": ok,
                         "ms_per_call_with_readback": round(ms, 3)})
            print(f"{'ok' if ok else 'WRONG':6s} {model.stem:10s} {device:7s} err {err:.1e} "
                  f"{ms:.2f} ms/call", flush=True)
    (folder / "results.json").write_text(json.dumps(rows, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    verb, where = sys.argv[1], Path(sys.argv[2])
    sys.exit(build(where) if verb == "build" else run(where))
