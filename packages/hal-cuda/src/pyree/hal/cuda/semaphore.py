"""Timeline semaphores on the GPU: a host-mapped 64-bit word per semaphore.

A submission signals by a stream memory write (cuStreamWriteValue64, which fences the stream's
earlier writes) of the value into the word, and nothing else: the submit path stays one C call
per signal. A host waiter polls the word briefly (a small submission finishes within
microseconds, sooner than a blocked thread wakes up); only then does it record the semaphore's
event on the stream, after everything queued so far, and block in cuEventSynchronize. A
submission that waits on a value the host has not signalled yet waits on the GPU
(cuStreamWaitValue64 >= value); nothing blocks the host at submit. ``query`` reads the word.
"""

from __future__ import annotations

import threading
import time

from pyree.hal.cuda import symbols
from pyree.hal.cuda.allocator import MAPPED, device_pointer, host_alloc
from pyree.hal.cuda.symbols import CUDA_ERROR_NOT_READY, CUDA_SUCCESS, CudaError, check, create_event, ffi
from pyree.runtime.hal.python_driver import HalError, TimelineSemaphore

_INFINITE = (1 << 64) - 1
_SPINS = 4000  # polls of the word (each one read of mapped host memory) before an untimed wait blocks


class SemaphoreSlots:
    """Host-mapped words (512 per pinned page) and events, reused across semaphores: the runtime
    makes a semaphore per call, and cuMemHostAlloc is far too slow for that. A slot goes back
    to use only once its event says no GPU write to its word is still pending."""

    PAGE_WORDS = 512

    def __init__(self, cu):
        self.cu = cu
        self._free: list[tuple[object, int, object]] = []  # (uint64_t *, device address, event)
        self._pages: list = []
        # Semaphores are made on any thread and released by the collector (reentrant): two
        # threads taking the same slot would share one word, and a wait would return on the
        # other's signal.
        self._lock = threading.RLock()

    def acquire(self):
        cu = self.cu
        with self._lock:
            for i, slot in enumerate(self._free):  # released slots carry an event recorded then
                if cu.cuEventQuery(slot[2]) == CUDA_SUCCESS:
                    return self._free.pop(i)
            host = host_alloc(cu, 8 * self.PAGE_WORDS, MAPPED, "semaphore")
            self._pages.append(host)
            words, device = ffi.cast("uint64_t *", host), device_pointer(cu, host)
            for k in range(self.PAGE_WORDS):
                self._free.append((words + k, device + 8 * k, create_event(cu)))
            return self._free.pop()

    def release(self, slot, stream) -> None:
        """``stream``: where writes to the slot's word may still be queued."""
        self.cu.cuEventRecord(slot[2], stream)
        with self._lock:
            self._free.append(slot)

    def destroy(self) -> None:
        for _, _, event in self._free:
            self.cu.cuEventDestroy(event)
        for host in self._pages:
            self.cu.cuMemFreeHost(host)


class CudaSemaphore(TimelineSemaphore):
    def __init__(self, slots: SemaphoreSlots, stream, initial_value: int, on_fault):
        super().__init__(initial_value)
        self.cu, self._stream = slots.cu, stream
        self._on_fault = on_fault  # turns an asynchronous CUDA error into a clear HalError
        self._slots = slots
        self._slot = slots.acquire()
        self._word, self._device, self._event = self._slot  # the word: a uint64_t * cdata
        self._word[0] = initial_value
        self._promised = initial_value  # the highest value a submission will write

    def __del__(self):
        slot, self._slot = getattr(self, "_slot", None), None
        if slot is not None:
            self._slots.release(slot, self._stream)

    # -- host side -----------------------------------------------------------------------------
    def query(self) -> int:
        if self._failure is not None:
            raise self._failure
        return self._word[0]

    def signal(self, value: int) -> None:
        with self._changed:
            if self._failure is not None:
                raise self._failure
            if value <= max(self._word[0], self._promised):
                raise HalError("INVALID_ARGUMENT", f"semaphore signalled to {value} but it is at "
                                                   f"{self._word[0]} (or will be at "
                                                   f"{self._promised}); values must increase")
            self._promised = value
            self._word[0] = value
            self._changed.notify_all()

    def wait(self, value: int, timeout_ns: int = _INFINITE) -> None:
        word = self._word
        if timeout_ns == _INFINITE and self._promised >= value and self._failure is None:
            for _ in range(_SPINS):
                if word[0] >= value:
                    return
        deadline = None if timeout_ns == _INFINITE else time.monotonic() + timeout_ns / 1e9
        while self._word[0] < value:
            if self._failure is not None:
                raise self._failure
            if self._promised >= value:  # a submission will write it: wait on its event
                self._wait_event(deadline, value)
                continue
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise HalError("DEADLINE_EXCEEDED", f"semaphore did not reach {value} within "
                                                    f"{timeout_ns / 1e9:g} s (it is at "
                                                    f"{self._word[0]})")
            with self._changed:
                if self._word[0] < value and self._promised < value and self._failure is None:
                    self._changed.wait(0.001 if remaining is None else min(remaining, 0.001))
        if self._failure is not None:
            raise self._failure

    def _wait_event(self, deadline, value) -> None:
        cu = self.cu
        err = cu.cuEventRecord(self._event, self._stream)  # after the promised write
        if err:
            check(err, "cuEventRecord")
        if deadline is None:
            err = cu.cuEventSynchronize(self._event)
        else:
            while True:
                err = cu.cuEventQuery(self._event)
                if err != CUDA_ERROR_NOT_READY or time.monotonic() >= deadline:
                    break
                time.sleep(20e-6)
            if err == CUDA_ERROR_NOT_READY:
                raise HalError("DEADLINE_EXCEEDED", f"semaphore did not reach {value} in time "
                                                    f"(it is at {self._word[0]})")
        if err:
            try:
                check(err, "waiting for GPU work")
            except CudaError as e:
                self.fail(self._on_fault(e))

    # -- device side ---------------------------------------------------------------------------
    def device_wait(self, stream, value: int) -> None:
        """``stream``: the stream that waits."""
        if self._failure is not None:
            raise self._failure
        if self._word[0] >= value:
            return
        err = self.cu.cuStreamWaitValue64(stream, self._device, value, symbols.CU_STREAM_WAIT_VALUE_GEQ)
        if err:
            check(err, f"cuStreamWaitValue64(>= {value})")

    def device_signal(self, stream, value: int) -> None:
        """``stream``: the stream that signals."""
        if value <= self._promised:
            raise HalError("INVALID_ARGUMENT", f"submission signals semaphore to {value} but it "
                                               f"is already promised {self._promised}")
        err = self.cu.cuStreamWriteValue64(stream, self._device, value,
                                           symbols.CU_STREAM_WRITE_VALUE_DEFAULT)
        if err:
            check(err, f"cuStreamWriteValue64({value})")
        self._promised = value
