"""One loaded module called from 8 threads at once on a Vulkan device (lavapipe in CI, the GPU in
tests/drivers/cuda/run_on_device.sh's runs): every result equals, bit for bit, the single-threaded one."""

from __future__ import annotations

import pyree.runtime as rt
import pytest
from concurrency_cases import PROGRAMS, inputs
from pyree.compiler import CompileOptions, compile_str
from stress import hammer

pytestmark = pytest.mark.vulkan


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_eight_threads_get_the_single_threaded_answers(vulkan_device, name):
    program = PROGRAMS[name]
    vmfb = compile_str(program.mlir, CompileOptions(target_backends=["vulkan-spirv"]))
    module = rt.load_module(vmfb, device=vulkan_device)
    assert hammer(module, program.function, inputs(program, 6), threads=8, calls=12) == []
