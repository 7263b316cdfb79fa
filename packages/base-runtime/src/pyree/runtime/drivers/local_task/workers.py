"""local-task's worker threads: Python workers that each run a contiguous range of a dispatch's
workgroups (Workers), and native workers that claim chunks of workgroups through a kernel
library's worker loop without the GIL (NativeWorkers). Each pool is posted to by one thread at a
time, the device's queue thread or a submitting thread running inline."""

from __future__ import annotations

import os
import threading
import time

from pyree.runtime.drivers.local.executable import WorkerLoop
from pyree.runtime.hal.ffi import ffi

# How long a waiting thread polls before it sleeps: longer than the gaps between a model's
# dispatches, short enough that an idle device gives its cores back almost at once.
SPIN_S = 2e-3
# The worker loop's polling rounds (64 pauses and a sched_yield each) that a native worker
# without work spends before it sleeps (outside an execute): about SPIN_S.
IDLE_ROUNDS = 800
# Chunks of workgroups per thread, claimed one at a time by the worker loop's threads: fewer
# kernel calls per dispatch against a smaller share left to a thread that starts late, or to
# the one that claims last. ResNet-18's large convolutions have 22-28 workgroups of equal cost:
# in chunks of 2 one thread ran a chunk more (BENCHMARKS.md, "Chunks per thread 4 → 16"; 64 was
# no better).
CHUNKS_PER_THREAD = 16
# The worker loop's job (codegen/llvm_cpu/worker_loop.py in the compiler): uint64_t[10], of which
# the driver reads and writes these directly; and execute's records, (fn, state, count, chunk)
# per dispatch.
_GENERATION, _STATUS, _IDLE_ROUNDS, _BUSY, _JOB_FIELDS = 0, 7, 8, 9, 10
STATE, DISPATCH_FIELDS = 1, 4
STATE_SIZE = ffi.sizeof("pyree_cpu_dispatch_state_t")
_STOPPED = (1 << 64) - 1   # what the loop's worker function returns once told to stop


class _Signal:
    """A counter one thread advances and one other thread waits on: spinning first, then asleep.

    A sleeping thread takes as long to wake as a small kernel runs; a waiter that polls the
    counter sees it move several times sooner (BENCHMARKS.md, "local-task hand-off").
    The poll calls os.sched_yield, which releases the GIL and the core, so a machine busier than
    its cores still runs the thread it waits for; each poll does take the GIL for a moment, which
    slows another thread's Python a little. (Spinning in pthread_spin_lock instead, outside the
    GIL, hands over faster still, but made calls many times slower whenever another process took
    a core.)
    After ``SPIN_S`` without a change it sleeps on a lock, and the advancing thread wakes it.
    """

    def __init__(self):
        self.value = 0
        self._sleeping = False
        self._mutex = threading.Lock()
        self._wake = threading.Lock()
        self._wake.acquire()  # held while nobody sleeps; released once per sleep

    def advance(self) -> None:
        """Only ever called by one thread (the producer)."""
        self.value += 1
        if self._sleeping:
            with self._mutex:
                if self._sleeping:
                    self._sleeping = False
                    self._wake.release()

    def wait_past(self, seen: int) -> None:
        """Returns once value != seen. Only ever called by one thread (the consumer)."""
        deadline = time.perf_counter() + SPIN_S
        while self.value == seen:
            if time.perf_counter() < deadline:
                os.sched_yield()
                continue
            with self._mutex:
                if self.value != seen:
                    return
                self._sleeping = True
            self._wake.acquire()
            deadline = time.perf_counter() + SPIN_S


class _Worker:
    """A thread that runs one workgroup range at a time, handed over through two _Signals."""

    def __init__(self, name: str):
        self.start, self.done = _Signal(), _Signal()
        self.job: tuple | None = None
        self.status: int | BaseException = 0
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def _loop(self) -> None:
        while True:
            self.start.wait_past(self.done.value)
            if self.job is None:
                return
            fn, state, begin, end = self.job
            try:
                self.status = fn(state, begin, end)
            except BaseException as error:  # re-raised on the thread that waits for the ranges
                self.status = error
            self.done.advance()


