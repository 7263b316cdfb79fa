"""Queue submission on the vulkan driver: a wait on work already queued on the device is left to
queue order (so back-to-back calls overlap on the GPU), while waits for the host and failures of
earlier work still hold later work back."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numerics_cases as C  # noqa: E402
import pyree.runtime as rt  # noqa: E402
from pyree.compiler import CompileOptions, compile_str  # noqa: E402

pytestmark = pytest.mark.vulkan
SHAPE = (37, 53)


def add_function():
    vmfb = compile_str(C.add(SHAPE).mlir, CompileOptions(target_backends=["vulkan-spirv"]))
    module = rt.load_module(vmfb, device="vulkan")
    return module, module[module.function_names[0]]


def test_queued_calls_chain_on_the_device_with_no_semaphore_waits(vulkan_device):
    from pyree.runtime.hal.ffi import ffi
    module, first = add_function()
    _, second = add_function()   # a second function: a second timeline to chain across
    device = ffi.from_handle(module.device._vt.self)   # the driver's VulkanDevice
    rng = np.random.default_rng()
    a, b = C.rand(rng, SHAPE), C.rand(rng, SHAPE)
    result, db = rt.asdevicearray(module.device, a), rt.asdevicearray(module.device, b)
    submit = device.vk.vkQueueSubmit
    waits = []

    def recording_submit(queue, count, info, fence):
        waits.append(info.waitSemaphoreCount)
        return submit(queue, count, info, fence)

    device.vk.vkQueueSubmit = recording_submit
    try:
        for i in range(12):   # each call reads the previous call's unfinished result
            result = (first if i % 2 else second)(result, db)
        got = result.to_host()
    finally:
        device.vk.vkQueueSubmit = submit
    np.testing.assert_allclose(got, a.astype(np.float64) + 12 * b.astype(np.float64), rtol=1e-5,
                               atol=1e-5)
    assert len(waits) >= 12 and not any(waits), waits


@pytest.fixture
def device(vulkan_device):
    from pyree.hal.vulkan.instance import VulkanDriver
    device = VulkanDriver().create_device("")
    yield device
    device.release()


def test_work_queued_after_a_wait_for_the_host_runs_only_after_the_signal(device):
    empty = device.create_command_buffer([], 0)
    host, first, second = (device.create_semaphore(0) for _ in range(3))
    device.queue_submit(empty, [], [(host, 1)], [(first, 1)])
    device.queue_submit(empty, [], [(first, 1)], [(second, 1)])  # left to queue order
    time.sleep(0.05)
    assert (first.query(), second.query()) == (0, 0)
    host.signal(1)
    second.wait(1)
    assert first.query() == 1


def test_a_wait_on_failed_work_fails_the_submission_and_its_signals(device):
    from pyree.runtime.hal.python_driver import HalError
    empty = device.create_command_buffer([], 0)
    failed, out = device.create_semaphore(0), device.create_semaphore(0)
    device.queue_submit(empty, [], [], [(failed, 1)])
    failed.fail(HalError("INTERNAL", "kernel 'k' faulted"))
    with pytest.raises(HalError, match="kernel 'k' faulted"):
        device.queue_submit(empty, [], [(failed, 1)], [(out, 1)])
    with pytest.raises(HalError, match="kernel 'k' faulted"):
        out.wait(1)
