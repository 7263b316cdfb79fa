"""A device's memory statistics (``LoadedModule.device.statistics``, what --print_statistics
prints): every driver allocation counted once in its heap, freed when released, live while the
pool keeps it; pooled calls allocate nothing more; concurrent allocations lose no count."""

from __future__ import annotations

import threading

import numpy as np
import pyree.runtime as rt

from .module_factory import COLS, ROWS

RESULT = ROWS * COLS * 4


def _total(statistics, field: str) -> int:
    return sum(getattr(heap, field) for heap in statistics.snapshot().values())


def test_calls_count_their_buffers_once_and_pooled_calls_add_nothing(arith_bytes, rng):
    module = rt.load_module(arith_bytes, device="local-sync")
    statistics = module.device.statistics
    before = _total(statistics, "allocated")
    a, b = (rng.standard_normal((ROWS, COLS)).astype(np.float32) for _ in range(2))
    result = module.add(a, b)
    np.testing.assert_array_equal(result.to_host(), a + b)
    first = _total(statistics, "allocated")
    assert first - before >= RESULT
    del result
    for _ in range(5):
        np.testing.assert_array_equal(module.add(a, b).to_host(), a + b)
    assert _total(statistics, "allocated") == first  # the pool served every later call
    for heap in statistics.snapshot().values():
        assert heap.live == heap.allocated - heap.freed and heap.peak <= heap.allocated


def test_released_buffers_count_as_freed_and_concurrent_counts_add_up(arith_bytes):
    module = rt.load_module(arith_bytes, device="local-sync")  # (its constants stay live)
    device = module.device
    statistics = device.statistics
    start = statistics.snapshot()["DEVICE_LOCAL"]
    buffers = []

    def allocate():
        for _ in range(200):
            buffers.append(device.allocate(1000))

    threads = [threading.Thread(target=allocate) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    grown = statistics.snapshot()["DEVICE_LOCAL"]
    assert grown.allocated - start.allocated == 800 * 1000
    assert grown.peak >= grown.live >= 800 * 1000
    for buffer in buffers:
        buffer.release()
        buffer.release()  # a second release frees nothing more
    done = statistics.snapshot()["DEVICE_LOCAL"]
    assert done.freed - grown.freed == 800 * 1000 and done.live == grown.live - 800 * 1000
    assert done.peak == grown.peak
    assert "DEVICE_LOCAL" in statistics.format().splitlines()[2]
