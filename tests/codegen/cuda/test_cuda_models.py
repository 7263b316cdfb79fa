"""CPU-only: whole models compile for the cuda target (their GPU runs:
tests/drivers/cuda/test_cuda_pytorch_models.py)."""

from __future__ import annotations

import pytest
from cases import shufflenet_v2
from ptx_modules import cuda_executable
from tooling import require_module

require_module("xdsl")  # the compiler

from pyree.compiler import CompileOptions, compile_str  # noqa: E402


@pytest.mark.slow
def test_shufflenet_v2_compiles_for_cuda(ptxas):
    """Its fused concat + channel shuffle had failed LLVM's verifier (test_cuda_elementwise.py:
    vector loads inside a branch)."""
    _, _, mlir = shufflenet_v2()
    cuda = cuda_executable(compile_str(mlir, CompileOptions(target_backends=["cuda"])))
    assert cuda.ptx.length > 0 and cuda.cubin.length > 0
