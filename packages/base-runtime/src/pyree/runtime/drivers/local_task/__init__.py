"""local-task: submissions run in order, on a queue thread, or on the submitting thread when
nothing is pending; each dispatch's workgroups run on that thread and N - 1 workers, N the CPUs
this process may use (its affinity mask and cgroup CPU quota) or IREE's --task_topology_* flags
(topology.py).

A compiled kernel runs through the worker loop that the llvm-cpu compiler emits into each kernel
library (cpu_executable.WorkerLoop): every thread claims chunks of workgroups from one counter,
none of them holding the GIL, so a hand-over costs a few us instead of a GIL wait and a wake-up.
A command buffer's consecutive dispatches run through the loop's execute, one native call for all
of them, so the queue thread does not come back to Python between them.
A Python callable, or any kernel before a library with the loop has been loaded, is split into
N contiguous ranges instead, one run by the queue thread and the others by Python
workers that poll for work; cffi releases the GIL while a kernel runs, so they run in parallel.
"""

from __future__ import annotations

import os
import queue
import threading
import time

from pyree.runtime.drivers.cpu_executable import WorkerLoop
from pyree.runtime.drivers.host_device import DispatchRun, HostDevice, kernel_error
from pyree.runtime.drivers.local_task.topology import topology
from pyree.runtime.hal.ffi import ffi
from pyree.runtime.hal.python_driver import (
    DeviceInfo,
    HalError,
    PythonDriver,
    export_driver,
)

# How long a waiting thread polls before it sleeps: longer than the gaps between a model's
# dispatches, short enough that an idle device gives its cores back almost at once.
SPIN_S = 2e-3
# The worker loop's polling rounds (64 pauses and a sched_yield, ~2.2 us here): a native worker's
# ~2 ms without work before it sleeps (outside an execute).
IDLE_ROUNDS = 800
# Chunks of workgroups per thread, claimed one at a time by the worker loop's threads: fewer
# kernel calls per dispatch against a smaller share left to a thread that starts late, or to
# the one that claims last. ResNet-18's large convolutions have 22-28 workgroups of equal cost:
# in chunks of 2 one thread ran a chunk more (16 instead of 4: ResNet-18 22.3 -> 21.6 ms,
# MobileNet v2 6.0 -> 5.9 ms, alternating processes on the 2-core VM; 64 was no better).
CHUNKS_PER_THREAD = 16
# The worker loop's job (codegen/llvm_cpu/worker_loop.py in the compiler): uint64_t[10], of which
# the driver reads and writes these directly; and execute's records, (fn, state, count, chunk)
# per dispatch.
_GENERATION, _STATUS, _IDLE_ROUNDS, _BUSY, _JOB_FIELDS = 0, 7, 8, 9, 10
_STATE, _DISPATCH_FIELDS = 1, 4
_STATE_SIZE = ffi.sizeof("pyree_cpu_dispatch_state_t")
_STOPPED = (1 << 64) - 1   # what the loop's worker function returns once told to stop


class _Signal:
    """A counter one thread advances and one other thread waits on: spinning first, then asleep.

    On this kind of VM a sleeping thread takes ~25 us to wake (a Lock ping-pong round trip
    measures ~50 us), as long as a small kernel runs; a waiter that polls the counter sees it move
    in a few us (a split 64^3 matmul: ~8 us over one workgroup, ~25 us with sleeping workers).
    The poll calls os.sched_yield, which releases the GIL and the core, so a machine busier than
    its cores still runs the thread it waits for; each poll does take the GIL for a moment, which
    slows another thread's Python a little. (Spinning in pthread_spin_lock instead, outside the
    GIL, hands over in ~1 us, but made calls 50x slower whenever another process took a core.)
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


class _Workers:
    """Threads that run workgroup ranges, posted to by one thread at a time. (concurrent.futures
    would do, but importing it costs every process ~10 ms, logging included, and its hand-off
    sleeps: ~50 us per dispatch.)"""

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
    ~2 ms without any. While inside, it holds the loop's library: a module unloaded meanwhile
    unloads it only once the thread has left."""

    def __init__(self, pool: _NativeWorkers, name: str):
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


class _NativeWorkers:
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


