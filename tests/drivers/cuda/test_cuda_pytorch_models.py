"""On an NVIDIA GPU: whole PyTorch models compiled for cuda match PyTorch (tests/codegen/cuda/
test_cuda_models.py checks that they compile)."""

from __future__ import annotations

import pytest
from codegen.cuda.cases import shufflenet_v2
from tooling import require_module

require_module("xdsl")  # the compiler

from pyree.compiler import CompileOptions, compile_str  # noqa: E402


@pytest.mark.cuda
def test_shufflenet_v2_on_the_gpu_matches_pytorch():
    import numpy as np
    import pyree.runtime as rt
    torch = require_module("torch")
    model, x, mlir = shufflenet_v2()
    module = rt.load_module(compile_str(mlir, CompileOptions(target_backends=["cuda"])),
                            device="cuda")
    got = np.asarray(module["main"](x.numpy()).to_host(), np.float64)
    with torch.no_grad():
        ref = model.double()(x.double()).numpy()
    assert np.all(np.isfinite(got))
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) <= 1e-4
