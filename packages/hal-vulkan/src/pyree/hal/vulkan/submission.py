"""The structs of one vkQueueSubmit (VkSubmitInfo, its timeline values and semaphore arrays),
made once per device and refilled in place under the device lock: vkQueueSubmit copies what it
needs before returning, and building them afresh with cffi was a large part of a submit's host
time."""

from __future__ import annotations

from pyree.hal.vulkan.symbols import ffi

STYPE_SUBMIT_INFO, STYPE_TIMELINE_SUBMIT_INFO = 4, 1000207003
STAGE_ALL_COMMANDS = 0x10000


class SubmitInfo:
    def __init__(self, capacity: int = 4):
        self.info = ffi.new("VkSubmitInfo *")
        self.timeline = ffi.new("VkTimelineSemaphoreSubmitInfo *")
        self.command_buffer = ffi.new("VkCommandBuffer *")
        self.info.sType, self.info.pNext = STYPE_SUBMIT_INFO, self.timeline
        self.info.commandBufferCount, self.info.pCommandBuffers = 1, self.command_buffer
        self.timeline.sType = STYPE_TIMELINE_SUBMIT_INFO
        self.capacity = 0
        self._grow(capacity)

    def _grow(self, capacity: int) -> None:
        self.capacity = capacity
        self.wait_handles = ffi.new("VkSemaphore[]", capacity)
        self.wait_values = ffi.new("uint64_t[]", capacity)
        self.wait_stages = ffi.new("VkPipelineStageFlags[]", [STAGE_ALL_COMMANDS] * capacity)
        self.signal_handles = ffi.new("VkSemaphore[]", capacity)
        self.signal_values = ffi.new("uint64_t[]", capacity)
        info, timeline = self.info, self.timeline
        info.pWaitSemaphores, info.pWaitDstStageMask = self.wait_handles, self.wait_stages
        info.pSignalSemaphores = self.signal_handles
        timeline.pWaitSemaphoreValues, timeline.pSignalSemaphoreValues = (self.wait_values,
                                                                          self.signal_values)

    def fill(self, command_buffer, waits: list, signals: list):
        """The VkSubmitInfo for ``command_buffer`` with (VulkanSemaphore, value) waits/signals."""
        if max(len(waits), len(signals)) > self.capacity:
            self._grow(max(len(waits), len(signals), 2 * self.capacity))
        for i, (sem, value) in enumerate(waits):
            self.wait_handles[i], self.wait_values[i] = sem.handle, value
        for i, (sem, value) in enumerate(signals):
            self.signal_handles[i], self.signal_values[i] = sem.handle, value
        info, timeline = self.info, self.timeline
        self.command_buffer[0] = command_buffer
        info.waitSemaphoreCount = timeline.waitSemaphoreValueCount = len(waits)
        info.signalSemaphoreCount = timeline.signalSemaphoreValueCount = len(signals)
        return info
