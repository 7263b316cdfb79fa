"""Device times of a traced submission (hal.h revision 4): a timestamp query pool per timed
submission, written before and after each of its commands by a recording of its own
(CommandBuffer.record_timed), read once the submission is done.

Timestamps count ticks of ``timestampPeriod`` ns on the device's clock; ``Clock`` maps them to
the host's CLOCK_MONOTONIC: a timestamp is written by an otherwise empty submission while the
host notes the time before the submit and after the wait, and the middle of the shortest of a
few such windows is taken as the moment it was written. Devices drift apart from the host
slowly, so this is redone every CALIBRATE_EVERY_NS.
"""

from __future__ import annotations

import time

from pyree.hal.vulkan.symbols import check, ffi

STYPE_QUERY_POOL_CREATE_INFO = 11
STYPE_COMMAND_BUFFER_BEGIN = 42
QUERY_TYPE_TIMESTAMP = 2
STAGE_TOP_OF_PIPE = 0x1
RESULT_64, RESULT_WAIT = 0x1, 0x2
USAGE_ONE_TIME = 0x1
CALIBRATE_EVERY_NS = 5_000_000_000
CALIBRATION_ROUNDS = 5


class Timing:
    """One timed submission: its recording, query pool and device timeline value."""

    def __init__(self, command_buffer, recording, pool: int):
        self.command_buffer, self.recording, self.pool = command_buffer, recording, pool
        self.value = 0


def create_pool(vk, device, count: int) -> int:
    info = ffi.new("VkQueryPoolCreateInfo *", {"sType": STYPE_QUERY_POOL_CREATE_INFO,
                                               "queryType": QUERY_TYPE_TIMESTAMP,
                                               "queryCount": max(count, 1)})
    out = ffi.new("VkQueryPool *")
    check(vk.vkCreateQueryPool(device, info, ffi.NULL, out), "vkCreateQueryPool")
    return out[0]


def read_ticks(vk, device, pool: int, count: int) -> list[int]:
    """The ``count`` timestamps of ``pool`` (written: the submission has finished)."""
    data = ffi.new("uint64_t[]", max(count, 1))
    check(vk.vkGetQueryPoolResults(device, pool, 0, count, 8 * count, data, 8,
                                   RESULT_64 | RESULT_WAIT), "vkGetQueryPoolResults")
    return list(data[0:count])


class Clock:
    """Device timestamps -> host monotonic nanoseconds, for one VulkanDevice."""

    def __init__(self, device):
        self.device = device
        self.period = device.physical.limits["timestampPeriod"]  # ns per tick
        bits = device.physical.timestamp_bits
        self.mask = (1 << bits) - 1 if 0 < bits < 64 else (1 << 64) - 1
        self.offset_ns = 0.0   # host ns - device ns
        self.calibrated = None  # host time of the last calibration

    def host_ns(self, ticks: int) -> int:
        return round((ticks & self.mask) * self.period + self.offset_ns)

    def calibrate_if_due(self) -> None:
        now = time.monotonic_ns()
        if self.calibrated is not None and now - self.calibrated < CALIBRATE_EVERY_NS:
            return
        device, vk = self.device, self.device.vk
        pool = create_pool(vk, device.device, 1)
        cb = device.allocate_command_buffer()
        try:
            best = None
            for _ in range(CALIBRATION_ROUNDS):
                begin = ffi.new("VkCommandBufferBeginInfo *", {
                    "sType": STYPE_COMMAND_BUFFER_BEGIN, "flags": USAGE_ONE_TIME})
                check(vk.vkBeginCommandBuffer(cb, begin), "vkBeginCommandBuffer")
                vk.vkCmdResetQueryPool(cb, pool, 0, 1)
                vk.vkCmdWriteTimestamp(cb, STAGE_TOP_OF_PIPE, pool, 0)
                check(vk.vkEndCommandBuffer(cb), "vkEndCommandBuffer")
                before = time.monotonic_ns()
                device.wait_for(device._submit(cb, [], []))
                after = time.monotonic_ns()
                ticks = read_ticks(vk, device.device, pool, 1)[0] & self.mask
                if best is None or after - before < best[0]:
                    best = (after - before, (before + after) / 2 - ticks * self.period)
            self.offset_ns, self.calibrated = best[1], time.monotonic_ns()
        finally:
            device.free_command_buffer(cb)
            vk.vkDestroyQueryPool(device.device, pool, ffi.NULL)
