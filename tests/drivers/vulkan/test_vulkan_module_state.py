"""Module state, loops of blocks and cf.assert on a Vulkan device (tests/module_state_cases.py)."""

from __future__ import annotations

import pyree.runtime as rt
import pytest
from module_state_cases import MLIR, check_module_state
from pyree.compiler import CompileOptions, compile_str

pytestmark = pytest.mark.vulkan


def test_module_state_loops_of_blocks_and_asserts_on_vulkan(vulkan_device):
    vmfb = compile_str(MLIR, CompileOptions(target_backends=["vulkan-spirv"]))
    check_module_state(rt.load_module(vmfb, device=vulkan_device))
