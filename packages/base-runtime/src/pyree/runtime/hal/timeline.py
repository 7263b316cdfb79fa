"""Host timeline semaphores for Python drivers: a monotonically increasing value and a failure.

A failed submission fails the semaphores it would have signalled, so every waiter on a value not
yet reached gets that submission's error instead of hanging.
"""

from __future__ import annotations

import threading
import time

from pyree.runtime.hal.ffi import INFINITE_TIMEOUT_NS


class HalError(Exception):
    """Raised inside a Python driver; the SDK returns ``status`` and keeps ``message`` as last_error."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class TimelineSemaphore:
    """Subclasses (GPU semaphores) use ``_value``, ``_failure`` and the condition ``_changed``.

    Every call's submit signals and every call's result waits, so the host paths here take the
    condition's lock directly (``with`` on a Condition is a Python-level call) and notify only
    when a thread sleeps in ``wait``; a wait for a value already reached takes no lock at all
    (values only grow)."""

    def __init__(self, value: int = 0):
        self._value = value
        self._failure: HalError | None = None
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._sleepers = 0  # threads inside wait's _changed.wait

    def query(self) -> int:
        with self._lock:
            if self._failure is not None:
                raise self._failure
            return self._value

    def signal(self, value: int) -> None:
        with self._lock:
            if self._failure is not None:
                raise self._failure
            if value <= self._value:
                raise HalError("INVALID_ARGUMENT", f"semaphore signalled to {value} but it is "
                                                   f"already at {self._value}; values must increase")
            self._value = value
            if self._sleepers:
                self._changed.notify_all()

    def fail(self, error: HalError) -> None:
        with self._changed:
            if self._failure is None:
                self._failure = error
            self._changed.notify_all()

    def wait(self, value: int, timeout_ns: int = INFINITE_TIMEOUT_NS) -> None:
        if self._value >= value:
            return
        deadline = None if timeout_ns == INFINITE_TIMEOUT_NS else time.monotonic() + timeout_ns / 1e9
        with self._changed:
            while self._value < value:
                if self._failure is not None:
                    raise self._failure
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise HalError("DEADLINE_EXCEEDED", f"semaphore did not reach {value} within "
                                                        f"{timeout_ns / 1e9:g} s (it is at {self._value})")
                self._sleepers += 1
                try:
                    self._changed.wait(remaining)
                finally:
                    self._sleepers -= 1
