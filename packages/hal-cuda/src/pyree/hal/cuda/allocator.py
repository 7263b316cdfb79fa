"""Device memory from one stream-ordered pool, and pinned host staging for transfers.

Allocations and frees are ordered on the device's stream (cuMemAllocFromPoolAsync /
cuMemFreeAsync); the pool keeps freed memory (release threshold = max), so a static-shape function
that allocates its results on every call gets them back from the pool without driver round trips.
Host <-> device copies go through two pinned chunks, so large transfers run at full PCIe speed
with the host-side memcpy of one chunk overlapping the DMA of the other.
"""

from __future__ import annotations

import ctypes

from pyree.hal.cuda.symbols import check
from pyree.runtime.hal.python_driver import HalError


class DeviceBuffer:
    __slots__ = ("ptr", "size")

    def __init__(self, ptr: int, size: int):
        self.ptr, self.size = ptr, size


class Allocator:
    def __init__(self, cu, ordinal: int, stream, device_name: str):
        self.cu, self.stream, self.device_name = cu, stream, device_name
        props = cu.CUmemPoolProps()
        props.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        props.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        props.location.id = ordinal
        self.pool = check(cu, cu.cuMemPoolCreate(props), "cuMemPoolCreate")
        check(cu, cu.cuMemPoolSetAttribute(
            self.pool, cu.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            cu.cuuint64_t(2**64 - 1)), "cuMemPoolSetAttribute(RELEASE_THRESHOLD)")

    def allocate(self, size: int) -> DeviceBuffer:
        cu = self.cu
        err, ptr = cu.cuMemAllocFromPoolAsync(max(size, 1), self.pool, self.stream)
        if err == cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY:
            _, free, total = cu.cuMemGetInfo()
            raise HalError("RESOURCE_EXHAUSTED",
                           f"out of device memory on {self.device_name}: asked for {size} bytes "
                           f"({size / 2**20:.1f} MiB), {free / 2**20:.1f} MiB of "
                           f"{total / 2**20:.1f} MiB free")
        check(cu, (err,), f"cuMemAllocFromPoolAsync({size} bytes)")
        return DeviceBuffer(int(ptr), size)

    def free(self, buffer: DeviceBuffer) -> None:
        check(self.cu, self.cu.cuMemFreeAsync(buffer.ptr, self.stream), "cuMemFreeAsync")

    def destroy(self) -> None:
        check(self.cu, self.cu.cuMemPoolDestroy(self.pool), "cuMemPoolDestroy")


class Staging:
    """Two pinned chunks used in turn; an event per chunk says when its last copy finished."""

    CHUNK = 16 << 20

    def __init__(self, cu, stream):
        self.cu, self.stream = cu, stream
        self.host, self.views, self.events = [], [], []
        for _ in range(2):
            ptr = int(check(cu, cu.cuMemHostAlloc(self.CHUNK, 0), "cuMemHostAlloc(staging)"))
            self.host.append(ptr)
            self.views.append(memoryview((ctypes.c_char * self.CHUNK).from_address(ptr)).cast("B"))
            self.events.append(check(cu, cu.cuEventCreate(
                cu.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate"))

    def upload(self, dst: int, src: memoryview) -> None:
        """Copies ``src`` to device address ``dst`` in stream order; returns once ``src`` may change."""
        cu, n = self.cu, len(src)
        for i, pos in enumerate(range(0, n, self.CHUNK)):
            k, length = i % 2, min(self.CHUNK, n - pos)
            check(cu, cu.cuEventSynchronize(self.events[k]), "cuEventSynchronize(staging)")
            self.views[k][:length] = src[pos:pos + length]
            check(cu, cu.cuMemcpyHtoDAsync(dst + pos, self.host[k], length, self.stream),
                  f"cuMemcpyHtoDAsync({length} bytes)")
            check(cu, cu.cuEventRecord(self.events[k], self.stream), "cuEventRecord")

    def download(self, src: int, dst: memoryview) -> None:
        """Copies device bytes at ``src`` into ``dst`` after all work queued on the stream."""
        cu, n = self.cu, len(dst)
        pieces = [(pos, min(self.CHUNK, n - pos)) for pos in range(0, n, self.CHUNK)]

        def issue(i):
            pos, length = pieces[i]
            check(cu, cu.cuMemcpyDtoHAsync(self.host[i % 2], src + pos, length, self.stream),
                  f"cuMemcpyDtoHAsync({length} bytes)")
            check(cu, cu.cuEventRecord(self.events[i % 2], self.stream), "cuEventRecord")

        for i in range(min(2, len(pieces))):
            issue(i)
        for i, (pos, length) in enumerate(pieces):
            check(cu, cu.cuEventSynchronize(self.events[i % 2]),
                  "reading device memory (a kernel may have faulted)")
            dst[pos:pos + length] = self.views[i % 2][:length]
            if i + 2 < len(pieces):
                issue(i + 2)

    def destroy(self) -> None:
        for ptr, ev in zip(self.host, self.events):
            self.cu.cuEventDestroy(ev)
            self.cu.cuMemFreeHost(ptr)
