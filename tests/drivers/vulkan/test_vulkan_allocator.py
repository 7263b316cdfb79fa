"""Small buffers share VkDeviceMemory blocks (hal/vulkan/allocator.py): NVIDIA's driver spends
time on every submission per live VkDeviceMemory, so 600 arrays must not be 600 of them; and
each array, bound at its own range of a block, keeps its own bytes however they are
allocated, released and reused; a block the driver cannot bind in sends the buffer to memory of
its own (out of memory) or to a DriverError (any other error). Against numpy."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from drivers.vulkan.test_vulkan_pipeline_cache import driver_device

pytestmark = pytest.mark.vulkan


def test_small_buffers_share_blocks_and_keep_their_bytes(vulkan_device):
    device = rt.get_device(vulkan_device)
    allocator = driver_device(device).allocator
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


@pytest.mark.parametrize("result", [-2, -3])  # VK_ERROR_OUT_OF_DEVICE_MEMORY, _INITIALIZATION_FAILED
def test_a_failed_bind_in_a_block(vulkan_device, result):
    device = rt.get_device(vulkan_device, cache=False)
    vk = driver_device(device).vk
    bind, calls = vk.vkBindBufferMemory, []

    def failing_bind(dev, buffer, memory, offset):
        calls.append(offset)
        return result if len(calls) == 1 else bind(dev, buffer, memory, offset)

    vk.vkBindBufferMemory = failing_bind
    x = np.arange(1000, dtype=np.int32)
    try:
        if result == -2:
            np.testing.assert_array_equal(rt.asdevicearray(device, x).to_host(), x)
            assert len(calls) == 2  # then bound in memory of its own
        else:
            with pytest.raises(rt.DriverError, match="vkBindBufferMemory"):
                rt.asdevicearray(device, x)
    finally:
        vk.vkBindBufferMemory = bind
    np.testing.assert_array_equal(rt.asdevicearray(device, x + 1).to_host(), x + 1)
