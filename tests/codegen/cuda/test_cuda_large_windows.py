"""Large-window folds on cuda's window template (codegen/common/llvm_gpu/window.py: the input
tile staged in shared memory), the NVPTX IR run here on the CPU, every case of
tests/window_cases.py against its float64 numpy reference; and which kernels the template takes."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from tooling import require_module

require_module("llvmlite")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from nvptx_on_cpu import run_program  # noqa: E402
from window_cases import CASES, matches  # noqa: E402

# Stride and dilation both 2 leave some input positions no stand-in loop values reach; a global
# pool has one output per channel.
NOT_TAKEN = {"depthwise_12x12_stride2_dilation2", "sum_pool_global_14x14"}


def kernels_of(text: str):
    from pyree.compiler.flow.kernels import outline
    from pyree.compiler.flow.passes import flow_passes, run_flow
    from pyree.compiler.input import parse_mlir
    from pyree.compiler.input.lowering import lower_to_tensor_program
    from pyree.compiler.tensor_program import Generic

    program = lower_to_tensor_program(parse_mlir(text, "program.mlir"))
    function = run_flow(program, flow_passes(gpu=True, implicit_gemm=True)).functions[0]
    return [outline(op, "k") for op in function.ops if isinstance(op, Generic)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_window_template_takes_large_windows(name):
    from pyree.compiler.codegen.common.llvm_gpu import window
    from pyree.compiler.codegen.cuda import TEMPLATES, resolve_target
    from pyree.compiler.codegen.interface import choose

    (kernel,) = kernels_of(CASES[name].program)
    template, _ = choose(TEMPLATES, kernel, resolve_target("sm_90a"))
    assert (template is window) == (name not in NOT_TAKEN)


@pytest.mark.parametrize("name", sorted(CASES))
def test_large_windows_match_numpy(name):
    case = CASES[name]
    inputs = case.inputs(np.random.default_rng(11))
    matches(run_program(case.program, inputs), case.reference(*inputs), case.tol)
