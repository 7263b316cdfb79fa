"""Gathers on the vulkan-spirv target: the shaders pass spirv-val, and on a device (lavapipe in CI)
every case of tests/gather_cases.py matches numpy, clamped out-of-range indices included."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from gather_cases import CASES
from pyree.compiler import CompileOptions, compile_str
from spirv_modules import spirv_binaries, validate

pytestmark = pytest.mark.vulkan


def vulkan_module(name: str) -> bytes:
    return compile_str(CASES[name].program, CompileOptions(target_backends=["vulkan-spirv"]))


@pytest.mark.parametrize("name", sorted(CASES))
def test_gather_shaders_pass_spirv_val(name, tmp_path):
    for code, _ in spirv_binaries(vulkan_module(name)):
        assert validate(code, tmp_path) == ""


@pytest.mark.parametrize("name", sorted(CASES))
def test_gather_on_vulkan(name, vulkan_device):
    case = CASES[name]
    inputs = case.inputs(np.random.default_rng(7))
    out = rt.load_module(vulkan_module(name), device=vulkan_device)["main"](*inputs)
    got = np.asarray(out.to_host() if hasattr(out, "to_host") else out)
    want = case.reference(*inputs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
