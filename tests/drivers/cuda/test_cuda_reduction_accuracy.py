"""On an NVIDIA GPU: long f32 reductions as accurate as numpy's (the cases of
tests/e2e/test_reduction_accuracy.py): a block's threads cascade their strided sums, the serial
template its sums of a split fold's partials (codegen/common/llvm_gpu/reduction.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e"))
from test_reduction_accuracy import CASES, MLIR, check  # noqa: E402

pytestmark = pytest.mark.cuda
NAME = "reduction_accuracy"  # the module tests/drivers/cuda/build_modules.py writes


@pytest.fixture(scope="module")
def module():
    import pyree.runtime as rt
    folder = os.environ.get("PYREE_CUDA_MODULE_DIR")
    if folder:
        data = (Path(folder) / f"{NAME}.vmfb").read_bytes()
    else:
        from pyree.compiler import CompileOptions, compile_str
        data = compile_str(MLIR, CompileOptions(target_backends=["cuda"], cuda_target="sm_90"))
    return rt.load_module(data, device="cuda")


@pytest.mark.parametrize("name", sorted(CASES))
def test_long_reduction_is_as_accurate_as_numpy(module, name):
    check(module, name)
