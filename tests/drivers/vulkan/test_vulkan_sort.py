"""Whole sorts on a Vulkan device (lavapipe in CI): every case of tests/sort_cases.py, merge-sorted
or counted, matches PyTorch's stable sort exactly (NaN, +-inf, -0.0, ties)."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from codegen.spirv.spirv_modules import vulkan_vmfb
from sort_cases import CASES, matches

pytestmark = pytest.mark.vulkan


@pytest.mark.parametrize("name", sorted(CASES))
def test_sort_on_vulkan(name, vulkan_device):
    case = CASES[name]
    inputs = case.inputs(np.random.default_rng(3))
    out = rt.load_module(vulkan_vmfb(case.program), device=vulkan_device)["main"](*inputs)
    matches([np.asarray(o.to_host()) for o in out], case.reference(*inputs))
