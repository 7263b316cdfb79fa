"""Host-program loops and conditionals on a Vulkan device (lavapipe in CI): every case of
tests/control_flow_cases.py matches numpy, each branch reading a value a shader wrote."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from control_flow_cases import CASES, MLIR, check_case
from pyree.compiler import CompileOptions, compile_str

pytestmark = pytest.mark.vulkan


def test_control_flow_on_vulkan(vulkan_device):
    module = rt.load_module(compile_str(MLIR, CompileOptions(target_backends=["vulkan-spirv"])),
                            device=vulkan_device)
    rng = np.random.default_rng(11)
    for case in CASES:
        check_case(module, case, rng)

