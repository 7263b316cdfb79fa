"""local-sync and local-task against numpy (float64) on fresh random 37x53 inputs."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.runtime.drivers.local_task.topology import topology
from runtime.module_factory import COLS, ROWS, SCALE

DEVICES = ["local-sync", "local-task"]


def _random(rng) -> np.ndarray:
    return rng.standard_normal((ROWS, COLS)).astype(np.float32)


@pytest.fixture(params=DEVICES)
def module(request, arith_bytes):
    return rt.load_module(arith_bytes, device=request.param)


def test_add(module, rng):
    a, b = _random(rng), _random(rng)
    out = module["add"](a, b)
    assert isinstance(out, rt.DeviceArray) and out.shape == (ROWS, COLS) and out.dtype == np.float32
    np.testing.assert_allclose(out.to_host(), a.astype(np.float64) + b, rtol=1e-6, atol=1e-6)


def test_transient_constant_and_push_constant(module, rng, offset_constant):
    a, b = _random(rng), _random(rng)
    expected = (a.astype(np.float64) + b + offset_constant) * SCALE
    np.testing.assert_allclose(np.asarray(module.add_scaled(a, b)), expected, rtol=1e-5, atol=1e-5)


def test_fill_and_copy(module, offset_constant):
    filled, copied = module.fill_copy()
    np.testing.assert_array_equal(filled.to_host(), np.full(4, 0x01020304, np.int32))
    np.testing.assert_array_equal(copied.to_host(), offset_constant)


def test_results_chain_on_the_device(module, rng):
    a, b, c = _random(rng), _random(rng), _random(rng)
    total = module.add(module.add(a, b), c)
    np.testing.assert_allclose(total.to_host(), a.astype(np.float64) + b + c, rtol=1e-5, atol=1e-5)


def test_both_drivers_agree_exactly(arith_bytes, rng):
    a, b = _random(rng), _random(rng)
    answers = [rt.load_module(arith_bytes, device=d).add_scaled(a, b).to_host() for d in DEVICES]
    np.testing.assert_array_equal(answers[0], answers[1])


def test_failing_kernel_is_named(module):
    with pytest.raises(rt.DriverError, match="kernel 'always_fails' returned error status 7"):
        module.fail().to_host()
    assert module.add is module["add"]  # the module stays usable after a failed call


def test_failed_dispatch_before_a_host_step_fails_every_call_and_hangs_none(module, rng):
    """A host step (a check, a branch) after a failing dispatch waits for it: the wait's failure
    used to take the function's lock a second time, hanging that call and every later one."""
    for _ in range(3):
        with pytest.raises(rt.DriverError, match="kernel 'always_fails' returned error status 7"):
            module.fail_checked()
    a, b = _random(rng), _random(rng)
    np.testing.assert_allclose(module.add(a, b).to_host(), a.astype(np.float64) + b, rtol=1e-6)


def test_many_concurrent_calls_on_local_task(arith_bytes, rng):
    module = rt.load_module(arith_bytes, device="local-task")
    inputs = [(_random(rng), _random(rng)) for _ in range(8)]
    pending = [module.add(a, b) for a, b in inputs]  # submitted before any is read
    for (a, b), out in zip(inputs, pending):
        np.testing.assert_allclose(out.to_host(), a.astype(np.float64) + b, rtol=1e-6, atol=1e-6)


def test_missing_cpu_feature_is_named(kernel_library, offset_constant):
    from runtime.module_factory import arith_builder

    data = arith_builder(kernel_library, offset_constant, features=["sse2", "pyree_imaginary"])
    with pytest.raises(rt.ModuleError, match="needs CPU features this host lacks: pyree_imaginary"):
        rt.load_module(data.finish(), device="local-sync")


def test_garbage_library_is_refused(offset_constant):
    from runtime.module_factory import arith_builder

    data = arith_builder(b"\x7fELF not really a library", offset_constant).finish()
    with pytest.raises(rt.ModuleError, match=r"executable 0 \('kernels'\) library: it is not an "
                                             r"ELF image \(25 bytes, no ELF magic\)"):
        rt.load_module(data, device="local-task")


def test_local_task_splits_workgroups_over_its_threads():
    from pyree.runtime.drivers.local.executable import Kernel
    from pyree.runtime.drivers.local_task.device import LocalTaskDevice

    device = LocalTaskDevice()
    ranges = []
    kernel = Kernel("spy", lambda state, begin, end: ranges.append((begin, end)) or 0, 1001, ())
    assert device.run_workgroups(kernel, None) == 0
    device.release()
    ranges.sort()
    assert ranges[0][0] == 0 and ranges[-1][1] == 1001
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    assert len(ranges) == min(topology().threads, 1001)


def test_local_task_workers_wake_after_sleeping_and_report_errors():
    """A worker polls for SPIN_S after its range, then sleeps: a dispatch after a longer pause
    still runs its ranges on the worker threads, a worker's exception reaches the caller, and
    the next dispatch runs normally."""
    import threading
    import time

    from pyree.runtime.drivers.local.executable import Kernel
    from pyree.runtime.drivers.local_task.device import LocalTaskDevice
    from pyree.runtime.drivers.local_task.workers import SPIN_S

    device = LocalTaskDevice()
    seen = []

    def spy(state, begin, end):
        seen.append((begin, end, threading.current_thread().name))
        if state == "fail" and begin == 0:
            raise ValueError("range 0 failed")
        return 0

    kernel = Kernel("spy", spy, 64, ())
    try:
        for pause in (0.0, 3 * SPIN_S, 3 * SPIN_S):
            time.sleep(pause)
            seen.clear()
            assert device.run_workgroups(kernel, None) == 0
            assert sorted(r[:2] for r in seen)[0] == (0, 64 // topology().threads)
            assert len({name for *_, name in seen}) == min(topology().threads, 64)
        time.sleep(3 * SPIN_S)
        with pytest.raises(ValueError, match="range 0 failed"):
            device.run_workgroups(kernel, "fail")
        assert device.run_workgroups(kernel, None) == 0
    finally:
        device.release()


def test_library_loads_without_memfd(monkeypatch, arith_bytes, rng):
    def no_memfd(*args):
        raise OSError("memfd_create is not available")

    monkeypatch.setattr(os, "memfd_create", no_memfd)
    module = rt.load_module(arith_bytes, device="local-sync")
    a, b = _random(rng), _random(rng)
    np.testing.assert_array_equal(module.add(a, b).to_host(), a + b)
