"""The dynamic-shape soak (tests/runtime/dynamic_soak.py) on CUDA, in each command-buffer mode:
a few hundred mixed sizes of one module compiled for the cuda target, every answer against
numpy, device memory within what the largest size needed. Needs the cuda target to compile
kernels with run-time sizes."""

from __future__ import annotations

import pytest
from runtime.dynamic_soak import soak


@pytest.mark.cuda
@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["direct", "stream", "graph"])
def test_mixed_sizes(monkeypatch, mode):
    largest, peak = soak("cuda", f"cuda://0?command_buffer={mode}", monkeypatch)
    print(f"{mode}: the largest size held {largest} B of device memory, the soak {peak} B")
