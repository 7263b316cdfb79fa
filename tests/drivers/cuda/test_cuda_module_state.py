"""Module state, loops of blocks and cf.assert on a CUDA device (tests/module_state_cases.py), in
every command-buffer mode: the state buffer is written by a copy command, which a CUDA graph
replays on every call."""

from __future__ import annotations

import pyree.runtime as rt
import pytest
from module_state_cases import MLIR, check_module_state
from pyree.compiler import CompileOptions, compile_str

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("mode", ["graph", "stream", "direct"])
def test_module_state_loops_of_blocks_and_asserts_on_cuda(mode):
    vmfb = compile_str(MLIR, CompileOptions(target_backends=["cuda"]))
    check_module_state(rt.load_module(vmfb, device=f"cuda://0?command_buffer={mode}"))
