"""Device memory (hipMalloc, with released blocks kept for reuse) and pinned host staging.

Every use of device memory is queued on the device's one stream (kernels, copies, fills, uploads,
downloads), so a block released by the runtime can serve the next allocation of its size at once:
any work still queued on it runs before whatever the new owner queues. hipFree is not stream
ordered, so blocks are only handed back to HIP after a stream synchronize: when an allocation
runs out of memory (then retried), when the last buffer in use is released (every module gone:
the GPU is left to other processes as it was found), and when the device is released.
"""

from __future__ import annotations

import threading

from pyree.hal.rocm.symbols import OUT_OF_MEMORY, SUCCESS, check, error, ffi
from pyree.runtime.hal.python_driver import HalError


class DeviceBuffer:
    __slots__ = ("ptr", "size")

    def __init__(self, ptr: int, size: int):
        self.ptr, self.size = ptr, size


def void(address: int):
    """A device or host address as the ``void *`` HIP's entry points take."""
    return ffi.cast("void *", address)


class Allocator:
    def __init__(self, lib, stream, device_name: str):
        self.lib, self.stream, self.device_name = lib, stream, device_name
        self._kept: dict[int, list[int]] = {}  # size -> released device addresses
        self._in_use = 0  # buffers handed out and not yet released
        self._lock = threading.RLock()  # (reentrant: the collector releases buffers inside one)
        self._out = ffi.new("void **")

    def allocate(self, size: int) -> DeviceBuffer:
        size = max(size, 1)
        with self._lock:
            kept = self._kept.get(size)
            if kept:
                self._in_use += 1
                return DeviceBuffer(kept.pop(), size)
            err = self.lib.hipMalloc(self._out, size)
            if err == OUT_OF_MEMORY and self._kept:
                self._trim()
                err = self.lib.hipMalloc(self._out, size)
            if err == OUT_OF_MEMORY:
                free, total = ffi.new("size_t *"), ffi.new("size_t *")
                self.lib.hipMemGetInfo(free, total)
                raise HalError("RESOURCE_EXHAUSTED",
                               f"out of device memory on {self.device_name}: asked for {size} bytes "
                               f"({size / 2**20:.1f} MiB), {free[0] / 2**20:.1f} MiB of "
                               f"{total[0] / 2**20:.1f} MiB free")
            check(err, f"hipMalloc({size} bytes)")
            self._in_use += 1
            return DeviceBuffer(int(ffi.cast("uintptr_t", self._out[0])), size)

    def free(self, buffer: DeviceBuffer) -> None:
        with self._lock:
            self._kept.setdefault(buffer.size, []).append(buffer.ptr)
            self._in_use -= 1
            if self._in_use == 0:
                self._trim()

    def _trim(self) -> None:
        """Returns every kept block to HIP, once no queued work can touch them."""
        check(self.lib.hipStreamSynchronize(self.stream), "hipStreamSynchronize")
        self._free_kept()

    def _free_kept(self) -> None:
        for ptrs in self._kept.values():
            for ptr in ptrs:
                self.lib.hipFree(void(ptr))
        self._kept.clear()

    def destroy(self) -> None:
        """After the stream is synchronized; buffers the runtime still holds go with the device."""
        with self._lock:
            self._free_kept()


class Staging:
    """One pinned host area for transfers, grown on demand up to CHUNK (larger transfers go
    through it a chunk at a time). An event recorded after each DMA says when the area may be
    written again; a lock keeps threads sharing the device from interleaving in it."""

    CHUNK = 16 << 20

    def __init__(self, lib, stream, events):
        self.lib, self.stream = lib, stream
        self.event = events.acquire()
        self.host, self.size = None, 0
        self._lock = threading.Lock()

    def _area(self, n: int):
        """The area, at least ``n`` bytes, once its last DMA is done."""
        lib = self.lib
        self._wait("waiting for the staging area")
        if n > self.size:
            if self.host is not None:
                check(lib.hipHostFree(self.host), "hipHostFree(staging)")
                self.host, self.size = None, 0
            size = min(self.CHUNK, max(n, 64 << 10, 2 * self.size))
            out = ffi.new("void **")
            check(lib.hipHostMalloc(out, size, 0), f"hipHostMalloc({size} bytes of staging)")
            self.host, self.size = out[0], size
        return self.host

    def _wait(self, what: str) -> None:
        err = self.lib.hipEventSynchronize(self.event)
        if err != SUCCESS:
            raise error(err, what)

    def _record(self) -> None:
        check(self.lib.hipEventRecord(self.event, self.stream), "hipEventRecord")

    def upload(self, dst: int, src: memoryview) -> None:
        """Copies ``src`` to device address ``dst`` in stream order; returns once ``src`` may change."""
        lib, n = self.lib, len(src)
        with self._lock:
            for pos in range(0, n, self.CHUNK):
                length = min(self.CHUNK, n - pos)
                host = self._area(length)
                ffi.memmove(host, src[pos:pos + length], length)
                check(lib.hipMemcpyHtoDAsync(void(dst + pos), host, length, self.stream),
                      f"hipMemcpyHtoDAsync({length} bytes)")
                self._record()

    def download(self, src: int, dst: memoryview) -> None:
        """Copies device bytes at ``src`` into ``dst`` after all work queued on the stream."""
        lib, n = self.lib, len(dst)
        with self._lock:
            for pos in range(0, n, self.CHUNK):
                length = min(self.CHUNK, n - pos)
                host = self._area(length)
                check(lib.hipMemcpyDtoHAsync(host, void(src + pos), length, self.stream),
                      f"hipMemcpyDtoHAsync({length} bytes)")
                self._record()
                self._wait("reading device memory (a kernel may have faulted)")
                ffi.memmove(dst[pos:pos + length], host, length)

    def destroy(self) -> None:
        """After the stream is synchronized."""
        if self.host is not None:
            self.lib.hipHostFree(self.host)
            self.host = None
