"""Sliding-window folds with large windows (tests/window_cases.py: depthwise convolutions and
poolings of 128 taps and more, which the GPU targets stage through shared memory) on every
device, against float64 numpy at odd sizes with NaN and infinities in the inputs."""

from __future__ import annotations

import numpy as np
import pytest
from jax_runs import DEVICES, module_for
from window_cases import CASES, matches


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_large_windows_match_numpy(name, device):
    case = CASES[name]
    inputs = case.inputs(np.random.default_rng(5))
    got = np.asarray(module_for(case.program, device)["f"](*inputs).to_host())
    matches(got, case.reference(*inputs), case.tol)
