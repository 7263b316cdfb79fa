"""What a function with run-time sizes keeps between calls: one recording per size (the last
MAX_SIZES of them), its transient arena grown to the largest size, and buffers in size classes,
so that a long run of mixed sizes neither records again for a size it has nor grows the pool;
threads calling one function with different sizes each get their own answers. Every result is
checked against numpy."""

from __future__ import annotations

import threading

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.runtime.hal.device import Device
from pyree.runtime.vm.buffer_pool import size_class
from pyree.runtime.vm.function import MAX_SIZES

from .module_factory import SCALE

SCALE32 = np.float32(SCALE)


@pytest.fixture(params=["local-sync", "local-task"])
def module(request, sized_bytes):
    return rt.load_module(sized_bytes, device=request.param)


@pytest.fixture
def recordings(monkeypatch) -> list:
    """Each command buffer recorded from now on."""
    made = []
    original = Device.create_command_buffer

    def counted(self, *args):
        made.append(args)
        return original(self, *args)

    monkeypatch.setattr(Device, "create_command_buffer", counted)
    return made


def test_a_size_seen_before_records_nothing(module, rng, recordings):
    for n in (5, 5, 9, 5, 9, 9):
        x = rng.standard_normal(n).astype(np.float32)
        np.testing.assert_array_equal(module.scale(x).to_host(), x * SCALE32)
    assert len(recordings) == 2
    assert module.scale.recorded_sizes == [{"n": 5}, {"n": 9}]


def test_the_least_recently_called_size_is_dropped(module, rng, recordings):
    sizes = list(range(1, MAX_SIZES + 1))
    for n in sizes + [1]:  # 1 again: now the most recent
        x = rng.standard_normal(n).astype(np.float32)
        np.testing.assert_array_equal(module.copy(x).to_host(), x)
    assert len(recordings) == MAX_SIZES
    x = rng.standard_normal(100).astype(np.float32)
    np.testing.assert_array_equal(module.copy(x).to_host(), x)  # drops n = 2
    assert [s["n"] for s in module.copy.recorded_sizes] == [*sizes[2:], 1, 100]
    for n in (1, 100, 2):  # kept, kept, recorded again
        x = rng.standard_normal(n).astype(np.float32)
        np.testing.assert_array_equal(module.copy(x).to_host(), x)
    assert len(recordings) == MAX_SIZES + 2


def test_the_transient_arena_grows_to_the_largest_size(module, rng):
    """staged goes through the transient arena: calls up, down and up again in size, queued
    without waits, each checked once all are done."""
    calls = []
    for n in (3, 700, 40, 5000, 1, 5000, 0, 2500):
        x = rng.standard_normal(n).astype(np.float32)
        calls.append((x, module.staged(x)))
    for x, result in calls:
        np.testing.assert_array_equal(result.to_host(), x * SCALE32)
    own = module.staged._own[0]
    assert own.size == size_class(5000 * 4)


def test_a_long_run_of_mixed_sizes_keeps_the_pool_bounded(sized_bytes, monkeypatch):
    """1000 calls of random sizes (each checked against numpy), half of them queued without a
    wait: allocations die out once each size class has its buffers, and the memory allocated
    and the pool's free bytes stay within what those classes hold."""
    module = rt.load_module(sized_bytes, device="local-task")
    allocations = []
    for name in ("allocate", "allocate_mapped"):
        original = getattr(Device, name)
        monkeypatch.setattr(Device, name, lambda self, size, _o=original: allocations.append(size)
                            or _o(self, size))
    rng = np.random.default_rng(29)
    pool, largest, counts = module.pool, 0, []
    for i in range(1000):
        n = int(rng.integers(0, 3000))
        batch = int(rng.integers(1, 65))
        x = rng.standard_normal(n).astype(np.float32)
        a, b = (rng.standard_normal((batch, 3)).astype(np.float32) for _ in range(2))
        staged, joined = module.staged(x), module.concat(a, b)
        if i % 2:
            np.testing.assert_array_equal(staged.to_host(), x * SCALE32)
            np.testing.assert_array_equal(joined.to_host(), np.concatenate([a, b]))
        largest = max(largest, pool.pooled_bytes)
        counts.append(len(allocations))
    assert counts[-1] - counts[499] <= counts[499] // 4, counts[::50]
    # the classes of every result and upload (the largest 12 KiB: 3000 f32), each holding at
    # most 8 free buffers in the pool
    classes = {size_class(k) for k in range(0, 3000 * 4 + 1, 4)} | \
        {size_class(k * 12) for k in range(1, 129)}
    assert largest <= 8 * sum(classes), (largest, 8 * sum(classes))
    assert sum(allocations) <= 2 * 8 * sum(classes), (sum(allocations), 8 * sum(classes))


def test_threads_calling_one_function_with_different_sizes(module):
    """Eight threads at once, each with sizes of its own (more sizes in all than the function
    keeps, so recordings are dropped while other threads call): every answer is its own."""
    problems, start = [], threading.Barrier(8)

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        start.wait()
        try:
            for _ in range(40):
                n = int(rng.integers(0, 40)) * 8 + seed
                x = rng.standard_normal(n).astype(np.float32)
                name = "staged" if rng.integers(2) else "scale"
                result = module[name](x)
                if result.shape != (n,) or not np.array_equal(result.to_host(), x * SCALE32):
                    problems.append(f"thread {seed}: {name} at n = {n} is wrong")
        except Exception as e:  # reported below, with the others
            problems.append(f"thread {seed}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert problems == []
