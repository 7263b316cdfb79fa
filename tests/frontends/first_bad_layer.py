"""Finds the first layer of a model whose result on a device departs from PyTorch: each prefix of
a torchvision-style ``features`` Sequential (then the whole model) is exported through one
frontend, compiled here and run on the GPU host, which has no compiler.

    python3 tests/frontends/first_bad_layer.py build OUT [--model small_cnn] [--frontend tosa|linalg]
    python3 tests/frontends/first_bad_layer.py run OUT --driver vulkan        (on the GPU host)
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

TARGETS = {"vulkan": "vulkan-spirv", "cuda": "cuda", "local-task": "llvm-cpu"}


def build(out: Path, model_name: str, frontend: str) -> None:
    import torch
    from pyree.compiler import CompileOptions, compile_str
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
    from definitions import MODELS, example_input
    model, x = MODELS[model_name][0](), example_input(model_name)
    parts = [(f"features_{k}", torch.nn.Sequential(*list(model.features)[:k]))
             for k in range(1, len(model.features) + 1)] + [("whole", model)]
    out.mkdir(parents=True, exist_ok=True)
    for name, part in parts:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            if frontend == "tosa":
                from torch_mlir import fx
                text = str(fx.export_and_import(part, x, output_type="tosa"))
            else:
                from pyree.compiler import import_torch
                text = import_torch(part, x)
            expected = part(x).numpy()
        for target in set(TARGETS.values()):
            (out / f"{name}.{target}.vmfb").write_bytes(
                compile_str(text, CompileOptions(target_backends=[target]), name))
        np.savez(out / f"{name}.npz", x=x.numpy(), y=expected)


def run(folder: Path, driver: str) -> None:
    import pyree.runtime as rt
    for npz in sorted(folder.glob("*.npz"), key=lambda p: (p.stem == "whole", len(p.stem), p.stem)):
        data = np.load(npz)
        module = rt.load_module((folder / f"{npz.stem}.{TARGETS[driver]}.vmfb").read_bytes(),
                                device=driver)
        got = np.asarray(module["main"](data["x"]))
        error = np.abs(got - data["y"]).max() / max(np.abs(data["y"]).max(), 1e-30)
        print(f"{npz.stem:12s} {tuple(got.shape)!s:18s} max error / max |y| = {error:.2e}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("action", choices=("build", "run"))
    p.add_argument("folder", type=Path)
    p.add_argument("--model", default="small_cnn")
    p.add_argument("--frontend", choices=("tosa", "linalg"), default="tosa")
    p.add_argument("--driver", default="vulkan")
    args = p.parse_args()
    if args.action == "build":
        build(args.folder, args.model, args.frontend)
    else:
        run(args.folder, args.driver)


if __name__ == "__main__":
    main()
