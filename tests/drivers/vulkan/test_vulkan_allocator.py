"""Small buffers share VkDeviceMemory blocks (hal/vulkan/allocator.py): NVIDIA's driver spends
time on every submission per live VkDeviceMemory, so 600 arrays must not be 600 of them; and
each array, bound at its own range of a block, keeps its own bytes however they are
allocated, released and reused. Against numpy."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.runtime.hal.ffi import ffi

pytestmark = pytest.mark.vulkan


def test_small_buffers_share_blocks_and_keep_their_bytes(vulkan_device):
    device = rt.get_device(vulkan_device)
    allocator = ffi.from_handle(device._vt.self).allocator
    rng = np.random.default_rng(5)
    allocator.trim()
    before = allocator.memory_objects
    data = [rng.integers(-2**31, 2**31, int(n), dtype=np.int32)
            for n in rng.integers(1, 3000, 600)]
    held = [rt.asdevicearray(device, x) for x in data]
    assert allocator.memory_objects - before <= 2, allocator.memory_objects - before
    for k in range(0, 600, 2):  # every other one back to the pool, then new ones of new sizes
        held[k] = None
    more = [rng.integers(-2**31, 2**31, int(n), dtype=np.int32)
            for n in rng.integers(1, 5000, 300)]
    held += [rt.asdevicearray(device, x) for x in more]
    data += more
    for x, array in zip(data, held, strict=True):
        if array is not None:
            np.testing.assert_array_equal(array.to_host(), x)
    big = np.arange(3 << 20, dtype=np.int32)  # 12 MiB: a VkDeviceMemory of its own
    np.testing.assert_array_equal(rt.asdevicearray(device, big).to_host(), big)
    del held, array
    allocator.trim()
    # (a discrete GPU's device keeps one staging buffer for host writes, as large as the
    # largest write: the 12 MiB one's, a memory of its own)
    assert allocator.memory_objects <= before + 1
