"""On an NVIDIA GPU: every case of tests/sort_cases.py (merge-sorted or counted) against PyTorch's
stable sort order, and a 1-D sort of a million floats (20 merge passes) against numpy, compiled
here for sm_90."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from sort_cases import CASES, matches, sort_case  # noqa: E402

pytestmark = pytest.mark.cuda


def run(case, rng):
    import pyree.runtime as rt
    from pyree.compiler import CompileOptions, compile_str

    vmfb = compile_str(case.program, CompileOptions(target_backends=["cuda"], cuda_target="sm_90"))
    inputs = case.inputs(rng)
    out = rt.load_module(vmfb, device="cuda")["main"](*inputs)
    return [np.asarray(o.to_host()) for o in out], case.reference(*inputs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_sort_on_cuda(name):
    matches(*run(CASES[name], np.random.default_rng(3)))


@pytest.mark.parametrize("descending", [False, True])
def test_a_million_floats_on_cuda(descending):
    matches(*run(sort_case((1_000_000,), 0, np.float32, descending), np.random.default_rng(4)))
