"""Timeline semaphores (Vulkan 1.2 core): queue submissions wait on and signal them on the GPU;
the host queries, signals and waits through vkGetSemaphoreCounterValue / vkSignalSemaphore /
vkWaitSemaphores. A failed submission marks its semaphores failed, so waiters get its error
instead of waiting forever. ``queued_value`` is the highest value a submission already on the
device's queue will signal: waits up to it are implied by queue order (see device.py)."""

from __future__ import annotations

import time

from pyree.hal.vulkan.symbols import Functions, check, ffi
from pyree.runtime.hal.ffi import INFINITE_TIMEOUT_NS
from pyree.runtime.hal.python_driver import HalError, TimelineSemaphore

STYPE_SEMAPHORE_TYPE_CREATE_INFO, STYPE_SEMAPHORE_CREATE_INFO = 1000207002, 9
STYPE_SEMAPHORE_WAIT_INFO, STYPE_SEMAPHORE_SIGNAL_INFO = 1000207004, 1000207005
SEMAPHORE_TYPE_TIMELINE = 1
VK_TIMEOUT = 2
_POLL_NS = 50_000_000  # how often a waiter looks for a failure recorded by the host


class VulkanSemaphore(TimelineSemaphore):
    def __init__(self, vk: Functions, device, initial_value: int):
        super().__init__(initial_value)
        self.vk, self.device = vk, device
        kind = ffi.new("VkSemaphoreTypeCreateInfo *", {"sType": STYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                                       "semaphoreType": SEMAPHORE_TYPE_TIMELINE,
                                                       "initialValue": initial_value})
        info = ffi.new("VkSemaphoreCreateInfo *", {"sType": STYPE_SEMAPHORE_CREATE_INFO,
                                                   "pNext": kind})
        handle = ffi.new("VkSemaphore *")
        check(vk.vkCreateSemaphore(device, info, ffi.NULL, handle), "vkCreateSemaphore")
        self.handle = handle[0]
        self.queued_value = 0
        self._handle_array = ffi.new("VkSemaphore *", self.handle)

    def query(self) -> int:
        if self._failure is not None:
            raise self._failure
        out = ffi.new("uint64_t *")
        check(self.vk.vkGetSemaphoreCounterValue(self.device, self.handle, out),
              "vkGetSemaphoreCounterValue")
        return out[0]

    def signal(self, value: int) -> None:
        current = self.query()
        if value <= current:
            raise HalError("INVALID_ARGUMENT", f"semaphore signalled to {value} but it is "
                                               f"already at {current}; values must increase")
        info = ffi.new("VkSemaphoreSignalInfo *", {"sType": STYPE_SEMAPHORE_SIGNAL_INFO,
                                                   "semaphore": self.handle, "value": value})
        check(self.vk.vkSignalSemaphore(self.device, info), "vkSignalSemaphore")

    def fail(self, error: HalError) -> None:
        if self._failure is None:
            self._failure = error

    def wait(self, value: int, timeout_ns: int = INFINITE_TIMEOUT_NS) -> None:
        deadline = None if timeout_ns == INFINITE_TIMEOUT_NS else time.monotonic() + timeout_ns / 1e9
        values = ffi.new("uint64_t *", value)
        info = ffi.new("VkSemaphoreWaitInfo *", {
            "sType": STYPE_SEMAPHORE_WAIT_INFO, "semaphoreCount": 1,
            "pSemaphores": self._handle_array, "pValues": values})
        while True:
            if self._failure is not None:
                raise self._failure
            step = _POLL_NS
            if deadline is not None:
                step = max(0, min(step, int((deadline - time.monotonic()) * 1e9)))
            result = self.vk.vkWaitSemaphores(self.device, info, step)
            if result == 0:
                return
            if result != VK_TIMEOUT:
                check(result, "vkWaitSemaphores")
            if deadline is not None and time.monotonic() >= deadline:
                raise HalError("DEADLINE_EXCEEDED", f"semaphore did not reach {value} within "
                                                    f"{timeout_ns / 1e9:g} s")

    def destroy(self) -> None:
        self.vk.vkDestroySemaphore(self.device, self.handle, ffi.NULL)
