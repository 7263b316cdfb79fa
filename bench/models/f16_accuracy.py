"""f16 models: pyree's error against PyTorch's f16 error, on the same weights and input, both
measured against the model in float64.

    python bench/models/f16_accuracy.py build OUT [--backend llvm-cpu|cuda] [--models a,b]
    python bench/models/f16_accuracy.py run OUT --device local-task|cuda

``build`` (the build machine, no GPU needed): each model (torchvision, random weights seeded as
tests/models/definitions.py seeds them, random batchnorm statistics) converted with ``.half()``,
imported with pyree's torch importer and compiled for the backend (cuda: sm_90); writes
``<model>.vmfb``, the f16 input, the float64 reference output (the model in float64 on that
input) and ``manifest.json`` with each model's weights checksum. ``run`` (a host with the
runtime, the driver and torch): runs each module, and PyTorch's f16 model on the same device
(the GPU for cuda, the CPU for local-task), and prints each relative error ||y - ref|| / ||ref||
and pyree's over PyTorch's; the exit status is 1 when a ratio is over ``LIMIT``. On an H200:

    python bench/models/f16_accuracy.py build /tmp/f16 --backend cuda      # here
    python bench/models/f16_accuracy.py run /tmp/f16 --device cuda         # carry /tmp/f16
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "models"))
import definitions  # noqa: E402

MODELS = ("efficientnet_b0", "regnet_y_400mf", "mobilenet_v2", "resnet18")
SHAPE = (1, 3, 224, 224)
LIMIT = 1.5   # pyree's f16 error at most this many times PyTorch's


def model(name: str) -> torch.nn.Module:
    """torchvision's ``name`` in f32, seeded: the same weights on every host."""
    torch.manual_seed(0)
    return definitions._init_batchnorm(getattr(definitions._torchvision().models, name)(weights=None).eval())


def example(seed: int = 1) -> torch.Tensor:
    return torch.randn(SHAPE, generator=torch.Generator().manual_seed(seed)).half()


def relative_error(got, ref) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if got.shape != ref.shape or not np.all(np.isfinite(got)):
        return float("inf")
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def build(out: Path, backend: str, names: list[str]) -> None:
    from pyree.compiler import CompileOptions, compile_str, import_torch
    out.mkdir(parents=True, exist_ok=True)
    manifest = {}
    options = CompileOptions(target_backends=[backend], cuda_target="sm_90")
    for name in names:
        m, x = model(name), example()
        checksum = definitions.weights_checksum(m)
        with torch.no_grad():
            reference = m.double()(x.double()).numpy()
        t0 = time.perf_counter()
        mlir = import_torch(m.half(), x)
        t1 = time.perf_counter()
        (out / f"{name}.vmfb").write_bytes(compile_str(mlir, options))
        np.save(out / f"{name}.x.npy", x.numpy())
        np.save(out / f"{name}.ref.npy", reference)
        manifest[name] = {"checksum": checksum, "backend": backend, "import_s": round(t1 - t0, 1),
                          "compile_s": round(time.perf_counter() - t1, 1)}
        print(name, manifest[name], flush=True)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))


def run(out: Path, device: str) -> int:
    import pyree.runtime as rt
    manifest = json.loads((out / "manifest.json").read_text())
    torch_device = "cuda" if device.startswith("cuda") else "cpu"
    print(f"{'model':16s} {'pyree f16':>10s} {'torch f16':>10s} {'ratio':>6s}   "
          f"({device}, torch on {torch_device})")
    worst = 0.0
    for name, info in manifest.items():
        m = model(name)
        if abs(definitions.weights_checksum(m) - info["checksum"]) > 1e-6 * info["checksum"]:
            print(f"{name}: weights differ from the build host's; torch builds models differently")
            return 2
        x, ref = np.load(out / f"{name}.x.npy"), np.load(out / f"{name}.ref.npy")
        module = rt.load_module((out / f"{name}.vmfb").read_bytes(), device=device)
        ours = relative_error(module["main"](x).to_host(), ref)
        with torch.no_grad():
            theirs = relative_error(m.half().to(torch_device)(torch.from_numpy(x).to(torch_device))
                                    .float().cpu().numpy(), ref)
        worst = max(worst, ours / theirs)
        print(f"{name:16s} {ours:10.2e} {theirs:10.2e} {ours / theirs:6.2f}", flush=True)
    return 1 if worst > LIMIT else 0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("step", choices=["build", "run"])
    p.add_argument("out", type=Path)
    p.add_argument("--backend", default="llvm-cpu")
    p.add_argument("--device", default="local-task")
    p.add_argument("--models", default=",".join(MODELS))
    args = p.parse_args()
    if args.step == "build":
        build(args.out, args.backend, args.models.split(","))
        return 0
    return run(args.out, args.device)


if __name__ == "__main__":
    sys.exit(main())
