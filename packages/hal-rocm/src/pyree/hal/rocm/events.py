"""A device's pool of HIP events (timing disabled), reused: semaphores signal with one per
submission, and creating an event per submission would cost a driver call each time."""

from __future__ import annotations

from pyree.hal.rocm.symbols import check, ffi

_DISABLE_TIMING = 2  # hipEventDisableTiming


class EventPool:
    def __init__(self, lib):
        self.lib = lib
        self._free: list = []
        self._all: list = []

    def acquire(self):
        """An event (``void *``) no one else holds; any earlier record of it is superseded."""
        try:
            return self._free.pop()
        except IndexError:
            out = ffi.new("void **")
            check(self.lib.hipEventCreateWithFlags(out, _DISABLE_TIMING),
                  "hipEventCreateWithFlags")
            self._all.append(out[0])
            return out[0]

    def release(self, event) -> None:
        self._free.append(event)

    def destroy(self) -> None:
        """After the stream is synchronized: every event made, held or not."""
        for event in self._all:
            self.lib.hipEventDestroy(event)
        self._all.clear()
        self._free.clear()