class LocalTaskDevice(HostDevice):
    def __init__(self):
        super().__init__()
        self._workers = topology().threads
        self._native: _NativeWorkers | None = None  # started by the first kernel with a loop
        self._pool: _Workers | None = None  # Python workers, started on first need
        self._queue: queue.Queue = queue.Queue()
        # submissions queued or running (under _order); one runs at a time (under _running),
        # on the queue thread or inline on a submitting thread when none is pending
        self._order, self._running = threading.Lock(), threading.Lock()
        self._pending = 0
        self._thread = threading.Thread(target=self._drain, name="pyree-local-task-queue",
                                        daemon=True)
        self._thread.start()

    def run_workgroups(self, kernel, state) -> int:
        count = kernel.workgroup_count
        chunks = min(self._workers, count)
        if chunks == 1:
            return kernel.fn(state, 0, count)
        native = self._native_workers([kernel])
        if native is not None:
            records = ffi.new("uint64_t[]", [_pointer(kernel.fn), _pointer(state), count,
                                             native.chunk(count)])
            return native.status if native.execute(kernel.loop, records, 1) == 0 else 0
        if self._pool is None:
            self._pool = _Workers(self._workers - 1)
        return self._pool.run(kernel.fn, state, [count * i // chunks for i in range(chunks + 1)])

    def run_dispatches(self, run: DispatchRun, states) -> None:
        """The run's dispatches in one call of the worker loop's execute (where every kernel is
        compiled and a loop is known)."""
        if run.native is None:
            run.native = self._native_plan(run)
        if not run.native:
            return super().run_dispatches(run, states)
        loop, template, offsets, indices = run.native
        values = list(template)
        base = _pointer(states)
        values[_STATE::_DISPATCH_FIELDS] = [base + offset for offset in offsets]
        records = ffi.new("uint64_t[]", values)
        failed = self._native.execute(loop, records, len(indices))
        if failed < len(indices):
            raise kernel_error(run.kernels[indices[failed]], self._native.status)

    def _native_plan(self, run: DispatchRun) -> tuple | bool:
        """(loop, records less states, states' offsets, kernel indices) for the run's dispatches
        with workgroups, or False if it cannot run natively. The loop is one of the run's own
        kernels' (their command buffer keeps its library loaded), else None: whichever the
        workers last ran."""
        native = self._native_workers(run.kernels)
        if native is None:
            return False
        indices = [i for i, kernel in enumerate(run.kernels) if kernel.workgroup_count]
        template = []
        for i in indices:
            kernel = run.kernels[i]
            template += [_pointer(kernel.fn), 0, kernel.workgroup_count,
                         native.chunk(kernel.workgroup_count)]
        loop = next((kernel.loop for kernel in run.kernels if kernel.loop is not None), None)
        return loop, tuple(template), tuple(i * _STATE_SIZE for i in indices), tuple(indices)

    def _native_workers(self, kernels) -> _NativeWorkers | None:
        """The native workers, started on first need, if all ``kernels`` can run through a
        worker loop: compiled ones, with a loop among them or already running, on 2+ cores."""
        # the loop claims workgroups in 32 bits of a counter, which a claim must not overflow
        if self._workers < 2 or not all(isinstance(kernel.fn, ffi.CData)
                                        and kernel.workgroup_count < 1 << 31 for kernel in kernels):
            return None
        if self._native is None:
            loop = next((kernel.loop for kernel in kernels if kernel.loop is not None), None)
            if loop is not None:
                self._native = _NativeWorkers(loop, self._workers - 1)
        return self._native

    def queue_submit(self, command_buffer, binding_table, waits, signals, execute=None) -> None:
        """Runs the submission on the calling thread when nothing is queued or running and its
        waits are reached, else queues it. A call whose inputs are the caller's memory waits for
        its result anyway; inline, it skips two thread hand-offs (the queue thread's wake, then
        the caller's: ~130 us of a 5 ms MobileNet v2 call on the 2-core VM). Errors still reach
        the signals, as from the queue."""
        item = (execute or self.execute, command_buffer, binding_table, waits, signals)
        with self._order:
            inline = self._pending == 0 and all(_reached(s, v) for s, v in waits)
            self._pending += 1
            if not inline:
                self._queue.put(item)
                return
        try:
            with self._running:
                self._run(item)
        finally:
            with self._order:
                self._pending -= 1

    def _drain(self) -> None:
        """The queue thread: submissions run in order, each once its waits are reached."""
        while (item := self._queue.get()) is not None:
            with self._running:
                self._run(item)
            with self._order:
                self._pending -= 1
        with self._running:  # only one thread at a time may post to workers
            for pool in (self._pool, self._native):
                if pool is not None:
                    pool.stop()

    def _run(self, item) -> None:
        execute, command_buffer, binding_table, waits, signals = item
        try:
            for semaphore, value in waits:
                semaphore.wait(value)
            execute(command_buffer, binding_table)
        except HalError as error:
            self._fail(signals, error)
            return
        except Exception as error:  # a bug here must fail the waiters, not hang them
            self._fail(signals, HalError("INTERNAL", f"{type(error).__name__}: {error}"))
            return
        for semaphore, value in signals:
            semaphore.signal(value)

    @staticmethod
    def _fail(signals, error: HalError) -> None:
        for semaphore, _ in signals:
            semaphore.fail(error)

    def release(self) -> None:
        self._queue.put(None)


def _reached(semaphore, value: int) -> bool:
    try:
        return semaphore.query() >= value
    except HalError:  # failed: the queue's wait reports it
        return False


class LocalTaskDriver(PythonDriver):
    name = "local-task"

    def enumerate_devices(self) -> list[DeviceInfo]:
        threads = topology()
        plural = "s" if threads.threads != 1 else ""
        return [DeviceInfo("", f"host CPU, {threads.threads} worker thread{plural} "
                               f"({threads.reason})")]

    def create_device(self, path: str) -> LocalTaskDevice:
        if path not in ("", "0"):
            raise HalError("NOT_FOUND", f"local-task has one device ('local-task'), not '{path}'")
        return LocalTaskDevice()


_address: int | None = None


def driver() -> int:
    """Entry point of "pyree.runtime.drivers": the address of this driver's ABI struct."""
    global _address
    if _address is None:
        _address = export_driver(LocalTaskDriver())
    return _address


def _pointer(pointer) -> int:
    return int(ffi.cast("uintptr_t", pointer))
