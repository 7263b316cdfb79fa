"""Compiles the models of tests/models/definitions.py on this CPU-only machine for a GPU host:

    python3 bench/models/build_modules.py OUT_DIR [--models a,b] [--pyree] [--iree cuda,vulkan] [--f16]

--pyree writes ``<model>.vmfb`` with both the cuda (sm_90) and vulkan-spirv (hopper-h100-linux)
executables in one module, so the weights travel once (``--backends cuda``: cuda alone). --iree
compiles the same linalg MLIR with iree-compile (IREE_COMPILE, default the one on PATH) into
``<model>.iree_<target>.vmfb``: cuda for sm_80 (IREE 3.13 rejects sm_90), vulkan for ``ampere``.
``manifest.json`` records each model's input, function and weights checksum, so the GPU host
can rebuild the same torch model and prove it holds the same weights. --f16 builds each model
converted to float16 (``model.half()``, input and weights f16) as ``<model>_f16``: the second table
of issue 11, against PyTorch in f16.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "models"), str(ROOT / "bench")]
import definitions  # noqa: E402
import iree_install  # noqa: E402
from pyree.compiler import CompileOptions, compile_str, import_torch  # noqa: E402

IREE_FLAGS = {
    "cuda": ["--iree-hal-target-backends=cuda", "--iree-cuda-target=sm_80"],
    "vulkan": ["--iree-hal-target-backends=vulkan-spirv", "--iree-vulkan-target=ampere"],
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--models", default=",".join(definitions.MODELS))
    p.add_argument("--pyree", action="store_true")
    p.add_argument("--iree", default="")
    p.add_argument("--f16", action="store_true", help="build the models converted to float16")
    p.add_argument("--backends", default="cuda,vulkan-spirv",
                   help="pyree's targets; cuda alone gathers convolution patches into the GEMMs "
                        "(flow/implicit_gemm.py), which a module shared with vulkan-spirv does not")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    iree_compile = iree_install.iree_compile() if args.iree else ""
    for name in args.models.split(","):
        factory, shape, dtype, function = definitions.MODELS[name]
        model, x = factory(), definitions.example_input(name)
        if args.f16:
            model, x, name = model.half(), x.half(), f"{name}_f16"
        t0 = time.perf_counter()
        mlir = import_torch(model, x, function_name=function)
        entry = {"function": function, "shape": list(shape), "dtype": str(x.dtype).split(".")[-1],
                 "checksum": definitions.weights_checksum(model),
                 "import_s": round(time.perf_counter() - t0, 2)}
        if args.pyree:
            t0 = time.perf_counter()
            options = CompileOptions(target_backends=args.backends.split(","), cuda_target="sm_90",
                                     vulkan_target="hopper-h100-linux")
            (args.out / f"{name}.vmfb").write_bytes(compile_str(mlir, options))
            entry["pyree_compile_s"] = round(time.perf_counter() - t0, 2)
        for target in filter(None, args.iree.split(",")):
            source = args.out / f"{name}.mlir"
            source.write_text(mlir)
            t0 = time.perf_counter()
            subprocess.run([iree_compile, str(source), *IREE_FLAGS[target],
                            "-o", str(args.out / f"{name}.iree_{target}.vmfb")], check=True)
            entry[f"iree_{target}_compile_s"] = round(time.perf_counter() - t0, 2)
            source.unlink()
        manifest[name] = {**manifest.get(name, {}), **entry}
        print(name, entry, flush=True)
    manifest_path.write_text(json.dumps(manifest, indent=1))


if __name__ == "__main__":
    main()
