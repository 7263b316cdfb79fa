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


CONV = """
func.func @conv(%x: tensor<1x32x28x28xf32>, %w: tensor<64x32x3x3xf32>) -> tensor<1x64x28x28xf32> {
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x32x28x28xf32> to tensor<1x32x30x30xf32>
  %e = tensor.empty() : tensor<1x64x28x28xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x64x28x28xf32>) -> tensor<1x64x28x28xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
    ins(%p, %w : tensor<1x32x30x30xf32>, tensor<64x32x3x3xf32>) outs(%f : tensor<1x64x28x28xf32>) -> tensor<1x64x28x28xf32>
  return %y : tensor<1x64x28x28xf32>
}"""


def test_a_call_that_clears_its_transient_first_is_right_every_time(vulkan_device):
    """The call zero-fills the transient bytes no GPU export proves written, then its im2col
    writes them: on NVIDIA's driver, without a barrier after the fills, 5-25% of these calls
    had one GEMM tile computed from zeroed patches (BENCHMARKS.md, twenty-third session)."""
    from numpy.lib.stride_tricks import sliding_window_view

    vmfb = compile_str(CONV, CompileOptions(target_backends=["vulkan-spirv"]))
    (function,) = rt.read_module(vmfb).tree.functions
    assert function.clears, "no clears: this no longer tests the fills' barrier"
    module = rt.load_module(vmfb, device=vulkan_device)
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal((1, 32, 28, 28)).astype(np.float32) for _ in range(3)]
    w = rng.standard_normal((64, 32, 3, 3)).astype(np.float32)
    dw = rt.asdevicearray(module.device, w)
    want = [np.einsum("nchwij,fcij->nfhw",
                      sliding_window_view(np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1))),
                                          (3, 3), axis=(2, 3)), w) for x in inputs]
    for i in range(60):
        got = module.conv(inputs[i % 3], dw).to_host()
        np.testing.assert_allclose(got, want[i % 3], rtol=1e-4, atol=1e-4, err_msg=f"call {i}")
