"""local-task: asynchronous submissions on a queue thread; each dispatch's workgroups are split
into os.cpu_count() contiguous ranges, one run by the queue thread and the others by workers.

cffi releases the GIL while a kernel runs, so the ranges really run in parallel.
"""

from __future__ import annotations

import os
import queue
import threading
import time

from pyree.runtime.drivers.host_device import HostDevice
from pyree.runtime.hal.python_driver import (
    DeviceInfo,
    HalError,
    PythonDriver,
    export_driver,
)

# How long a waiting thread polls before it sleeps: longer than the gaps between a model's
# dispatches, short enough that an idle device gives its cores back almost at once.
SPIN_S = 2e-3


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


class LocalTaskDevice(HostDevice):
    def __init__(self):
        super().__init__()
        self._workers = os.cpu_count() or 1
        self._pool = _Workers(self._workers - 1)
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._drain, name="pyree-local-task-queue",
                                        daemon=True)
        self._thread.start()

    def run_workgroups(self, kernel, state) -> int:
        count = kernel.workgroup_count
        chunks = min(self._workers, count)
        if chunks == 1:
            return kernel.fn(state, 0, count)
        return self._pool.run(kernel.fn, state, [count * i // chunks for i in range(chunks + 1)])

    def queue_submit(self, command_buffer, binding_table, waits, signals) -> None:
        self._queue.put((command_buffer, binding_table, waits, signals))

    def _drain(self) -> None:
        """The queue thread: submissions run in order, each once its waits are reached."""
        while (item := self._queue.get()) is not None:
            command_buffer, binding_table, waits, signals = item
            try:
                for semaphore, value in waits:
                    semaphore.wait(value)
                self.execute(command_buffer, binding_table)
            except HalError as error:
                self._fail(signals, error)
                continue
            except Exception as error:  # a bug here must fail the waiters, not hang them
                self._fail(signals, HalError("INTERNAL", f"{type(error).__name__}: {error}"))
                continue
            for semaphore, value in signals:
                semaphore.signal(value)
        self._pool.stop()  # here, not in release: only one thread at a time may post to workers

    @staticmethod
    def _fail(signals, error: HalError) -> None:
        for semaphore, _ in signals:
            semaphore.fail(error)

    def release(self) -> None:
        self._queue.put(None)


class LocalTaskDriver(PythonDriver):
    name = "local-task"

    def enumerate_devices(self) -> list[DeviceInfo]:
        return [DeviceInfo("", f"host CPU, {os.cpu_count()} worker threads")]

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
