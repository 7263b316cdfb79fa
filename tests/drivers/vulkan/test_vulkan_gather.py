"""Gathers on a Vulkan device (lavapipe in CI): every case of tests/gather_cases.py matches numpy,
clamped out-of-range indices included (tests/codegen/spirv/test_spirv_gather.py validates the
shaders)."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from codegen.spirv.spirv_modules import vulkan_vmfb
from gather_cases import CASES

pytestmark = pytest.mark.vulkan


@pytest.mark.parametrize("name", sorted(CASES))
def test_gather_on_vulkan(name, vulkan_device):
    case = CASES[name]
    inputs = case.inputs(np.random.default_rng(7))
    out = rt.load_module(vulkan_vmfb(case.program), device=vulkan_device)["main"](*inputs)
    got = np.asarray(out.to_host() if hasattr(out, "to_host") else out)
    want = case.reference(*inputs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
