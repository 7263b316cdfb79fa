"""The local-task device: submissions in order on a queue thread (or inline on the submitting
thread when nothing is pending), each dispatch's workgroups spread over that thread and the
workers (workers.py)."""

from __future__ import annotations

import queue
import threading

from pyree.runtime.drivers.local.command_buffer import DispatchRun
from pyree.runtime.drivers.local.device import HostDevice, kernel_error
from pyree.runtime.drivers.local_task.topology import topology
from pyree.runtime.drivers.local_task.workers import (
    DISPATCH_FIELDS,
    STATE,
    STATE_SIZE,
    NativeWorkers,
    Workers,
)
from pyree.runtime.hal.ffi import ffi
from pyree.runtime.hal.python_driver import HalError


class LocalTaskDevice(HostDevice):
    def __init__(self):
        super().__init__()
        self._workers = topology().threads
        self._native: NativeWorkers | None = None  # started by the first kernel with a loop
        self._pool: Workers | None = None  # Python workers, started on first need
        self._queue: queue.Queue = queue.Queue()
        # submissions queued or running (under _order); one runs at a time (under _running),
        # on the queue thread or inline on a submitting thread when none is pending
        self._order, self._running = threading.Lock(), threading.Lock()
        self._pending = 0
        self._thread = threading.Thread(target=self._drain, name="pyree-local-task-queue",
                                        daemon=True)
        self._thread.start()

    def run_workgroups(self, kernel, state, count: int | None = None) -> int:
        count = kernel.workgroup_count if count is None else count
        chunks = min(self._workers, count)
        if chunks == 1:
            return kernel.fn(state, 0, count)
        native = self._native_workers([kernel], [count])
        if native is not None:
            records = ffi.new("uint64_t[]", [_pointer(kernel.fn), _pointer(state), count,
                                             native.chunk(count)])
            return native.status if native.execute(kernel.loop, records, 1) == 0 else 0
        if self._pool is None:
            self._pool = Workers(self._workers - 1)
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
        values[STATE::DISPATCH_FIELDS] = [base + offset for offset in offsets]
        records = ffi.new("uint64_t[]", values)
        failed = self._native.execute(loop, records, len(indices))
        if failed < len(indices):
            raise kernel_error(run.kernels[indices[failed]], self._native.status)

    def _native_plan(self, run: DispatchRun) -> tuple | bool:
        """(loop, records less states, states' offsets, kernel indices) for the run's dispatches
        with workgroups, or False if it cannot run natively. The loop is one of the run's own
        kernels' (their command buffer keeps its library loaded), else None: whichever the
        workers last ran."""
        native = self._native_workers(run.kernels, run.counts)
        if native is None:
            return False
        indices = [i for i, count in enumerate(run.counts) if count]
        template = []
        for i in indices:
            count = run.counts[i]
            template += [_pointer(run.kernels[i].fn), 0, count, native.chunk(count)]
        loop = next((kernel.loop for kernel in run.kernels if kernel.loop is not None), None)
        return loop, tuple(template), tuple(i * STATE_SIZE for i in indices), tuple(indices)

    def _native_workers(self, kernels, counts) -> NativeWorkers | None:
        """The native workers, started on first need, if all ``kernels`` (with these workgroup
        ``counts``) can run through a worker loop: compiled ones, with a loop among them or
        already running, on 2+ cores."""
        # the loop claims workgroups in 32 bits of a counter, which a claim must not overflow
        if self._workers < 2 or not all(isinstance(kernel.fn, ffi.CData) for kernel in kernels) \
                or not all(count < 1 << 31 for count in counts):
            return None
        if self._native is None:
            loop = next((kernel.loop for kernel in kernels if kernel.loop is not None), None)
            if loop is not None:
                self._native = NativeWorkers(loop, self._workers - 1)
        return self._native

    def queue_submit(self, command_buffer, binding_table, waits, signals, execute=None) -> None:
        """Runs the submission on the calling thread when nothing is queued or running and its
        waits are reached, else queues it. A call whose inputs are the caller's memory waits for
        its result anyway; inline, it skips two thread hand-offs (the queue thread's wake, then
        the caller's; BENCHMARKS.md, "Inline submissions"). Errors still reach the signals, as
        from the queue."""
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


def _pointer(pointer) -> int:
    return int(ffi.cast("uintptr_t", pointer))