class Workers:
    """Threads that run workgroup ranges, posted to by one thread at a time. (concurrent.futures
    would do, but every process would pay its import, logging included, and its hand-off
    sleeps: a wake-up per dispatch.)"""

    def __init__(self, count: int):
        self._workers = [_Worker(f"pyree-local-task-{i}") for i in range(count)]

    def run(self, fn, state, bounds: list[int]) -> int:
        """Runs ``fn`` over each range [bounds[i], bounds[i + 1]), the last on this thread;
        returns the first nonzero status."""
        workers = self._workers[:len(bounds) - 2]
        for i, worker in enumerate(workers):
            worker.job = (fn, state, bounds[i], bounds[i + 1])
            worker.start.advance()
        try:
            last = fn(state, bounds[-2], bounds[-1])
        finally:
            for worker in workers:
                worker.done.wait_past(worker.start.value - 1)
        statuses = [worker.status for worker in workers] + [last]
        for status in statuses:
            if isinstance(status, BaseException):
                raise status
        return next((status for status in statuses if status), 0)

    def stop(self) -> None:
        for worker in self._workers:
            worker.job = None
            worker.start.advance()


class _NativeWorker:
    """A thread inside a worker loop (GIL released) while there is work, asleep on a lock after
    IDLE_ROUNDS without any. While inside, it holds the loop's library: a module unloaded meanwhile
    unloads it only once the thread has left."""

    def __init__(self, pool: NativeWorkers, name: str):
        self._pool = pool
        self._sleeping = False
        self._mutex = threading.Lock()
        self._wake = threading.Lock()
        self._wake.acquire()  # held while nobody sleeps; released once per sleep
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def _run(self) -> None:
        job, seen = self._pool.job, 0
        while True:
            current = self._pool.current  # (loop, its library): the poster's latest loop; any
            seen = current[0].worker(job, seen)  # loop runs any job
            current = None  # asleep, the thread keeps no library loaded
            if seen == _STOPPED:
                return
            with self._mutex:  # the poster advances the generation (or sets BUSY), then looks
                if job[_GENERATION] != seen or job[_BUSY]:   # under the mutex
                    continue
                self._sleeping = True
            self._wake.acquire()

    def wake(self) -> None:
        with self._mutex:
            if self._sleeping:
                self._sleeping = False
                self._wake.release()


class NativeWorkers:
    """Workers that, with the posting thread, claim chunks of a dispatch's workgroups through a
    worker loop. Posted to by one thread at a time. ``current`` holds the library of the loop last
    posted through, loaded until another library's kernel runs (its module may be gone)."""

    def __init__(self, loop: WorkerLoop, count: int):
        self.current = (loop, loop.library())
        self.job = ffi.new("uint64_t[]", _JOB_FIELDS)
        self.job[_IDLE_ROUNDS] = IDLE_ROUNDS
        self._chunks = CHUNKS_PER_THREAD * (count + 1)
        self._workers = [_NativeWorker(self, f"pyree-local-task-native-{i}") for i in range(count)]

    def chunk(self, count: int) -> int:
        """Workgroups per claim for a dispatch of ``count``; a dispatch of one workgroup is one
        chunk, which execute runs on the posting thread."""
        return max(1, count // self._chunks)

    def execute(self, loop: WorkerLoop | None, records, n: int) -> int:
        """Runs the ``n`` dispatches of ``records`` (uint64_t[4 * n]: fn, state, count, chunk) in
        order through ``loop`` (None: the last one used); returns n, or the index of the first
        that failed, whose status is then ``status``."""
        if loop is not None and loop is not self.current[0]:
            self.current = (loop, loop.library())  # alive: a command being run holds it
        loop, _library = self.current
        self.job[_BUSY] = 1   # before the wakes: a worker that looks after one stays awake
        for worker in self._workers:
            worker.wake()
        try:
            return loop.execute(self.job, records, n)
        finally:
            self.job[_BUSY] = 0

    @property
    def status(self) -> int:
        return int(ffi.cast("int32_t", self.job[_STATUS]))

    def stop(self) -> None:
        self.current[0].post(self.job, ffi.NULL, ffi.NULL, 0, 1)   # a NULL kernel: workers return
        for worker in self._workers:
            worker.wake()
