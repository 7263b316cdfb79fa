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
CLASS = "class"  # the third item of a size class's pool key


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
        # pool key (below) -> free buffers
        self._free: dict[tuple, list[Buffer]] = defaultdict(list)
        self._bytes = 0
        self._lock = threading.RLock()  # a collected DeviceArray may give back while held
        # (buffers, semaphore, value): back once the semaphore reaches the value
        self._pending: deque[tuple[list[Buffer], object, int]] = deque()
        self._reached: dict = {}  # semaphore -> a value it was seen to have reached
        # Keys of size classes (sizes that vary between calls; ``(size, mapped, CLASS)``, apart
        # from exact sizes): where one has no free buffer, a free one of a larger class serves
        # (_larger). Of their buffers: the bytes allocated and not released, the bytes free
        # here, and the most bytes ever in use at once, which the allocated ones are kept
        # within (_grow).
        self._classes: set[tuple] = set()
        self._class_bytes = self._class_free = self._class_peak = 0

    def mapped(self, size: int) -> bool:
        """Whether a per-call buffer of ``size`` bytes should be a mapped one."""
        return self.device.maps_memory and 0 < size <= MAPPED_MAX_BYTES

    def key(self, size: int, varies: bool = False, mappable: bool = True) -> tuple:
        """The pool key of a per-call buffer of ``size`` bytes: (bytes it gets, mapped); its
        size class where sizes vary between calls: (bytes, mapped, CLASS). ``mappable``
        False: device memory whatever the size."""
        if not varies:
            return size, mappable and self.mapped(size)
        size = size_class(size)
        key = size, mappable and self.mapped(size), CLASS
        with self._lock:  # (take_all walks the set: another thread may be recording a size)
            self._classes.add(key)
        return key

    @property
    def pooled_bytes(self) -> int:
        """Bytes of the free buffers the pool holds now."""
        return self._bytes

    def take_all(self, keys: list[tuple]) -> list[Buffer]:
        """One buffer per key (a call's buffers), under one lock acquisition."""
        taken: list = []
        missing = False
        surplus: list = []
        with self._lock:
            if self._pending:
                self._promote()
            free_lists, classes = self._free, self._classes
            for key in keys:
                free = free_lists.get(key)
                if not free and classes and key in classes:
                    free = self._larger(key)
                if free:
                    buffer = free.pop()
                    self._bytes -= buffer.size
                    if classes and buffer.pool_key in classes:
                        self._class_free -= buffer.size
                    taken.append(buffer)
                else:
                    taken.append(key)
                    missing = True
            if missing and classes:
                surplus = self._grow(sum(b[0] for b in taken if type(b) is tuple and b in classes))
        for buffer in surplus:
            buffer.release()
        return [self._allocate(b) if type(b) is tuple else b for b in taken] if missing else taken

    def _larger(self, key: tuple) -> list[Buffer] | None:
        """The free list of the smallest size class at least as large as ``key``'s that has a
        free buffer, or None (holding the lock). Taking it rather than allocating keeps a run
        of mixed sizes within the memory its largest sizes needed: the buffers a large call
        left serve the smaller calls after it (mapped or not: both are read and written by
        what they are)."""
        fits = [k for k in self._classes if k[0] >= key[0] and k != key and self._free.get(k)]
        return self._free[min(fits)] if fits else None

    def _grow(self, size: int) -> list[Buffer]:
        """Counts ``size`` bytes of size-class buffers about to be allocated; returns the free
        ones, smallest first, to release so that no more bytes of them stay allocated than
        were ever in use at once (holding the lock). Without it the free lists of every class
        a run of mixed sizes met stayed full, several times the memory its largest size used."""
        self._class_bytes += size
        self._class_peak = max(self._class_peak, self._class_bytes - self._class_free)
        surplus = []
        for key in sorted(k for k in self._classes if self._free.get(k)):
            free = self._free[key]
            while free and self._class_bytes > self._class_peak:
                buffer = free.pop()
                self._bytes -= buffer.size
                self._class_free -= buffer.size
                self._class_bytes -= buffer.size
                surplus.append(buffer)
        return surplus

    def _allocate(self, key: tuple) -> Buffer:
        device, size = self.device, key[0]
        buffer = device.allocate_mapped(size) if key[1] else device.allocate(size)
        buffer.pool_key = key
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
                self._released(surplus)
        for buffer in surplus:
            buffer.release()

    def _keep(self, buffers) -> list[Buffer]:
        """Adds ``buffers`` to the free lists (holding the lock); returns those that do not fit."""
        surplus = []
        free_lists, classes = self._free, self._classes
        for buffer in buffers:
            free = free_lists[buffer.pool_key]
            if len(free) < MAX_PER_SIZE and self._bytes + buffer.size <= MAX_POOLED_BYTES:
                free.append(buffer)
                self._bytes += buffer.size
                if classes and buffer.pool_key in classes:
                    self._class_free += buffer.size
            else:
                surplus.append(buffer)
        if surplus and classes:
            self._released(surplus)
        return surplus

    def _released(self, buffers) -> None:
        """Counts the size-class ones among ``buffers``, which are about to be released, as
        no longer allocated (holding the lock)."""
        self._class_bytes -= sum(b.size for b in buffers if b.pool_key in self._classes)

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


def take_unread(array, buffer, spent) -> bool:
    """Swaps ``array``'s ``buffer`` for ``spent`` (a donated array's: vm/function.py) where no
    unfinished call reads it and no other call took it first, atomically with every call's
    count of its readers; whether it did."""
    with _CALLS:
        if array.readers or array.buffer is not buffer:
            return False
        array.buffer, array._call, array._done = spent, None, True
        return True


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
        self.ready = ready  # (semaphore, value) the call's work signals; __del__ reads it first
        if inputs:
            with _CALLS:
                for array in inputs:
                    array.readers += 1

    def __del__(self):
        """Never seen to finish (every result dropped unwaited): the buffers go back pending.
        (Where Ctrl-C landed as ``__init__`` began, nothing is set and nothing is held.)"""
        if getattr(self, "ready", None) is not None and self._scratch and not PROCESS.exiting:
            self._pool.give_when_reached(self._scratch[::-1], *self.ready)

    def finished(self) -> None:
        with _CALLS:
            scratch, self._scratch = self._scratch, []
            inputs, self._inputs = self._inputs, []
            for array in inputs:
                array.readers -= 1
        if scratch:
            self._pool.give_all(scratch[::-1])  # see Function._run: the next call pops them in order
