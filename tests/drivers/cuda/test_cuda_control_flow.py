"""On an NVIDIA GPU: host-program loops and conditionals (tests/control_flow_cases.py) in all
three command-buffer modes, every branch reading a value a kernel wrote, from a module compiled
on a CPU-only machine (PYREE_CUDA_MODULE_DIR/control_flow.vmfb, made by build_modules.py) or
compiled here when that is unset. The op files of tests/e2e/ops run on CUDA in tests/frontends."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from control_flow_cases import CASES, MLIR, check_case  # noqa: E402

pytestmark = pytest.mark.cuda


def module_bytes() -> bytes:
    folder = os.environ.get("PYREE_CUDA_MODULE_DIR")
    if folder:
        return (Path(folder) / "control_flow.vmfb").read_bytes()
    from pyree.compiler import CompileOptions, compile_str
    return compile_str(MLIR, CompileOptions(target_backends=["cuda"], cuda_target="sm_90"))


@pytest.mark.parametrize("mode", ("direct", "stream", "graph"))
def test_control_flow_on_cuda(mode):
    import pyree.runtime as rt
    module = rt.load_module(module_bytes(), device=f"cuda://0?command_buffer={mode}")
    rng = np.random.default_rng(3)
    for case in CASES:
        check_case(module, case, rng)

