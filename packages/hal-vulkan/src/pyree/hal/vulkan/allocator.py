"""Device buffers: a VkBuffer each, from a device-local memory type, pooled by size so a
static-shape function gets the same buffers call after call (which is what lets its recorded
command buffer and descriptor sets be reused). Buffers up to ``SMALL_LIMIT`` bytes are bound at
offsets of shared ``BLOCK_BYTES`` VkDeviceMemory blocks (first fit, freed ranges merged, an
empty block freed), larger ones get a VkDeviceMemory of their own. On NVIDIA's driver a
submission slowed with the number of live allocations: a small model's call took 0.36 ms
alone and 0.97 ms beside 2000 other 4 KiB buffers; with blocks, the 39 Hugging Face models run
one after another in a process take 0.33-0.67 ms a call where the later ones took 0.9-1.9
(BENCHMARKS.md, thirtieth session; 2000 live buffers still slow it: not the whole story).
Where the device-local type is also host-visible (integrated GPUs, CPU drivers, resizable
BAR) the memory stays mapped and host copies are a memmove; otherwise they go through a
host-visible staging buffer. Mapped buffers (hal.h revision 1: small per-call arguments and
results) come from a host-visible, coherent type and are pooled apart from device-local ones.
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
SMALL_LIMIT = 4 << 20        # buffers up to this size share blocks
BLOCK_BYTES = 64 << 20


class Buffer:
    _serials = itertools.count(1)

    def __init__(self, size: int, handle: int, memory: int, mapped, host_visible: bool,
                 block: Block | None = None, offset: int = 0, length: int = 0):
        self.size, self.handle, self.memory, self.mapped = size, handle, memory, mapped
        self.host_visible = host_visible      # asked for as a mapped buffer (its pool)
        self.serial = next(Buffer._serials)   # identity for command-buffer caches
        self.block, self.offset, self.length = block, offset, length  # its range of a block


class Block:
    """One VkDeviceMemory that small buffers are bound in; ``free`` holds its unused ranges
    (offset, length), sorted and merged."""

    def __init__(self, memory: int, type_index: int, mapped):
        self.memory, self.type_index, self.mapped = memory, type_index, mapped
        self.free = [(0, BLOCK_BYTES)]

    def take(self, length: int, alignment: int) -> int | None:
        for i, (start, size) in enumerate(self.free):
            offset = -(-start // alignment) * alignment
            if offset + length <= start + size:
                rest = [(start, offset - start)] if offset > start else []
                if offset + length < start + size:
                    rest.append((offset + length, start + size - offset - length))
                self.free[i:i + 1] = rest
                return offset
        return None

    def give(self, offset: int, length: int) -> None:
        ranges = sorted([*self.free, (offset, length)])
        merged = [ranges[0]]
        for start, size in ranges[1:]:
            last_start, last_size = merged[-1]
            if last_start + last_size == start:
                merged[-1] = (last_start, last_size + size)
            else:
                merged.append((start, size))
        self.free = merged

    @property
    def empty(self) -> bool:
        return self.free == [(0, BLOCK_BYTES)]


def _pick_type(types: list[int], allowed: int, want: int, avoid: int = 0) -> int | None:
    candidates = [i for i, flags in enumerate(types) if allowed >> i & 1 and flags & want == want]
    preferred = [i for i in candidates if not types[i] & avoid]
    return (preferred or candidates or [None])[0]


class Allocator:
    def __init__(self, vk: Functions, device, types: list[int], name: str):
        self.vk, self.device, self.types, self.name = vk, device, types, name
        self._pool: dict[tuple[int, bool], list[Buffer]] = defaultdict(list)  # (size, host_visible)
        self._pooled_bytes = 0
        self._blocks: list[Block] = []
        self._own = 0  # buffers with a VkDeviceMemory of their own

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
        if req.size <= SMALL_LIMIT:
            try:
                return self._in_block(size, handle[0], req, index, host_visible)
            except VulkanError as e:
                if e.result not in (-1, -2):  # out of memory for a block: one of its own
                    vk.vkDestroyBuffer(self.device, handle[0], ffi.NULL)
                    raise
        memory = self._memory(req.size, index, handle[0], size)
        self._own += 1
        return Buffer(size, handle[0], memory, self._map(memory, index), host_visible)

    def _memory(self, length: int, index: int, handle: int, size: int) -> int:
        """A VkDeviceMemory of ``length`` bytes of type ``index``; ``handle`` (the buffer)
        destroyed if it cannot be had."""
        vk = self.vk
        memory = ffi.new("VkDeviceMemory *")
        alloc = ffi.new("VkMemoryAllocateInfo *", {"sType": STYPE_MEMORY_ALLOCATE_INFO,
                                                   "allocationSize": length,
                                                   "memoryTypeIndex": index})
        try:
            check(vk.vkAllocateMemory(self.device, alloc, ffi.NULL, memory),
                  f"allocating {size} bytes on {self.name}")
            if handle is not None:
                check(vk.vkBindBufferMemory(self.device, handle, memory[0], 0),
                      "vkBindBufferMemory")
        except VulkanError:
            if handle is not None:
                vk.vkDestroyBuffer(self.device, handle, ffi.NULL)
            if memory[0]:
                vk.vkFreeMemory(self.device, memory[0], ffi.NULL)
            raise
        return memory[0]

    def _map(self, memory: int, index: int):
        if self.types[index] & (HOST_VISIBLE | HOST_COHERENT) != HOST_VISIBLE | HOST_COHERENT:
            return None
        pointer = ffi.new("void **")
        check(self.vk.vkMapMemory(self.device, memory, 0, WHOLE_SIZE, 0, pointer), "vkMapMemory")
        return ffi.cast("uint8_t *", pointer[0])

    def _in_block(self, size: int, handle: int, req, index: int, host_visible: bool) -> Buffer:
        """``handle`` bound at a range of a block of memory type ``index``, a new block if no
        block has room; on an error ``handle`` is left unbound and alive."""
        alignment = max(req.alignment, 1)
        for block in self._blocks:
            if block.type_index == index:
                offset = block.take(req.size, alignment)
                if offset is not None:
                    break
        else:
            memory = self._memory(BLOCK_BYTES, index, None, size)
            block = Block(memory, index, self._map(memory, index))
            self._blocks.append(block)
            offset = block.take(req.size, alignment)
        try:
            check(self.vk.vkBindBufferMemory(self.device, handle, block.memory, offset),
                  "vkBindBufferMemory")
        except VulkanError:  # (the buffer is the caller's to destroy or bind elsewhere)
            block.give(offset, req.size)
            if block.empty:
                self._blocks.remove(block)
                self.vk.vkFreeMemory(self.device, block.memory, ffi.NULL)
            raise
        mapped = None if block.mapped is None else block.mapped + offset
        return Buffer(size, handle, block.memory, mapped, host_visible, block, offset, req.size)

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
        block = buffer.block
        if block is None:
            self.vk.vkFreeMemory(self.device, buffer.memory, ffi.NULL)
            self._own -= 1
            return
        block.give(buffer.offset, buffer.length)
        if block.empty:
            self._blocks.remove(block)
            self.vk.vkFreeMemory(self.device, block.memory, ffi.NULL)

    @property
    def memory_objects(self) -> int:
        """The VkDeviceMemory objects live now: blocks, and buffers of their own. (Pooled
        buffers count: they hold their memory.)"""
        return len(self._blocks) + self._own

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
