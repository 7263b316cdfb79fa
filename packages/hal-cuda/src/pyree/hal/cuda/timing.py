"""Device times of a traced submission (hal.h revision 4): CUDA events with timing, recorded
around each command by CommandBuffer.issue_timed and read by the runtime's EventTimer
(pyree.runtime.hal.event_timing), which maps them to the host's clock."""

from __future__ import annotations

from pyree.hal.cuda import symbols
from pyree.hal.cuda.symbols import check, create_event, ffi
from pyree.runtime.hal.event_timing import EventApi


class CudaEvents(EventApi):
    def __init__(self, cu):
        self.cu = cu
        self._ms = ffi.new("float *")

    def create(self):
        return create_event(self.cu, symbols.CU_EVENT_DEFAULT)

    def destroy(self, event) -> None:
        self.cu.cuEventDestroy(event)

    def record(self, event, stream) -> None:
        check(self.cu.cuEventRecord(event, stream), "cuEventRecord")

    def synchronize(self, event) -> None:
        check(self.cu.cuEventSynchronize(event), "cuEventSynchronize")

    def elapsed_ms(self, start, end) -> float:
        check(self.cu.cuEventElapsedTime(self._ms, start, end), "cuEventElapsedTime")
        return self._ms[0]

    def create_stream(self):
        out = ffi.new("CUstream *")
        check(self.cu.cuStreamCreate(out, symbols.CU_STREAM_NON_BLOCKING), "cuStreamCreate")
        return out[0]

    def destroy_stream(self, stream) -> None:
        self.cu.cuStreamDestroy(stream)
