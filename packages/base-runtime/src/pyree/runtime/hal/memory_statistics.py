"""What a device has allocated and freed, by heap, for --print_statistics and
``Device.statistics``: IREE's allocator statistics (peak, allocated, freed, live bytes), kept by
the runtime around every driver's allocate and release, so no driver reports anything.

Device-local memory is what ``allocate`` returns; host-local is the host-visible memory of
``allocate_mapped``. Imported memory (the host's or another library's) is not counted: it
was allocated by its owner. Buffers the pool keeps for the next call stay live."""

from __future__ import annotations

import threading

from pyree.runtime.records import Record

HEAPS = ("HOST_LOCAL", "DEVICE_LOCAL")


class HeapStatistics(Record):
    peak: int
    allocated: int
    freed: int

    @property
    def live(self) -> int:
        return self.allocated - self.freed


class MemoryStatistics:
    def __init__(self):
        self._lock = threading.Lock()
        self._counts = {heap: [0, 0, 0] for heap in HEAPS}  # peak, allocated, freed

    def allocated(self, heap: str, size: int) -> None:
        with self._lock:
            counts = self._counts[heap]
            counts[1] += size
            counts[0] = max(counts[0], counts[1] - counts[2])

    def freed(self, heap: str, size: int) -> None:
        with self._lock:
            self._counts[heap][2] += size

    def snapshot(self) -> dict[str, HeapStatistics]:
        with self._lock:
            return {heap: HeapStatistics(*counts) for heap, counts in self._counts.items()}

    def format(self) -> str:
        """IREE's layout (iree_hal_allocator_statistics_fprint), so scripts that read it read
        this."""
        lines = ["[[ iree_hal_allocator_t memory statistics ]]"]
        for heap, s in self.snapshot().items():
            lines.append(f"{heap:>12}: {s.peak:12}B peak / {s.allocated:12}B allocated / "
                         f"{s.freed:12}B freed / {s.live:12}B live")
        return "\n".join(lines)
