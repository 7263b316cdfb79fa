"""On an NVIDIA GPU: every case of tests/sort_cases.py (merge-sorted or counted) and 1-D sorts of a
million floats (20 merge passes) against PyTorch's stable sort order, from modules
build_modules.py compiled on the build machine (PYREE_CUDA_MODULE_DIR) or compiled here for
sm_90."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from sort_cases import CASES, LONG_CASES, file_name, matches  # noqa: E402

pytestmark = pytest.mark.cuda
ALL = {**CASES, **LONG_CASES}


@pytest.mark.parametrize("name", sorted(ALL))
def test_sort_on_cuda(name):
    import pyree.runtime as rt

    case = ALL[name]
    folder = os.environ.get("PYREE_CUDA_MODULE_DIR")
    if folder:
        vmfb = (Path(folder) / file_name(name)).read_bytes()
    else:
        from pyree.compiler import CompileOptions, compile_str
        vmfb = compile_str(case.program, CompileOptions(target_backends=["cuda"],
                                                        cuda_target="sm_90"))
    inputs = case.inputs(np.random.default_rng(3))
    out = rt.load_module(vmfb, device="cuda")["main"](*inputs)
    matches([np.asarray(o.to_host()) for o in out], case.reference(*inputs))
