"""Timeline semaphores over HIP events (no stream memory operations: not every ROCm GPU has them).

A submission signals by recording an event from the device's pool on the stream, remembered as
(value, event); the semaphore's value is the highest whose event has completed. ``query`` polls the
pending events (hipEventQuery); a host wait blocks in hipEventSynchronize on the earliest event that
reaches the value, or, with a timeout, polls it until the deadline. A value no submission has
promised yet (the host will signal it, or a later submission) is waited for on the host, as the
SDK's TimelineSemaphore does. A device wait on a value this device's stream will signal needs
nothing (the stream is in order); another device's event is waited for with hipStreamWaitEvent.
An asynchronous fault seen at an event fails the semaphore with the device's description of it.
"""

from __future__ import annotations

import time

from pyree.hal.rocm.symbols import NOT_READY, SUCCESS, HipError, check, error
from pyree.runtime.hal.python_driver import HalError, TimelineSemaphore

_INFINITE = (1 << 64) - 1


class RocmSemaphore(TimelineSemaphore):
    def __init__(self, lib, events, stream, initial_value: int, on_fault):
        super().__init__(initial_value)
        self.lib, self._events, self._stream = lib, events, stream
        self._on_fault = on_fault  # turns an asynchronous HIP error into a clear HalError
        self._pending: list[tuple[int, object]] = []  # (value, event), values increasing
        self._promised = initial_value  # the highest value a submission or the host will reach

    def __del__(self):
        for _, event in getattr(self, "_pending", ()):
            self._events.release(event)

    def _poll(self) -> None:
        """Advances the value past every completed event. Called holding ``_changed``."""
        pending = self._pending
        while pending:
            value, event = pending[0]
            err = self.lib.hipEventQuery(event)
            if err == NOT_READY:
                return
            if err != SUCCESS:
                self._fault(error(err, "GPU work signalling a semaphore"))
                return
            pending.pop(0)
            self._events.release(event)
            self._value = max(self._value, value)

    def _settle(self) -> None:
        """Takes in completed signals, then raises a failure (called holding ``_changed``)."""
        self._poll()
        if self._failure is not None:
            raise self._failure

    def _event_reaching(self, value: int):
        """The event of the first pending signal to ``value`` or beyond, if one is queued."""
        return next((ev for v, ev in self._pending if v >= value), None)

    def _fault(self, e: HipError) -> None:
        """Called holding ``_changed``."""
        if self._failure is None:
            self._failure = self._on_fault(e)
        self._changed.notify_all()

    # -- host side -----------------------------------------------------------------------------
    def query(self) -> int:
        with self._changed:
            self._settle()
            return self._value

    def signal(self, value: int) -> None:
        with self._changed:
            self._settle()
            if value <= self._promised:
                raise HalError("INVALID_ARGUMENT", f"semaphore signalled to {value} but it is at "
                                                   f"{self._value} (or will be at "
                                                   f"{self._promised}); values must increase")
            self._promised = self._value = value
            self._changed.notify_all()

    def wait(self, value: int, timeout_ns: int = _INFINITE) -> None:
        deadline = None if timeout_ns == _INFINITE else time.monotonic() + timeout_ns / 1e9
        while True:
            with self._changed:
                self._settle()
                if self._value >= value:
                    return
                event = self._event_reaching(value)
                if event is None:  # nobody has promised it yet: wait for a signal or submission
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise HalError("DEADLINE_EXCEEDED", f"semaphore did not reach {value} "
                                                            f"within {timeout_ns / 1e9:g} s (it "
                                                            f"is at {self._value})")
                    self._changed.wait(remaining)
                    continue
            self._wait_event(event, deadline, value)

    def _wait_event(self, event, deadline, value) -> None:
        """Blocks until ``event`` completes (or the deadline passes); the caller polls again.
        If the event was released and reused meanwhile, this only waits for later work."""
        lib = self.lib
        if deadline is None:
            err = lib.hipEventSynchronize(event)
        else:
            while True:
                err = lib.hipEventQuery(event)
                if err != NOT_READY or time.monotonic() >= deadline:
                    break
                time.sleep(20e-6)
            if err == NOT_READY:
                raise HalError("DEADLINE_EXCEEDED", f"semaphore did not reach {value} in time "
                                                    f"(it is at {self._value})")
        if err != SUCCESS:
            with self._changed:
                self._fault(error(err, "waiting for GPU work"))

    # -- device side ---------------------------------------------------------------------------
    def device_wait(self, stream, value: int) -> None:
        """Makes work queued next on ``stream`` wait until the semaphore reaches ``value``."""
        with self._changed:
            self._settle()
            if self._value >= value:
                return
            event = self._event_reaching(value)
            if event is not None:
                if stream != self._stream:
                    check(self.lib.hipStreamWaitEvent(stream, event, 0),
                          "hipStreamWaitEvent")
                return  # on the signalling stream itself, order is enough
        self.wait(value)  # a value the host (or a later submission) will signal

    def device_signal(self, stream, value: int) -> None:
        """Records an event on ``stream`` after the work queued so far; it stands for ``value``."""
        with self._changed:
            if value <= self._promised:
                raise HalError("INVALID_ARGUMENT", f"submission signals semaphore to {value} but "
                                                   f"it is already promised {self._promised}")
            event = self._events.acquire()
            err = self.lib.hipEventRecord(event, stream)
            if err != SUCCESS:
                self._events.release(event)
                raise error(err, f"hipEventRecord (signal {value})")
            self._pending.append((value, event))
            self._promised = value
            self._changed.notify_all()
