"""Device memory from one stream-ordered pool, host-mapped memory, and pinned host staging.

Allocations and frees are ordered on the device's stream (cuMemAllocFromPoolAsync /
cuMemFreeAsync); the pool keeps freed memory (release threshold = max), so a static-shape function
that allocates its results on every call gets them back from the pool without driver round trips.
What the pool keeps goes back to the GPU (cuMemPoolTrimTo) when an allocation fails — a request
larger than the GPU left the pool holding all of it, next to nothing free on the GPU — and when
the last buffer is released (every module unloaded), so other processes find the GPU as it was.
Host <-> device copies go through pinned memory: small ones (per-call arguments and results)
through a ring of pinned slots, a few C calls each; large ones through two pinned chunks, so they
run at full PCIe speed with the host-side memcpy of one chunk overlapping the DMA of the other.
"""

from __future__ import annotations

import itertools
import threading

from pyree.hal.cuda import symbols
from pyree.hal.cuda.symbols import (
    CUDA_ERROR_NOT_READY,
    CUDA_ERROR_OUT_OF_MEMORY,
    CUDA_SUCCESS,
    address,
    check,
    create_event,
    ffi,
)
from pyree.runtime.hal.python_driver import HalError

# Pinned host memory that kernels reach across the bus, from any context.
MAPPED = symbols.CU_MEMHOSTALLOC_DEVICEMAP | symbols.CU_MEMHOSTALLOC_PORTABLE


class DeviceBuffer:
    __slots__ = ("ptr", "size")

    def __init__(self, ptr: int, size: int):
        self.ptr, self.size = ptr, size


class MappedBuffer(DeviceBuffer):
    """Pinned host memory the GPU addresses at ``ptr`` and the host at ``host``."""

    __slots__ = ("host", "released")

    def __init__(self, ptr: int, size: int, host: int):
        super().__init__(ptr, size)
        self.host, self.released = host, None  # released: event recorded when last released


class Allocator:
    def __init__(self, cu, ordinal: int, stream, device_name: str):
        self.cu, self.stream, self.device_name = cu, stream, device_name
        props = ffi.new("CUmemPoolProps *")  # zeroed: no export handles, default size
        props.allocType = symbols.CU_MEM_ALLOCATION_TYPE_PINNED
        props.location.type = symbols.CU_MEM_LOCATION_TYPE_DEVICE
        props.location.id = ordinal
        pool = ffi.new("CUmemoryPool *")
        check(cu.cuMemPoolCreate(pool, props), "cuMemPoolCreate")
        self.pool = pool[0]
        threshold = ffi.new("cuuint64_t *", 2**64 - 1)
        check(cu.cuMemPoolSetAttribute(self.pool, symbols.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, threshold),
              "cuMemPoolSetAttribute(RELEASE_THRESHOLD)")
        self.in_use = 0  # buffers handed out and not yet freed
        self._count = threading.Lock()  # calls come from any thread (and the collector)

    def allocate(self, size: int) -> DeviceBuffer:
        cu, ptr = self.cu, ffi.new("CUdeviceptr *")
        err = cu.cuMemAllocFromPoolAsync(ptr, max(size, 1), self.pool, self.stream)
        if err == CUDA_ERROR_OUT_OF_MEMORY:  # freed memory the pool keeps may do
            self.trim()
            err = cu.cuMemAllocFromPoolAsync(ptr, max(size, 1), self.pool, self.stream)
        if err == CUDA_ERROR_OUT_OF_MEMORY:
            self.trim()  # what the failed request reserved
            free, total = ffi.new("size_t *"), ffi.new("size_t *")
            cu.cuMemGetInfo(free, total)
            raise HalError("RESOURCE_EXHAUSTED",
                           f"out of device memory on {self.device_name}: asked for {size} bytes "
                           f"({size / 2**20:.1f} MiB), {free[0] / 2**20:.1f} MiB of "
                           f"{total[0] / 2**20:.1f} MiB free")
        check(err, f"cuMemAllocFromPoolAsync({size} bytes)")
        with self._count:
            self.in_use += 1
        return DeviceBuffer(ptr[0], size)

    def free(self, buffer: DeviceBuffer) -> None:
        check(self.cu.cuMemFreeAsync(buffer.ptr, self.stream), "cuMemFreeAsync")
        with self._count:
            self.in_use -= 1
            last = self.in_use == 0
        if last:
            self.trim()

    def trim(self) -> None:
        """Gives the GPU back what the pool keeps, once the frees queued on the stream are done."""
        check(self.cu.cuStreamSynchronize(self.stream), "cuStreamSynchronize")
        check(self.cu.cuMemPoolTrimTo(self.pool, 0), "cuMemPoolTrimTo")

    def destroy(self) -> None:
        check(self.cu.cuMemPoolDestroy(self.pool), "cuMemPoolDestroy")


