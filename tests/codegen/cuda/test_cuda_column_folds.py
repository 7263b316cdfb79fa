"""Column folds on cuda (tests/column_fold_cases.py), the NVPTX IR of every kernel run here on
the CPU: the split ones' partials and final fold, and which template takes each kernel (a
thread per output where the outputs fill the GPU, reading rows across neighbours)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from tooling import require_module

require_module("llvmlite")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from column_fold_cases import CASES, matches  # noqa: E402
from nvptx_on_cpu import run_program  # noqa: E402

# The emulator runs every thread: the 4096 x 4096 case is the GPU tests' (tests/e2e).
SMALL = sorted(n for n in CASES if n != "mean_middle_1x4096x4096")


@pytest.mark.parametrize("name", SMALL)
def test_column_folds_match_numpy(name):
    case = CASES[name]
    inputs = case.inputs(np.random.default_rng(4))
    matches(run_program(case.program, inputs), case.reference(*inputs))


def test_the_partials_take_a_thread_per_output():
    """The split mean's partial fold (16 x 4096 outputs of 256 rows) takes the serial template:
    its kernel has no shared memory and a grid of a thread per output."""
    from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Module
    from pyree.compiler.codegen.cuda import emit_kernel, resolve_target
    from pyree.compiler.codegen.cuda.nvptx import NVPTX
    from pyree.compiler.codegen.cuda.ptx import data_layout
    from test_cuda_large_windows import kernels_of

    partial, final = kernels_of(CASES["mean_middle_1x4096x4096"].program)
    target = resolve_target("sm_90a")
    module = Module(data_layout(target), NVPTX)
    launch = emit_kernel(module, partial, "k", target)
    assert "addrspace(3)" not in module.text()
    assert launch.grid[0] * launch.block[0] >= 16 * 4096
