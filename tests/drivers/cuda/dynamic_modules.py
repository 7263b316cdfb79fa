"""The modules of the dynamic-shape GPU tests (tests/drivers/cuda/test_cuda_dynamic.py and
tests/drivers/rocm/hip_on_cuda/test_rocm_on_cuda_dynamic.py), built on the CPU machine, since the
GPU host has neither the compiler's dependencies nor torch-mlir:

    python3 tests/drivers/cuda/dynamic_modules.py OUT_DIR [sm_90]

writes OUT_DIR/cuda/ and OUT_DIR/rocm/ (the same modules relabelled for the rocm driver on the
HIP-on-CUDA shim): one module per MLIR program of tests/e2e/test_dynamic_shapes.py, named by its
text's digest (``file_name``), which the tests' ``load`` looks up; and per torch model of that
file, compiled with a dynamic batch, its module and an .npz of fresh inputs at batches 1, a prime
and large with PyTorch's outputs for them (``torch_case``), computed here.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[2]),
                str(Path(__file__).resolve().parents[1] / "rocm" / "hip_on_cuda")]
from e2e.test_dynamic_shapes import (  # noqa: E402
    EXP_ADD_ROWSUM,
    MATMUL,
    RESHAPE,
    SHORTER,
    _Head,
    _SmallCnn,
)

PROGRAMS = (EXP_ADD_ROWSUM, MATMUL, RESHAPE, SHORTER)
BATCHES = (1, 13, 1031)
# name: (model maker, one input's shape past the batch, the input's name in forward)
TORCH_MODELS = {"mlp_softmax": (_Head, (16,), "x"), "cnn": (_SmallCnn, (3, 17, 13), "x"),
                "layernorm": (lambda: _affine_layernorm(37), (37,), "input")}


def _affine_layernorm(n: int):
    import torch
    model = torch.nn.LayerNorm(n)
    with torch.no_grad():
        model.weight.normal_()
        model.bias.normal_()
    return model


def file_name(mlir: str) -> str:
    return f"dynamic_{hashlib.sha256(mlir.encode()).hexdigest()[:16]}.vmfb"


def torch_case(name: str, target: str) -> tuple[bytes, dict]:
    """(the cuda module of TORCH_MODELS[name] with a dynamic batch, {f"x{n}": input, f"y{n}":
    PyTorch's output} for each batch n of BATCHES)."""
    import torch
    from pyree.compiler import CompileOptions, compile_str, import_torch
    make, shape, arg = TORCH_MODELS[name]
    torch.manual_seed(3)
    model = make().eval()
    batch = torch.export.Dim("batch", min=1, max=4096)
    mlir = import_torch(model, torch.randn(2, *shape), dynamic_shapes={arg: {0: batch}})
    module = compile_str(mlir, CompileOptions(target_backends=["cuda"], cuda_target=target))
    arrays = {}
    for n in BATCHES:
        x = torch.randn(n, *shape)
        with torch.no_grad():
            arrays[f"x{n}"], arrays[f"y{n}"] = x.numpy(), model(x).numpy()
    return module, arrays


def main(out: Path, target: str = "sm_90") -> None:
    from pyree.compiler import CompileOptions, compile_str
    from relabel import relabel
    out.mkdir(parents=True, exist_ok=True)
    cuda = CompileOptions(target_backends=["cuda"], cuda_target=target)
    modules = {file_name(mlir): compile_str(mlir, cuda) for mlir in PROGRAMS}
    for name in TORCH_MODELS:
        modules[f"{name}.vmfb"], arrays = torch_case(name, target)
        np.savez(out / f"{name}.npz", **arrays)
    for driver, convert in (("cuda", lambda m: m), ("rocm", relabel)):
        (out / driver).mkdir(exist_ok=True)
        for file, data in modules.items():
            (out / driver / file).write_bytes(convert(data))


if __name__ == "__main__":
    main(Path(sys.argv[1]), *sys.argv[2:3])
