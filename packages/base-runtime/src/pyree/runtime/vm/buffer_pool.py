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


class BufferPool:
    def __init__(self, device: Device):
        self.device = device
        self._free: dict[int, list[Buffer]] = defaultdict(list)
        self._bytes = 0
        self._lock = threading.Lock()

    def take(self, size: int) -> Buffer:
        with self._lock:
            free = self._free.get(size)
            if free:
                self._bytes -= size
                return free.pop()
        return self.device.allocate(size)

    def take_all(self, sizes: list[int]) -> list[Buffer]:
        """One buffer per size (a call's results), under one lock acquisition."""
        taken: list[Buffer | int] = []
        with self._lock:
            free_lists = self._free
            for size in sizes:
                free = free_lists.get(size)
                if free:
                    self._bytes -= size
                    taken.append(free.pop())
                else:
                    taken.append(size)
        return [self.device.allocate(b) if type(b) is int else b for b in taken]

    def give(self, buffer: Buffer) -> None:
        with self._lock:
            free = self._free[buffer.size]
            if len(free) < MAX_PER_SIZE and self._bytes + buffer.size <= MAX_POOLED_BYTES:
                free.append(buffer)
                self._bytes += buffer.size
                return
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
        for buffer in scratch:
            self._pool.give(buffer)
        for array in inputs:
            array.readers -= 1
