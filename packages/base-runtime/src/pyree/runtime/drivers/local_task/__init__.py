"""local-task: asynchronous submissions on a queue thread; each dispatch's workgroups are split
into os.cpu_count() contiguous ranges, one run by the queue thread and the others by workers.

cffi releases the GIL while a kernel runs, so the ranges really run in parallel.
"""

from __future__ import annotations

import os
import queue
import threading

from pyree.runtime.drivers.host_device import HostDevice
from pyree.runtime.hal.python_driver import (
    DeviceInfo,
    HalError,
    PythonDriver,
    export_driver,
)


class _Workers:
    """Threads that run workgroup ranges. (concurrent.futures would do, but importing it costs
    every process ~10 ms, logging included.)"""

    def __init__(self, count: int):
        self._count = count
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        for i in range(count):
            threading.Thread(target=self._work, name=f"pyree-local-task-{i}", daemon=True).start()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, state, begin, end, statuses, index, done = job
            try:
                statuses[index] = fn(state, begin, end)
            except BaseException as error:  # re-raised on the thread that waits for the ranges
                statuses[index] = error
            finally:
                done.release()

    def run(self, fn, state, bounds: list[int]) -> int:
        """Runs ``fn`` over each range [bounds[i], bounds[i + 1]), the last on this thread;
        returns the first nonzero status."""
        chunks = len(bounds) - 1
        statuses: list = [0] * chunks
        done = threading.Semaphore(0)
        for i in range(chunks - 1):
            self._jobs.put((fn, state, bounds[i], bounds[i + 1], statuses, i, done))
        try:
            statuses[-1] = fn(state, bounds[-2], bounds[-1])
        finally:
            for _ in range(chunks - 1):
                done.acquire()
        for status in statuses:
            if isinstance(status, BaseException):
                raise status
        return next((status for status in statuses if status), 0)

    def stop(self) -> None:
        for _ in range(self._count):
            self._jobs.put(None)


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

    @staticmethod
    def _fail(signals, error: HalError) -> None:
        for semaphore, _ in signals:
            semaphore.fail(error)

    def release(self) -> None:
        self._queue.put(None)
        self._pool.stop()


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