def host_alloc(cu, size: int, flags: int, what: str):
    """``size`` bytes of pinned host memory (``void *``); RESOURCE_EXHAUSTED naming the size and
    ``what`` they are for when there is none."""
    out = ffi.new("void **")
    err = cu.cuMemHostAlloc(out, size, flags)
    if err == CUDA_ERROR_OUT_OF_MEMORY:
        raise HalError("RESOURCE_EXHAUSTED", f"out of pinned host memory: asked for {size} "
                                             f"{what} bytes")
    check(err, f"cuMemHostAlloc({size} {what} bytes)")
    return out[0]


def device_pointer(cu, host) -> int:
    """Where the GPU sees mapped pinned memory at ``host``."""
    out = ffi.new("CUdeviceptr *")
    check(cu.cuMemHostGetDevicePointer(out, host, 0), "cuMemHostGetDevicePointer")
    return out[0]


class MappedAllocator:
    """Host-mapped pinned memory (hal.h revision 1), for small per-call arguments and results:
    kernels reach it across the bus and the host reads and writes it in place, so a small call
    needs no copy on the stream. cuMemHostAlloc costs tens of microseconds and cuMemFreeHost
    waits for the device, so released blocks are kept per size and handed out again once an
    event recorded at their release says the work submitted before it is done."""

    KEEP_PER_SIZE = 16

    def __init__(self, cu, stream):
        self.cu, self._stream = cu, stream
        self._free: dict[int, list[MappedBuffer]] = {}
        # Calls come from any thread; a collected result's release may come from the collector
        # on a thread already inside: reentrant. Two threads scanning one list without it took
        # the same block, or one whose event was still pending.
        self._lock = threading.RLock()

    def allocate(self, size: int) -> MappedBuffer:
        with self._lock:
            free = self._free.get(size)
            if free:
                for i, buffer in enumerate(free):
                    if self.cu.cuEventQuery(buffer.released) == CUDA_SUCCESS:
                        return free.pop(i)
        host = host_alloc(self.cu, max(size, 1), MAPPED, "mapped")
        return MappedBuffer(device_pointer(self.cu, host), size, address(host))

    def free(self, buffer: MappedBuffer) -> None:
        cu = self.cu
        if buffer.released is None:
            buffer.released = create_event(cu)
        err = cu.cuEventRecord(buffer.released, self._stream)
        if err:
            check(err, "cuEventRecord")
        with self._lock:
            free = self._free.setdefault(buffer.size, [])
            if len(free) < self.KEEP_PER_SIZE:
                free.append(buffer)
                return
        check(cu.cuEventSynchronize(buffer.released), "cuEventSynchronize(mapped memory)")
        self._destroy(buffer)

    def _destroy(self, buffer: MappedBuffer) -> None:
        self.cu.cuEventDestroy(buffer.released)
        self.cu.cuMemFreeHost(ffi.cast("void *", buffer.host))

    def destroy(self) -> None:
        """After the stream is synchronized."""
        for free in self._free.values():
            for buffer in free:
                self._destroy(buffer)
        self._free.clear()


def spin_then_block(cu, event, what: str, spins: int = 2000) -> None:
    """Waits for ``event``: polls it first (a small copy or kernel is done within microseconds,
    and a blocking wait costs a thread wake-up), then blocks in cuEventSynchronize."""
    query = cu.cuEventQuery
    for _ in range(spins):
        err = query(event)
        if err != CUDA_ERROR_NOT_READY:
            break
    else:
        err = cu.cuEventSynchronize(event)
    if err:
        check(err, what)


