"""Device buffers: one VkBuffer + VkDeviceMemory each, from a device-local memory type, pooled by
size so a static-shape function gets the same buffers call after call (which is what lets its
recorded command buffer and descriptor sets be reused). Where the device-local type is also
host-visible (integrated GPUs, CPU drivers, resizable BAR) the memory stays mapped and host
copies are a memmove; otherwise they go through a host-visible staging buffer. Mapped buffers
(hal.h revision 1: small per-call arguments and results) come from a host-visible, coherent type
and are pooled apart from device-local ones.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

from pyree.hal.vulkan.symbols import Functions, VulkanError, check, ffi
from pyree.runtime.hal.python_driver import HalError

DEVICE_LOCAL, HOST_VISIBLE, HOST_COHERENT, HOST_CACHED = 0x1, 0x2, 0x4, 0x8
USAGE_TRANSFER_SRC, USAGE_TRANSFER_DST, USAGE_STORAGE = 0x1, 0x2, 0x20
STYPE_BUFFER_CREATE_INFO, STYPE_MEMORY_ALLOCATE_INFO = 12, 5
WHOLE_SIZE = (1 << 64) - 1
POOL_LIMIT_BYTES = 1 << 31   # released buffers kept for reuse, at most


class Buffer:
    _serials = itertools.count(1)

    def __init__(self, size: int, handle: int, memory: int, mapped, host_visible: bool):
        self.size, self.handle, self.memory, self.mapped = size, handle, memory, mapped
        self.host_visible = host_visible      # asked for as a mapped buffer (its pool)
        self.serial = next(Buffer._serials)   # identity for command-buffer caches


def _pick_type(types: list[int], allowed: int, want: int, avoid: int = 0) -> int | None:
    candidates = [i for i, flags in enumerate(types) if allowed >> i & 1 and flags & want == want]
    preferred = [i for i in candidates if not types[i] & avoid]
    return (preferred or candidates or [None])[0]


class Allocator:
    def __init__(self, vk: Functions, device, types: list[int], name: str):
        self.vk, self.device, self.types, self.name = vk, device, types, name
        self._pool: dict[tuple[int, bool], list[Buffer]] = defaultdict(list)  # (size, host_visible)
        self._pooled_bytes = 0

    def create(self, size: int, host_visible: bool = False) -> Buffer:
        vk = self.vk
        info = ffi.new("VkBufferCreateInfo *", {
            "sType": STYPE_BUFFER_CREATE_INFO, "size": max(size, 16),
            "usage": USAGE_STORAGE | USAGE_TRANSFER_SRC | USAGE_TRANSFER_DST})
        handle = ffi.new("VkBuffer *")
        check(vk.vkCreateBuffer(self.device, info, ffi.NULL, handle),
              f"creating a {size}-byte buffer on {self.name}")
        req = ffi.new("VkMemoryRequirements *")
        vk.vkGetBufferMemoryRequirements(self.device, handle[0], req)
        if host_visible:  # cached where possible: the host reads results back from it
            index = _pick_type(self.types, req.memoryTypeBits,
                               HOST_VISIBLE | HOST_COHERENT | HOST_CACHED)
            if index is None:
                index = _pick_type(self.types, req.memoryTypeBits, HOST_VISIBLE | HOST_COHERENT)
        else:
            index = _pick_type(self.types, req.memoryTypeBits, DEVICE_LOCAL, avoid=HOST_VISIBLE)
            if index is None:
                index = _pick_type(self.types, req.memoryTypeBits, 0)
        memory = ffi.new("VkDeviceMemory *")
        alloc = ffi.new("VkMemoryAllocateInfo *", {"sType": STYPE_MEMORY_ALLOCATE_INFO,
                                                   "allocationSize": req.size,
                                                   "memoryTypeIndex": index})
        try:
            check(vk.vkAllocateMemory(self.device, alloc, ffi.NULL, memory),
                  f"allocating {size} bytes on {self.name}")
            check(vk.vkBindBufferMemory(self.device, handle[0], memory[0], 0), "vkBindBufferMemory")
        except VulkanError:
            vk.vkDestroyBuffer(self.device, handle[0], ffi.NULL)
            if memory[0]:
                vk.vkFreeMemory(self.device, memory[0], ffi.NULL)
            raise
        mapped = None
        if self.types[index] & (HOST_VISIBLE | HOST_COHERENT) == HOST_VISIBLE | HOST_COHERENT:
            pointer = ffi.new("void **")
            check(vk.vkMapMemory(self.device, memory[0], 0, WHOLE_SIZE, 0, pointer), "vkMapMemory")
            mapped = pointer[0]
        return Buffer(size, handle[0], memory[0], mapped, host_visible)

    def allocate(self, size: int, host_visible: bool = False) -> Buffer:
        pooled = self._pool.get((size, host_visible))
        if pooled:
            self._pooled_bytes -= size
            return pooled.pop()
        try:
            return self.create(size, host_visible)
        except VulkanError as e:
            if e.result not in (-1, -2) or not self._pooled_bytes:
                raise
        self.trim()  # out of memory: give the pool back and try once more
        return self.create(size, host_visible)

    def release(self, buffer: Buffer, idle) -> None:
        """Back to the pool (queue order keeps later users after earlier work); past the pool's
        limit, freed once ``idle()`` has waited for the work submitted so far."""
        if self._pooled_bytes + buffer.size <= POOL_LIMIT_BYTES:
            self._pool[buffer.size, buffer.host_visible].append(buffer)
            self._pooled_bytes += buffer.size
            return
        idle()
        self.destroy_buffer(buffer)

    def destroy_buffer(self, buffer: Buffer) -> None:
        self.vk.vkDestroyBuffer(self.device, buffer.handle, ffi.NULL)
        self.vk.vkFreeMemory(self.device, buffer.memory, ffi.NULL)

    def trim(self) -> None:
        for buffers in self._pool.values():
            for b in buffers:
                self.destroy_buffer(b)
        self._pool.clear()
        self._pooled_bytes = 0


def check_range(buffer: Buffer, offset: int, length: int, what: str) -> None:
    if offset + length > buffer.size:
        raise HalError("OUT_OF_RANGE", f"{what} of [{offset}, {offset + length}) is outside the "
                                       f"{buffer.size}-byte buffer")
