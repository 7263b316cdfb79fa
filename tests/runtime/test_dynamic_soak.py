"""One module with a dynamic batch, called at a few hundred mixed sizes (0, 1, primes, repeats):
every answer against numpy, and the device memory within what the largest size needed
(dynamic_soak.py). The same soak on CUDA: tests/drivers/cuda/test_cuda_dynamic_soak.py."""

from __future__ import annotations

import pytest

from .dynamic_soak import soak


@pytest.mark.timeout(300)
def test_mixed_sizes_on_local_task(monkeypatch):
    largest, peak = soak("llvm-cpu", "local-task", monkeypatch)
    assert largest > 0 and peak > 0