class Staging:
    """Pinned host memory for transfers.

    Copies of at most SMALL bytes take the next slot of a ring of SLOTS pinned slots. An upload
    fills the slot and queues the DMA: no wait, since the slot's event (recorded after its last
    DMA) is long complete when the ring comes round to it. A download queues the DMA and spins on
    the slot's event. Larger copies stream through two 16 MiB chunks used in turn, an event per
    chunk saying when its last copy finished.

    Threads share the device: a slot is held by one copy from its choice to its last use of the
    host bytes, and a large copy holds the pair throughout. Without that, a second thread's
    upload overwrote a chunk between the first's write and its queued DMA, so the first call
    computed on the other's input (one loaded ResNet-18, 8 threads: a quarter of the results).
    """

    CHUNK = 16 << 20
    SMALL = 64 << 10
    SLOTS = 32

    def __init__(self, cu, stream):
        self.cu, self.stream = cu, stream
        ring = ffi.cast("char *", host_alloc(cu, self.SMALL * self.SLOTS, 0, "staging ring"))
        self.host = [ring]
        whole = memoryview(ffi.buffer(ring, self.SMALL * self.SLOTS))
        self.events = [create_event(cu) for _ in range(self.SLOTS)]
        self._slots = [(ring + i * self.SMALL, whole[i * self.SMALL:(i + 1) * self.SMALL], event,
                        threading.Lock()) for i, event in enumerate(self.events)]
        self._turn = itertools.count()  # next() is atomic under the GIL: threads get distinct slots
        self._chunks: list[tuple[object, memoryview, object]] | None = None
        self._large = threading.Lock()  # the two chunks, from a large copy's first to last byte

    def _pair(self) -> list[tuple[object, memoryview, object]]:
        """The two large chunks, pinned on the first large copy: pinning 32 MiB costs a cold
        start tens of milliseconds that a model with only small transfers never needs."""
        if self._chunks is None:
            chunks = []
            for _ in range(2):
                host = host_alloc(self.cu, self.CHUNK, 0, "staging")
                self.host.append(host)
                event = create_event(self.cu)
                self.events.append(event)
                chunks.append((host, memoryview(ffi.buffer(host, self.CHUNK)), event))
            self._chunks = chunks
        return self._chunks

    def _slot(self):
        """The next ring slot, held (its lock acquired: release it), once its previous DMA is
        done (normally long done)."""
        slot = self._slots[next(self._turn) % self.SLOTS]
        slot[3].acquire()
        if self.cu.cuEventQuery(slot[2]) == CUDA_ERROR_NOT_READY:
            try:
                spin_then_block(self.cu, slot[2], "waiting for a staging slot", spins=0)
            except BaseException:
                slot[3].release()
                raise
        return slot

    def upload_small(self, dst: int, src: memoryview) -> None:
        cu, n = self.cu, len(src)
        host, view, event, held = self._slot()
        try:
            view[:n] = src
            err = cu.cuMemcpyHtoDAsync(dst, host, n, self.stream)
            if err:
                check(err, f"cuMemcpyHtoDAsync({n} bytes)")
            err = cu.cuEventRecord(event, self.stream)
            if err:
                check(err, "cuEventRecord")
        finally:
            held.release()

    def download_small(self, src: int, dst: memoryview) -> None:
        cu, n = self.cu, len(dst)
        host, view, event, held = self._slot()
        try:
            err = cu.cuMemcpyDtoHAsync(host, src, n, self.stream)
            if err:
                check(err, f"cuMemcpyDtoHAsync({n} bytes)")
            err = cu.cuEventRecord(event, self.stream)
            if err:
                check(err, "cuEventRecord")
            spin_then_block(cu, event, "reading device memory (a kernel may have faulted)")
            dst[:n] = view[:n]
        finally:
            held.release()

    def upload(self, dst: int, src: memoryview) -> None:
        """Copies ``src`` to device address ``dst`` in stream order; returns once ``src`` may change."""
        n = len(src)
        if n <= self.SMALL:
            return self.upload_small(dst, src)
        with self._large:
            self._upload_large(dst, src)

    def _upload_large(self, dst: int, src: memoryview) -> None:
        cu, n = self.cu, len(src)
        chunks = self._pair()
        for i, pos in enumerate(range(0, n, self.CHUNK)):
            (host, view, event), length = chunks[i % 2], min(self.CHUNK, n - pos)
            check(cu.cuEventSynchronize(event), "cuEventSynchronize(staging)")
            view[:length] = src[pos:pos + length]
            check(cu.cuMemcpyHtoDAsync(dst + pos, host, length, self.stream),
                  f"cuMemcpyHtoDAsync({length} bytes)")
            check(cu.cuEventRecord(event, self.stream), "cuEventRecord")

    def download(self, src: int, dst: memoryview) -> None:
        """Copies device bytes at ``src`` into ``dst`` after all work queued on the stream."""
        n = len(dst)
        if n <= self.SMALL:
            return self.download_small(src, dst)
        with self._large:
            self._download_large(src, dst)

    def _download_large(self, src: int, dst: memoryview) -> None:
        cu, n = self.cu, len(dst)
        pieces = [(pos, min(self.CHUNK, n - pos)) for pos in range(0, n, self.CHUNK)]
        chunks = self._pair()

        def issue(i):
            pos, length = pieces[i]
            host, _, event = chunks[i % 2]
            check(cu.cuMemcpyDtoHAsync(host, src + pos, length, self.stream),
                  f"cuMemcpyDtoHAsync({length} bytes)")
            check(cu.cuEventRecord(event, self.stream), "cuEventRecord")

        for i in range(min(2, len(pieces))):
            issue(i)
        for i, (pos, length) in enumerate(pieces):
            _, view, event = chunks[i % 2]
            check(cu.cuEventSynchronize(event),
                  "reading device memory (a kernel may have faulted)")
            dst[pos:pos + length] = view[:length]
            if i + 2 < len(pieces):
                issue(i + 2)

    def destroy(self) -> None:
        for event in self.events:
            self.cu.cuEventDestroy(event)
        for host in self.host:
            self.cu.cuMemFreeHost(host)
