"""Per-dispatch workgroup counts (hal.h revision 5): a command's own count is what the CPU
drivers run; a driver built before the revision still gets commands in its own layout (and runs
static modules as before) but is refused a dispatch that needs a count of its own; a driver
whose commands have another size is refused by name."""

from __future__ import annotations

import struct

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.runtime.drivers.local_sync.device import LocalSyncDevice
from pyree.runtime.hal import python_driver, registry
from pyree.runtime.hal.ffi import ffi

from .fake_drivers import install
from .module_factory import COLS, ROWS, SCALE, WORKGROUP

N = 1000


def _scale_n(device, executable: int, workgroups) -> object:
    """A recorded dispatch of scale_n over N elements, slots 0 (in) and 1 (out), with its own
    ``workgroups`` (x, y, z)."""
    bindings = ffi.new("pyree_hal_binding_t[]", [{"slot": s, "offset": 0, "length": N * 4}
                                                  for s in (0, 1)])
    push = ffi.new("uint32_t[]", [N, struct.unpack("<I", struct.pack("<f", SCALE))[0]])
    array, (command,) = device.command_array(1)
    command.kind, command.executable, command.export_ordinal = 0, executable, 0
    command.binding_count, command.bindings = 2, bindings
    command.push_constant_count, command.push_constants = 2, push
    command.workgroup_count = workgroups
    return device.create_command_buffer(array, 1, 2)


@pytest.mark.parametrize("device_uri", ["local-sync", "local-task"])
def test_cpu_drivers_run_the_commands_own_workgroups(sized_bytes, device_uri, rng):
    """3 workgroups of 64 elements: the first 192 of the 1000 are scaled, the rest untouched."""
    module = rt.load_module(sized_bytes, device=device_uri)
    device = module.device
    x = rng.standard_normal(N).astype(np.float32)
    source, target = device.allocate(N * 4), device.allocate(N * 4)
    source.write(0, x)
    target.write(0, np.full(N, -7.0, np.float32))
    done = device.create_semaphore(0)
    device.queue_submit(_scale_n(device, module.executable.handle, [3, 1, 1]), [source, target],
                        [], [(done, 1)])
    done.wait(1, timeout_s=10)
    out = np.frombuffer(target.read(0, N * 4), np.float32)
    covered = 3 * WORKGROUP
    np.testing.assert_array_equal(out[:covered], x[:covered] * np.float32(SCALE))
    np.testing.assert_array_equal(out[covered:], np.full(N - covered, -7.0, np.float32))


def test_a_cpu_dispatch_is_linear(sized_bytes):
    module = rt.load_module(sized_bytes, device="local-sync")
    with pytest.raises(rt.DriverError, match=r"command 0 \(dispatch\): workgroup count \(2, 2, "
                                             r"1\) is not linear"):
        _scale_n(module.device, module.executable.handle, [2, 2, 1])


@pytest.fixture
def drivers(monkeypatch):
    yield install(monkeypatch, {"revision4": LocalSyncDevice})
    registry.reset()


def _built_with(monkeypatch, struct_size=None, command_size=None):
    make_struct = python_driver._device_struct

    def older(device):
        vt = make_struct(device)
        if struct_size is not None:
            vt.struct_size = struct_size
        if command_size is not None:
            vt.command_size = command_size
        return vt

    monkeypatch.setattr(python_driver, "_device_struct", older)


def test_a_driver_before_revision_5_runs_static_modules(drivers, monkeypatch, arith_bytes,
                                                        sized_bytes, offset_constant, rng):
    """Its commands are revision 4's (64 bytes, no workgroup count): static dispatches, copies
    and fills run as before; a copy of run-time size too; a dispatch with a count of its own is
    refused, naming the revision."""
    _built_with(monkeypatch, struct_size=ffi.offsetof("pyree_hal_device_v1_t", "command_size"))
    module = rt.load_module(arith_bytes, device="revision4")
    assert not module.device.workgroup_counts
    a, b = (rng.standard_normal((ROWS, COLS)).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(module.add(a, b).to_host(), a + b)
    np.testing.assert_allclose(module.add_scaled(a, b).to_host(),
                               (a + b + offset_constant) * np.float32(SCALE), rtol=1e-6)
    sized = rt.load_module(sized_bytes, device="revision4")
    np.testing.assert_array_equal(sized.copy(a[0]).to_host(), a[0])
    with pytest.raises(rt.DriverError, match=r"device 'revision4': its driver predates HAL ABI "
                                             r"revision 5, so it cannot run a dispatch whose "
                                             r"workgroup count is computed per call") as error:
        sized.scale(a[0])
    assert error.value.status_name == "UNIMPLEMENTED"


def test_a_driver_with_commands_of_another_size_is_refused(drivers, monkeypatch):
    _built_with(monkeypatch, command_size=ffi.sizeof("pyree_hal_command_t") + 8)
    with pytest.raises(rt.DriverError, match=r"device 'revision4' reads commands of \d+ bytes; "
                                             r"this runtime writes \d+ \(HAL ABI revision 5\)"):
        rt.get_device("revision4")
