"""Device times of a traced submission (hal.h revision 4): HIP events with timing, recorded
around each command by CommandBuffer.issue_timed and read by the runtime's EventTimer
(pyree.runtime.hal.event_timing), which maps them to the host's clock."""

from __future__ import annotations

from pyree.hal.rocm.symbols import check, ffi
from pyree.runtime.hal.event_timing import EventApi

_NON_BLOCKING = 1   # hipStreamNonBlocking
_TIMING = 0         # hipEventDefault: an event with timing


class HipEvents(EventApi):
    def __init__(self, lib):
        self.lib = lib
        self._ms = ffi.new("float *")

    def create(self):
        out = ffi.new("void **")
        check(self.lib.hipEventCreateWithFlags(out, _TIMING), "hipEventCreateWithFlags")
        return out[0]

    def destroy(self, event) -> None:
        self.lib.hipEventDestroy(event)

    def record(self, event, stream) -> None:
        check(self.lib.hipEventRecord(event, stream), "hipEventRecord")

    def synchronize(self, event) -> None:
        check(self.lib.hipEventSynchronize(event), "hipEventSynchronize")

    def elapsed_ms(self, start, end) -> float:
        check(self.lib.hipEventElapsedTime(self._ms, start, end), "hipEventElapsedTime")
        return self._ms[0]

    def create_stream(self):
        out = ffi.new("void **")
        check(self.lib.hipStreamCreateWithFlags(out, _NON_BLOCKING),
              "hipStreamCreateWithFlags")
        return out[0]

    def destroy_stream(self, stream) -> None:
        self.lib.hipStreamDestroy(stream)
