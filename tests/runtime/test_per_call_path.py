"""The per-call host path's shortcuts (issue 11) against numpy: results dropped unwaited reused by
the function's next call, the host drivers' per-table plans, the SDK's decoded-submit cache, the
argument type check by identity, host semaphores that notify only sleepers."""

from __future__ import annotations

import threading

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.runtime.hal.device import Semaphore
from pyree.runtime.hal.ffi import ffi
from pyree.runtime.hal.timeline import TimelineSemaphore

from .module_factory import COLS, ROWS

DEVICES = ["local-sync", "local-task"]


def _random(rng) -> np.ndarray:
    values = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    values.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]  # special values ride along
    return values


@pytest.fixture(params=DEVICES)
def module(request, arith_bytes):
    return rt.load_module(arith_bytes, device=request.param)


def test_queued_calls_reuse_their_results_without_asking_the_driver(module, rng, monkeypatch):
    """Calls queued back to back, each result dropped as the next is made, rotate through two
    result buffers (two binding tables for the driver) and never query a semaphore."""
    a, b = (rt.asdevicearray(module.device, _random(rng)) for _ in range(2))
    for _ in range(3):
        result = module.add(a, b)
    queries = []
    original = Semaphore.query
    monkeypatch.setattr(Semaphore, "query", lambda self: queries.append(self) or original(self))
    buffers = set()
    for _ in range(40):
        result = module.add(a, b)
        buffers.add(id(result.buffer))
    np.testing.assert_array_equal(result.to_host(), a.to_host() + b.to_host())
    assert len(buffers) == 2 and not queries


def test_reused_results_never_clobber_kept_ones_or_inputs(module, rng):
    """A chain r = add(r, b) queued without waits (each result an input of the next call, then
    dropped), with every fifth result kept: each kept value is exact."""
    start, step = _random(rng), rng.standard_normal((ROWS, COLS)).astype(np.float32)
    b = rt.asdevicearray(module.device, step)
    r = module.add(start, b)
    kept = []
    for i in range(1, 30):
        r = module.add(r, b)
        if i % 5 == 0:
            kept.append((i, r))
    expected = start + step
    for i in range(1, 30):
        expected = expected + step
        if kept and kept[0][0] == i:
            np.testing.assert_array_equal(kept.pop(0)[1].to_host(), expected)
    np.testing.assert_array_equal(r.to_host(), expected)


def test_results_dropped_by_many_calls_at_once_are_correct_afterwards(module, rng):
    """More dropped results than the function keeps: the rest go to the pool; later calls (on
    fresh host inputs) still get exact answers."""
    a, b = _random(rng), _random(rng)
    results = [module.add(a, b) for _ in range(12)]
    del results
    for _ in range(5):
        a, b = _random(rng), _random(rng)
        np.testing.assert_array_equal(module.add(a, b).to_host(), a + b)


def test_many_binding_tables_and_released_buffers(module, rng):
    """More live tables than a command buffer keeps plans for, and inputs released and made
    anew between calls (new buffers, perhaps at the old addresses): every answer is exact."""
    pairs = [(_random(rng), _random(rng)) for _ in range(11)]
    on_device = [tuple(rt.asdevicearray(module.device, x) for x in p) for p in pairs]
    for _ in range(3):
        for (a, b), (da, db) in zip(pairs, on_device):
            np.testing.assert_array_equal(module.add(da, db).to_host(), a + b)
    for _ in range(10):
        a, b = _random(rng), _random(rng)
        da, db = rt.asdevicearray(module.device, a), rt.asdevicearray(module.device, b)
        np.testing.assert_array_equal(module.add(da, db).to_host(), a + b)
        del da, db


def test_argument_types_are_still_checked_after_a_matching_call(module, rng):
    a = rt.asdevicearray(module.device, _random(rng))
    module.add(a, a).wait()
    wrong = rt.asdevicearray(module.device, np.zeros((ROWS, COLS + 1), np.float32))
    with pytest.raises(rt.InvocationError, match=r"argument 1: expected 37x53xf32, got 37x54xf32"):
        module.add(a, wrong)
    ints = rt.asdevicearray(module.device, np.zeros((ROWS, COLS), np.int32))
    with pytest.raises(rt.InvocationError, match=r"argument 0: expected 37x53xf32, got 37x53xi32"):
        module.add(ints, a)


def test_a_released_buffer_handle_is_refused_after_the_same_table_ran(arith_bytes, rng):
    """The SDK keeps decoded binding tables; releasing a buffer drops them, so its stale handle
    is refused as before, not found in a cache."""
    module = rt.load_module(arith_bytes, device="local-sync")
    device = module.device
    step = module.add._program.steps[0]
    buffers = [device.allocate(ROWS * COLS * 4) for _ in range(3)]
    handles = ffi.new("pyree_handle_t[]", [b.handle for b in buffers])
    assert device._submit(device._self, step.handle, 3, handles, ffi.NULL, ffi.NULL) == 0
    buffers[0].release()
    status = device._submit(device._self, step.handle, 3, handles, ffi.NULL, ffi.NULL)
    with pytest.raises(rt.DriverError, match=f"handle {handles[0]} is not a live buffer"):
        device._check(status, "submit")


def test_host_semaphore_wakes_every_sleeping_waiter():
    semaphore = TimelineSemaphore(0)
    woken = []
    waiters = [threading.Thread(target=lambda: (semaphore.wait(2), woken.append(1)))
               for _ in range(3)]
    for thread in waiters:
        thread.start()
    semaphore.signal(1)
    assert not woken
    semaphore.signal(2)
    for thread in waiters:
        thread.join(5)
    assert len(woken) == 3 and semaphore.query() == 2
