"""Device buffers reused between calls, so a steady stream of calls allocates nothing.

A call takes its argument uploads, results and transient arena from the pool. Buffers go back
only once the runtime has *seen* the work that used them finish (a wait on the call's semaphore
value succeeded): a call whose results are dropped unwaited releases its buffers to the driver
instead, which keeps them alive for in-flight work. A result goes back when its DeviceArray is
collected, if it was ready and no unfinished call still reads it.
"""

from __future__ import annotations

import threading
from collections import defaultdict

from pyree.runtime.hal.device import Buffer, Device

MAX_PER_SIZE = 8
MAX_POOLED_BYTES = 1 << 30
MAPPED_MAX_BYTES = 16 << 10


class BufferPool:
    def __init__(self, device: Device):
        self.device = device
        # (size, mapped) -> free buffers
        self._free: dict[tuple[int, bool], list[Buffer]] = defaultdict(list)
        self._bytes = 0
        self._lock = threading.Lock()

    def mapped(self, size: int) -> bool:
        """Whether a per-call buffer of ``size`` bytes should be a mapped one."""
        return self.device.maps_memory and 0 < size <= MAPPED_MAX_BYTES

    def take_all(self, keys: list[tuple[int, bool]]) -> list[Buffer]:
        """One buffer per (size, mapped) key (a call's buffers), under one lock acquisition."""
        taken: list = []
        missing = False
        with self._lock:
            free_lists = self._free
            for key in keys:
                free = free_lists.get(key)
                if free:
                    buffer = free.pop()
                    self._bytes -= buffer.size
                    taken.append(buffer)
                else:
                    taken.append(key)
                    missing = True
        return [self._allocate(*b) if type(b) is tuple else b for b in taken] if missing else taken

    def _allocate(self, size: int, mapped: bool) -> Buffer:
        device = self.device
        buffer = device.allocate_mapped(size) if mapped else device.allocate(size)
        buffer.pool_key = (size, mapped)
        return buffer

    def give(self, buffer: Buffer) -> None:
        self.give_all((buffer,))

    def give_all(self, buffers) -> None:
        """Buffers this pool allocated, back for reuse (released to the driver when full)."""
        surplus = []
        with self._lock:
            free_lists = self._free
            for buffer in buffers:
                free = free_lists[buffer.pool_key]
                if len(free) < MAX_PER_SIZE and self._bytes + buffer.size <= MAX_POOLED_BYTES:
                    free.append(buffer)
                    self._bytes += buffer.size
                else:
                    surplus.append(buffer)
        for buffer in surplus:
            buffer.release()


class CallResources:
    """What one call holds until it is seen to finish: buffers it allocated (uploads, transient
    arena) and the DeviceArrays it reads. ``finished()`` runs once, after a successful wait."""

    def __init__(self, pool: BufferPool, scratch: list[Buffer], inputs: list, on_failure):
        self._pool = pool
        self._scratch = scratch
        self._inputs = inputs
        self.on_failure = on_failure  # called with the semaphore whose wait failed
        for array in inputs:
            array.readers += 1

    def finished(self) -> None:
        scratch, self._scratch = self._scratch, []
        inputs, self._inputs = self._inputs, []
        if scratch:
            self._pool.give_all(scratch[::-1])  # see Function._run: the next call pops them in order
        for array in inputs:
            array.readers -= 1
