"""Timeline semaphores through the ABI: waits, timeouts, failures reaching waiters."""

from __future__ import annotations

import threading
import time

import pyree.runtime as rt
import pytest
from pyree.runtime.hal.ffi import DEADLINE_EXCEEDED


@pytest.fixture(params=["local-sync", "local-task"])
def device(request):
    return rt.get_device(request.param)


def test_wait_returns_once_signalled_from_another_thread(device):
    semaphore = device.create_semaphore(3)
    assert semaphore.query() == 3
    timer = threading.Timer(0.05, semaphore.signal, args=(5,))
    timer.start()
    semaphore.wait(5, timeout_s=5)
    timer.join()
    assert semaphore.query() == 5
    semaphore.wait(4, timeout_s=0)  # already reached


def test_wait_times_out(device):
    semaphore = device.create_semaphore(0)
    started = time.monotonic()
    with pytest.raises(rt.DriverError, match="DEADLINE_EXCEEDED: semaphore did not reach 1 "
                                             "within 0.05 s") as error:
        semaphore.wait(1, timeout_s=0.05)
    assert error.value.status == DEADLINE_EXCEEDED
    assert 0.04 < time.monotonic() - started < 2


def test_values_must_increase(device):
    semaphore = device.create_semaphore(2)
    with pytest.raises(rt.DriverError, match="signalled to 2 but it is already at 2"):
        semaphore.signal(2)


def test_failed_submission_fails_its_waiters(arith_bytes):
    module = rt.load_module(arith_bytes, device="local-task")
    result = module.fail()
    semaphore, value = result.ready
    with pytest.raises(rt.DriverError, match="always_fails"):
        semaphore.wait(value, timeout_s=5)


def test_submission_waits_for_its_wait_list(arith_bytes, rng):
    """A local-task submission gated on a host semaphore runs only once it is signalled."""
    import numpy as np

    from .module_factory import COLS, ROWS

    module = rt.load_module(arith_bytes, device="local-task")
    device = module.device
    gate = device.create_semaphore(0)
    function = module.add
    a, b = (rng.standard_normal((ROWS, COLS)).astype(np.float32) for _ in range(2))
    args = [device.allocate(a.nbytes), device.allocate(b.nbytes)]
    args[0].write(0, a)
    args[1].write(0, b)
    out = device.allocate(a.nbytes)
    done = device.create_semaphore(0)
    table = [{"argument": args, "result": [out]}[kind][index]
             for kind, index in function._program.sources]
    device.queue_submit(function._program.steps[0], table, [(gate, 1)], [(done, 1)])
    with pytest.raises(rt.DriverError, match="DEADLINE_EXCEEDED"):
        done.wait(1, timeout_s=0.05)
    gate.signal(1)
    done.wait(1, timeout_s=5)
    np.testing.assert_array_equal(np.frombuffer(out.read(0, a.nbytes), np.float32).reshape(a.shape),
                                  a + b)
