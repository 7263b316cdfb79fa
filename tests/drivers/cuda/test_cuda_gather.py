"""On an NVIDIA GPU: every case of tests/gather_cases.py against numpy (computed indices, their
clamping, and index casts and narrow arithmetic that wrap, as arith defines them), from modules
build_modules.py compiled on the build machine (PYREE_CUDA_MODULE_DIR) or compiled here for sm_90;
CPU-only hosts check the same cases assemble (tests/e2e/test_gather.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from gather_cases import CASES  # noqa: E402

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("name", sorted(CASES))
def test_gather_on_cuda(name):
    import pyree.runtime as rt

    case = CASES[name]
    inputs = case.inputs(np.random.default_rng(7))
    folder = os.environ.get("PYREE_CUDA_MODULE_DIR")
    if folder:
        vmfb = (Path(folder) / f"gather_{name}.vmfb").read_bytes()
    else:
        from pyree.compiler import CompileOptions, compile_str
        vmfb = compile_str(case.program, CompileOptions(target_backends=["cuda"],
                                                        cuda_target="sm_90"))
    out = rt.load_module(vmfb, device="cuda")["main"](*inputs)
    got = np.asarray(out.to_host() if hasattr(out, "to_host") else out)
    want = case.reference(*inputs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
