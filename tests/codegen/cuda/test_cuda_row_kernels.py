"""CPU-only: the cuda target's row kernels (softmax, log_softmax, layernorm, rmsnorm): one
kernel per row-wise chain, a block per row with a barrier per phase, or a thread per short row."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from dtype_cases import ptx_of
from ptx_modules import cuda_executable
from tooling import require_module

require_module("xdsl")  # the compiler

from pyree.compiler import CompileOptions, compile_str  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "flow"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import row_kernel_cases as rows  # noqa: E402


@pytest.mark.parametrize("kind, phases", [("softmax", 2), ("log_softmax", 2), ("layernorm", 2),
                                          ("rmsnorm", 1)])
def test_row_chains_are_one_kernel_with_a_barrier_per_phase(ptxas, kind, phases):
    """Issue 11: a row-wise chain is one kernel. Rows of 128 or more take one block per row (a
    block-wide fold, so one barrier, per phase; then the row results); shorter rows one thread."""
    for n, block in ((1000, 256), (129, 128), (45, None)):
        for dtype in ("f32", "bf16"):
            vmfb = compile_str(rows.mlir(kind, 37, n, dtype),
                               CompileOptions(target_backends=["cuda"], cuda_target="sm_90a"))
            cuda = cuda_executable(vmfb)
            (export,) = cuda.exports
            ptx = ptx_of(vmfb)
            assert cuda.cubin.length > 0  # ptxas took it
            if block is None:
                assert "bar.sync" not in ptx and export.gridSize[0] * export.blockSize[0] >= 37
            else:
                assert (list(export.gridSize), export.blockSize[0]) == ([37, 1, 1], block)
                assert ptx.count("bar.sync") == phases


@pytest.mark.parametrize("kind", ["layernorm", "rmsnorm"])
def test_resident_rows_load_their_weights_before_the_first_barrier(kind):
    """A row resident in a block's registers loads the norm's weight (and bias), which only its
    row results read, with the row itself: in flight during the phases' folds and barriers
    instead of after them (GPT-2's decode-step layernorm, 768 long, 24 of them a step). The
    kernel run here on the CPU (nvptx_on_cpu.py) still gives numpy's numbers."""
    import numpy as np
    from nvptx_on_cpu import run_program

    text = rows.mlir(kind, 5, 1000, "f32")
    ptx = ptx_of(compile_str(text, CompileOptions(target_backends=["cuda"], cuda_target="sm_90a")))
    loads = ptx.count("ld.global")
    assert loads == 4 * (3 if kind == "layernorm" else 2)  # row, weight (, bias) at 4 points
    assert "ld.global" not in ptx[ptx.index("bar.sync"):]
    args = rows.inputs(kind, 5, 1000, "f32", np.random.default_rng(3), specials=True)
    rows.check(kind, run_program(text, list(args)), args, "f32")
