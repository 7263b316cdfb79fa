"""Timeline semaphores on the GPU: a host-mapped 64-bit word per semaphore.

A submission signals by a stream memory write (cuStreamWriteValue64, which fences the stream's
earlier writes) of the value into the word, and nothing else: the submit path stays one C call
per signal. A host waiter polls the word briefly (a small submission finishes within
microseconds, sooner than a blocked thread wakes up); only then does it record the semaphore's
event on the stream, after everything queued so far, and block in cuEventSynchronize. A
submission that waits on a value the host has not signalled yet waits on the GPU
(cuStreamWaitValue64 >= value); nothing blocks the host at submit. ``query`` reads the word.
The per-submit calls go through ``hotpath`` (cffi), not cuda-python.
"""

from __future__ import annotations

import ctypes
import time

from pyree.hal.cuda.hotpath import NOT_READY, SUCCESS, HotPath, handle
from pyree.hal.cuda.symbols import CudaError, check
from pyree.runtime.hal.python_driver import HalError, TimelineSemaphore

_INFINITE = (1 << 64) - 1
_SPINS = 4000  # polls of the word (about 0.1 us each) before an untimed wait blocks
_GEQ = 0       # CU_STREAM_WAIT_VALUE_GEQ


class SemaphoreSlots:
    """Host-mapped words (512 per pinned page) and events, reused across semaphores: the runtime
    makes a semaphore per call, and cuMemHostAlloc is far too slow for that. A slot goes back
    to use only once its event says no GPU write to its word is still pending."""

    PAGE_WORDS = 512

    def __init__(self, cu, hot: HotPath):
        self.cu, self._hot = cu, hot
        self._free: list[tuple[int, int, object]] = []
        self._pages: list[int] = []

    def acquire(self):
        cu = self.cu
        for i, slot in enumerate(self._free):  # released slots carry an event recorded then
            if cu.cuEventQuery(slot[2])[0] == cu.CUresult.CUDA_SUCCESS:
                return self._free.pop(i)
        flags = cu.CU_MEMHOSTALLOC_DEVICEMAP | cu.CU_MEMHOSTALLOC_PORTABLE
        host = int(check(cu, cu.cuMemHostAlloc(8 * self.PAGE_WORDS, flags),
                         "cuMemHostAlloc(semaphores)"))
        device = int(check(cu, cu.cuMemHostGetDevicePointer(host, 0), "cuMemHostGetDevicePointer"))
        self._pages.append(host)
        for k in range(self.PAGE_WORDS):
            event = check(cu, cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING),
                          "cuEventCreate")
            self._free.append((host + 8 * k, device + 8 * k, event, handle(event)))
        return self._free.pop()

    def release(self, slot, stream) -> None:
        """``stream``: where writes to the slot's word may still be queued (cffi handle)."""
        self._hot.cuEventRecord(slot[3], stream)
        self._free.append(slot)

    def destroy(self) -> None:
        for _, _, event, _ in self._free:
            self.cu.cuEventDestroy(event)
        for host in self._pages:
            self.cu.cuMemFreeHost(host)


class CudaSemaphore(TimelineSemaphore):
    def __init__(self, cu, hot: HotPath, slots: SemaphoreSlots, stream, initial_value: int,
                 on_fault):
        super().__init__(initial_value)
        self.cu, self.hot, self._stream = cu, hot, stream
        self._on_fault = on_fault  # turns an asynchronous CUDA error into a clear HalError
        self._slots = slots
        self._slot = slots.acquire()
        host, self._device, self._event, self._event_handle = self._slot
        self._word = ctypes.c_uint64.from_address(host)
        self._word.value = initial_value
        self._promised = initial_value  # the highest value a submission will write

    def __del__(self):
        slot, self._slot = getattr(self, "_slot", None), None
        if slot is not None:
            self._slots.release(slot, self._stream)

    # -- host side -----------------------------------------------------------------------------
    def query(self) -> int:
        if self._failure is not None:
            raise self._failure
        return self._word.value

    def signal(self, value: int) -> None:
        with self._changed:
            if self._failure is not None:
                raise self._failure
            if value <= max(self._word.value, self._promised):
                raise HalError("INVALID_ARGUMENT", f"semaphore signalled to {value} but it is at "
                                                   f"{self._word.value} (or will be at "
                                                   f"{self._promised}); values must increase")
            self._promised = value
            self._word.value = value
            self._changed.notify_all()

    def wait(self, value: int, timeout_ns: int = _INFINITE) -> None:
        word = self._word
        if timeout_ns == _INFINITE and self._promised >= value and self._failure is None:
            for _ in range(_SPINS):
                if word.value >= value:
                    return
        deadline = None if timeout_ns == _INFINITE else time.monotonic() + timeout_ns / 1e9
        while self._word.value < value:
            if self._failure is not None:
                raise self._failure
            if self._promised >= value:  # a submission will write it: wait on its event
                self._wait_event(deadline, value)
                continue
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise HalError("DEADLINE_EXCEEDED", f"semaphore did not reach {value} within "
                                                    f"{timeout_ns / 1e9:g} s (it is at "
                                                    f"{self._word.value})")
            with self._changed:
                if self._word.value < value and self._promised < value and self._failure is None:
                    self._changed.wait(0.001 if remaining is None else min(remaining, 0.001))
        if self._failure is not None:
            raise self._failure

    def _wait_event(self, deadline, value) -> None:
        hot = self.hot
        err = hot.cuEventRecord(self._event_handle, self._stream)  # after the promised write
        if err != SUCCESS:
            hot.fail(err, "cuEventRecord")
        if deadline is None:
            err = hot.cuEventSynchronize(self._event_handle)
        else:
            while True:
                err = hot.cuEventQuery(self._event_handle)
                if err != NOT_READY or time.monotonic() >= deadline:
                    break
                time.sleep(20e-6)
            if err == NOT_READY:
                raise HalError("DEADLINE_EXCEEDED", f"semaphore did not reach {value} in time "
                                                    f"(it is at {self._word.value})")
        if err != SUCCESS:
            try:
                hot.fail(err, "waiting for GPU work")
            except CudaError as e:
                self.fail(self._on_fault(e))

    # -- device side ---------------------------------------------------------------------------
    def device_wait(self, stream, value: int) -> None:
        """``stream``: the cffi handle of the stream that waits."""
        if self._failure is not None:
            raise self._failure
        if self._word.value >= value:
            return
        err = self.hot.cuStreamWaitValue64(stream, self._device, value, _GEQ)
        if err != SUCCESS:
            self.hot.fail(err, f"cuStreamWaitValue64(>= {value})")

    def device_signal(self, stream, value: int) -> None:
        """``stream``: the cffi handle of the stream that signals."""
        if value <= self._promised:
            raise HalError("INVALID_ARGUMENT", f"submission signals semaphore to {value} but it "
                                               f"is already promised {self._promised}")
        hot = self.hot
        err = hot.cuStreamWriteValue64(stream, self._device, value, 0)
        if err != SUCCESS:
            hot.fail(err, f"cuStreamWriteValue64({value})")
        self._promised = value
