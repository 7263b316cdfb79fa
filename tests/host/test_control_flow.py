"""Loops and conditionals in the host program (scf.for/while/if): trip counts and branches taken
from device results, run on both CPU drivers and compared with numpy (tests/control_flow_cases.py),
through the Python API and pyree-run-module."""

import subprocess
import sys

import numpy as np
import pyree.runtime as rt
import pytest
from control_flow_cases import CASES, MLIR, check_case
from pyree.compiler import compile_str


@pytest.fixture(scope="module")
def vmfb():
    return compile_str(MLIR)


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_control_flow_matches_numpy(vmfb, device):
    module = rt.load_module(vmfb, device=device)
    rng = np.random.default_rng(7)
    for case in CASES:
        check_case(module, case, rng)


def test_functions_without_control_flow_keep_one_command_buffer(vmfb):
    """The fast path (submits only: one CUDA graph replay per call) stays for straight code."""
    module = rt.load_module(compile_str("""
      func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
        %y = arith.addf %x, %x : tensor<4xf32>
        return %y : tensor<4xf32>
      }"""), device="local-sync")
    assert module.f._submits_only
    assert not rt.load_module(vmfb, device="local-sync").fib._submits_only


def test_loop_through_the_cli(vmfb, tmp_path):
    path = tmp_path / "loops.vmfb"
    path.write_bytes(vmfb)
    result = subprocess.run([sys.executable, "-m", "pyree.runtime.tools.run_module",
                             f"--module={path}", "--function=fib", "--input=i32=90"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "EXEC @fib" in result.stdout and "i64=2880067194370816120" in result.stdout



def test_a_loop_iteration_is_one_run_of_commands(vmfb):
    """scf.for's condition is straight-line code, rotated to the end of the body: the loop is
    one command buffer and one conditional branch back per iteration, no unconditional jump."""
    from pyree.runtime.hal.device import CommandBuffer
    from pyree.runtime.vm.program import BranchStep
    steps = rt.load_module(vmfb, device="local-sync").fib._program.steps
    branches = [s for s in steps if isinstance(s, BranchStep)]
    assert len(branches) == 2 and all(b.condition is not None for b in branches)
    back = branches[1]
    assert back.target < steps.index(back)
    body = steps[back.target:steps.index(back)]
    assert len(body) == 1 and isinstance(body[0], CommandBuffer)
