"""Long f32 reductions on Vulkan as accurate as numpy's (the cases of
tests/e2e/test_reduction_accuracy.py): each invocation cascades its strided sums
(codegen/spirv/reduction.py), then the workgroup folds them as a tree."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e"))
from test_reduction_accuracy import CASES, MLIR, check  # noqa: E402

pytestmark = pytest.mark.vulkan


@pytest.fixture(scope="module")
def module(vulkan_device):
    import pyree.runtime as rt
    from pyree.compiler import CompileOptions, compile_str
    # lavapipe's triple: the default Vulkan 1.2 baseline has no 64-bit integers for the indices.
    options = CompileOptions(target_backends=["vulkan-spirv"], vulkan_target="cpu-swiftshader-unknown")
    return rt.load_module(compile_str(MLIR, options), device=vulkan_device)


@pytest.mark.parametrize("name", sorted(CASES))
def test_long_reduction_is_as_accurate_as_numpy(module, name):
    check(module, name)
