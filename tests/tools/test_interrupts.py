"""Ctrl-C in the runtime's tools: exit 130 with "error: interrupted" alone, also when it lands
while a Python driver's callback runs (cffi cannot unwind it through C: the tools printed a
traceback and failed the call as "submit: INTERNAL: (no message)")."""

from __future__ import annotations

import gc
import subprocess
import sys

import numpy as np
import pyree.runtime as rt
import pytest
from interrupting import assert_benchmark_interrupted, interrupt_benchmark
from pyree.runtime.drivers.local_sync.device import LocalSyncDevice
from pyree.runtime.hal import registry
from pyree.runtime.hal.python_driver import DeviceInfo, PythonDriver, export_driver


@pytest.mark.parametrize("device", ["local-task", "local-sync"])
def test_benchmark_module(device, tools_module):
    """Most of a call's time is inside the driver's callbacks (tests/drivers/vulkan and
    tests/drivers/cuda run this on their devices)."""
    assert_benchmark_interrupted(interrupt_benchmark(tools_module, device, "twice",
                                                     "37x53xf32=3"))


# A tool whose Ctrl-C lands in a finalizer (a result's __del__), where Python reports it as
# unraisable and carries on: the loop would run until the test's timeout if it were lost.
LOST_IN_A_FINALIZER = """
from pyree.runtime.tools.cli import tool_main

class Result:
    def __del__(self):
        raise KeyboardInterrupt

def body(argv):
    Result()
    while True:
        pass

tool_main(body, None)
"""


def test_ctrl_c_in_a_finalizer_still_ends_the_tool():
    proc = subprocess.run([sys.executable, "-c", LOST_IN_A_FINALIZER], capture_output=True,
                          text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (130, "error: interrupted\n")


class _InterruptedOnce(LocalSyncDevice):
    """local-sync, whose next submit is interrupted: Ctrl-C while the driver runs."""

    interrupt = True

    def queue_submit(self, command_buffer, binding_table, waits, signals):
        if self.interrupt:
            self.interrupt = False
            raise KeyboardInterrupt
        super().queue_submit(command_buffer, binding_table, waits, signals)


class _Driver(PythonDriver):
    name = "interrupted"

    def enumerate_devices(self):
        return [DeviceInfo("", self.name)]

    def create_device(self, path: str):
        return _InterruptedOnce()


class _EntryPoint:
    name = _Driver.name

    def load(self):
        return lambda: export_driver(_Driver())


@pytest.fixture
def interrupted_driver(monkeypatch):
    monkeypatch.setattr(registry, "_entry_points", lambda prefix="": [_EntryPoint()])
    registry.reset()
    yield _Driver.name
    registry.reset()


def test_ctrl_c_in_a_driver_callback_is_raised_again_in_the_caller(tools_module,
                                                                   interrupted_driver):
    add = rt.load_module(tools_module, device=interrupted_driver)["add"]
    a, b = (np.random.default_rng(i).standard_normal((37, 53)).astype(np.float32)
            for i in range(2))
    with pytest.raises(KeyboardInterrupt):
        add(a, b)
    np.testing.assert_array_equal(add(a, b).to_host(), a + b)  # and the device works on
    del add  # (the interrupt's traceback holds it in a cycle: freed before the driver goes)
    gc.collect()
