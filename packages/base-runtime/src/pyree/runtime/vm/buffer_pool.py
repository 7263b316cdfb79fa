"""Device buffers reused between calls, so a steady stream of calls allocates nothing.

A call takes its argument uploads and results from the pool. Buffers go back
once the runtime has *seen* the work that used them finish (a wait on the call's semaphore value
succeeded). A call whose results are dropped unwaited (calls queued back to back, each result
dropped as the next is made) hands its buffers back *pending* its semaphore value: the next call
takes them once that value is reached (a query, no wait). Releasing them to the driver instead
made every queued call allocate new buffers, so the driver saw a new binding table per call (a
new CUDA graph per call, costing several times a small kernel's time). Pending buffers past
MAX_PENDING go to the driver, which keeps them alive for in-flight work. A result goes back when
its DeviceArray is collected, if no unfinished call still reads it: here once waited for, else
to the function that made it (Function._recycle: its next call's work is ordered after it).
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque

from pyree.runtime.errors import PyreeError
from pyree.runtime.hal.device import Buffer, Device
from pyree.runtime.hal.ffi import PROCESS

MAX_PER_SIZE = 8
MAX_POOLED_BYTES = 1 << 30
MAPPED_MAX_BYTES = 16 << 10
MAX_PENDING = 32
CLASS_MIN = 64  # bytes: the smallest size class, and the step of classes up to 4 of it


def size_class(size: int) -> int:
    """The allocation a buffer of ``size`` bytes gets where sizes vary from call to call (a
    function with run-time sizes): the next of four classes per power of two (at most a quarter
    more than asked), so that calls of nearby sizes share pooled buffers, and a stream of mixed
    sizes keeps a bounded set of them rather than one per size it ever saw."""
    if size <= 4 * CLASS_MIN:
        return -(-size // CLASS_MIN) * CLASS_MIN
    step = 1 << (size.bit_length() - 3)
    return -(-size // step) * step


class BufferPool:
    def __init__(self, device: Device):
        self.device = device
        # (size, mapped) -> free buffers
        self._free: dict[tuple[int, bool], list[Buffer]] = defaultdict(list)
        self._bytes = 0
        self._lock = threading.RLock()  # a collected DeviceArray may give back while held
        # (buffers, semaphore, value): back once the semaphore reaches the value
        self._pending: deque[tuple[list[Buffer], object, int]] = deque()
        self._reached: dict = {}  # semaphore -> a value it was seen to have reached
        # keys of size classes (sizes that vary between calls): where one has no free buffer,
        # a free one of a larger class serves (see _larger)
        self._classes: set[tuple[int, bool]] = set()

    def mapped(self, size: int) -> bool:
        """Whether a per-call buffer of ``size`` bytes should be a mapped one."""
        return self.device.maps_memory and 0 < size <= MAPPED_MAX_BYTES

    def key(self, size: int, varies: bool = False) -> tuple[int, bool]:
        """The pool key of a per-call buffer of ``size`` bytes: (bytes it gets, mapped); its
        size class where sizes vary between calls."""
        if not varies:
            return size, self.mapped(size)
        key = size_class(size), self.mapped(size_class(size))
        self._classes.add(key)
        return key

    @property
    def pooled_bytes(self) -> int:
        """Bytes of the free buffers the pool holds now."""
        return self._bytes

    def take_all(self, keys: list[tuple[int, bool]]) -> list[Buffer]:
        """One buffer per (size, mapped) key (a call's buffers), under one lock acquisition."""
        taken: list = []
        missing = False
        with self._lock:
            if self._pending:
                self._promote()
            free_lists = self._free
            for key in keys:
                free = free_lists.get(key)
                if not free and key in self._classes:
                    free = self._larger(key)
                if free:
                    buffer = free.pop()
                    self._bytes -= buffer.size
                    taken.append(buffer)
                else:
                    taken.append(key)
                    missing = True
        return [self._allocate(*b) if type(b) is tuple else b for b in taken] if missing else taken

    def _larger(self, key: tuple[int, bool]) -> list[Buffer] | None:
        """The free list of the smallest larger size class (of the same mapping) that has a
        free buffer, or None (holding the lock). Taking it rather than allocating keeps a run
        of mixed sizes within the memory its largest sizes needed: the buffers a large call
        left serve the smaller calls after it."""
        size, mapped = key
        fits = [k for k in self._classes if k[1] == mapped and k[0] > size and self._free.get(k)]
        return self._free[min(fits)] if fits else None

    def _allocate(self, size: int, mapped: bool) -> Buffer:
        device = self.device
        buffer = device.allocate_mapped(size) if mapped else device.allocate(size)
        buffer.pool_key = (size, mapped)
        return buffer

    def give(self, buffer: Buffer) -> None:
        self.give_all((buffer,))

    def give_all(self, buffers) -> None:
        """Buffers this pool allocated, back for reuse (released to the driver when full)."""
        with self._lock:
            surplus = self._keep(buffers)
        for buffer in surplus:
            buffer.release()

    def give_when_reached(self, buffers: list[Buffer], semaphore, value: int) -> None:
        """Buffers that work up to ``value`` on ``semaphore`` may still use."""
        surplus: list = []
        with self._lock:
            self._pending.append((buffers, semaphore, value))
            if len(self._pending) > MAX_PENDING:
                surplus = self._pending.popleft()[0]
        for buffer in surplus:
            buffer.release()

    def _keep(self, buffers) -> list[Buffer]:
        """Adds ``buffers`` to the free lists (holding the lock); returns those that do not fit."""
        surplus = []
        free_lists = self._free
        for buffer in buffers:
            free = free_lists[buffer.pool_key]
            if len(free) < MAX_PER_SIZE and self._bytes + buffer.size <= MAX_POOLED_BYTES:
                free.append(buffer)
                self._bytes += buffer.size
            else:
                surplus.append(buffer)
        return surplus

    def _promote(self) -> None:
        """Moves pending buffers whose work is done to the free lists, oldest first (holding the
        lock). A failed timeline counts as done: its work has stopped."""
        surplus = []
        while self._pending:
            buffers, semaphore, value = self._pending[0]
            if self._reached.get(semaphore, -1) < value:  # else known without a driver call
                try:
                    self._reached[semaphore] = reached = semaphore.query()
                    if reached < value:
                        break
                except PyreeError:
                    pass
            self._pending.popleft()
            surplus += self._keep(buffers)
        for buffer in surplus:
            buffer.release()


# Calls and waits come from any thread: readers counts are read-modify-writes, and two threads
# waiting for one result must not both give its call's buffers back (the pool would then hand one
# buffer to two calls).
_CALLS = threading.RLock()  # (reentrant: the collector may finish a call inside one)


class CallResources:
    """What one call holds until it is seen to finish: buffers it allocated (uploads) and the
    DeviceArrays it reads. ``finished()`` runs once, after a successful wait."""

    __slots__ = ("_pool", "_scratch", "_inputs", "function", "ready")

    def __init__(self, pool: BufferPool, scratch: list[Buffer], inputs: list, function,
                 ready: tuple):
        self._pool = pool
        self._scratch = scratch
        self._inputs = inputs
        # the Function called: its _timeline_failed(semaphore) after a failed wait, its
        # _recycle(buffer, ready) for a result dropped unwaited
        self.function = function
        self.ready = ready  # (semaphore, value) the call's work signals
        if inputs:
            with _CALLS:
                for array in inputs:
                    array.readers += 1

    def __del__(self):
        """Never seen to finish (every result dropped unwaited): the buffers go back pending."""
        if self._scratch and not PROCESS.exiting:
            self._pool.give_when_reached(self._scratch[::-1], *self.ready)

    def finished(self) -> None:
        with _CALLS:
            scratch, self._scratch = self._scratch, []
            inputs, self._inputs = self._inputs, []
            for array in inputs:
                array.readers -= 1
        if scratch:
            self._pool.give_all(scratch[::-1])  # see Function._run: the next call pops them in order
