"""Driver discovery: ABI checks, unavailable drivers with reasons, URIs, the Python driver SDK."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.runtime.drivers.local_sync.device import LocalSyncDevice
from pyree.runtime.hal import registry
from pyree.runtime.hal.ffi import ABI_VERSION, STATUS, ffi
from pyree.runtime.hal.python_driver import (
    DeviceInfo,
    HalError,
    PythonDevice,
    PythonDriver,
    export_driver,
)

from .module_factory import COLS, ROWS


class _EntryPoint:
    def __init__(self, name: str, factory):
        self.name = name
        self._factory = factory

    def load(self):
        return self._factory


class _Unavailable(PythonDriver):
    name = "nogpu"

    def query_available(self) -> None:
        raise HalError("UNAVAILABLE", "no GPU found (libcuda.so.1 is not installed)")


class _Buggy(PythonDevice):
    executable_format = "cpu"

    def allocate(self, size: int):
        raise ZeroDivisionError("boom")

    def write_buffer(self, buffer, offset, source):
        raise HalError("OUT_OF_RANGE", f"write of {len(source)} bytes at {offset} is too long")


class _BuggyDriver(PythonDriver):
    name = "buggy"

    def enumerate_devices(self):
        return [DeviceInfo("7", "the buggy device")]

    def create_device(self, path: str):
        if path != "7":
            raise HalError("NOT_FOUND", f"no device '{path}'")
        return _Buggy()


_KEEP = []


def _struct_with(abi_version: int, struct_size: int, name: str) -> int:
    vt = ffi.new("pyree_hal_driver_v1_t *")
    label = ffi.new("char[]", name.encode())
    vt.abi_version, vt.struct_size, vt.name = abi_version, struct_size, label
    _KEEP.extend([vt, label])
    return int(ffi.cast("uintptr_t", vt))


def _raise_import_error():
    raise ImportError("No module named 'cuda'")


@pytest.fixture
def fake_entry_points(monkeypatch):
    size = ffi.sizeof("pyree_hal_driver_v1_t")
    points = [
        _EntryPoint("future", lambda: _struct_with(ABI_VERSION + 1, size, "future")),
        _EntryPoint("resized", lambda: _struct_with(ABI_VERSION, size + 8, "resized")),
        _EntryPoint("broken", _raise_import_error),
        _EntryPoint("nogpu", lambda: export_driver(_Unavailable())),
        _EntryPoint("buggy", lambda: export_driver(_BuggyDriver())),
        *registry._entry_points(),
    ]
    monkeypatch.setattr(registry, "_entry_points", lambda prefix="": points)
    registry.reset()
    yield
    registry.reset()


def test_local_drivers_are_installed():
    drivers = {d.name: d for d in rt.list_drivers()}
    assert drivers["local-sync"].available and drivers["local-task"].available
    assert {d.uri for d in rt.list_devices()} >= {"local-sync://", "local-task://"}


def test_broken_drivers_are_listed_with_reasons(fake_entry_points):
    drivers = {d.name: d for d in rt.list_drivers()}
    assert not drivers["future"].available
    assert f"built for HAL ABI version {ABI_VERSION + 1}" in drivers["future"].reason
    assert "install a matching driver" in drivers["future"].reason
    assert not drivers["resized"].available and "bytes)" in drivers["resized"].reason
    assert drivers["broken"].reason == "ImportError: No module named 'cuda'"
    assert "no GPU found (libcuda.so.1 is not installed)" in drivers["nogpu"].reason
    assert drivers["local-task"].available and drivers["buggy"].available


def test_unavailable_driver_cannot_open_a_device(fake_entry_points, arith_bytes):
    with pytest.raises(rt.DriverError, match="driver 'nogpu' is unavailable: .*no GPU found"):
        rt.load_module(arith_bytes, device="nogpu")


def test_unknown_driver_lists_installed_ones():
    with pytest.raises(rt.DriverError, match="no HAL driver named 'metal' is installed; "
                                             "installed drivers: .*local-sync.*local-task"):
        rt.get_device("metal://0")


def test_uri_paths_reach_the_driver(fake_entry_points):
    assert [d.uri for d in rt.list_devices("buggy")] == ["buggy://7"]
    assert rt.get_device("buggy://7").uri == "buggy://7"
    with pytest.raises(rt.DriverError, match="create device 'buggy://3': NOT_FOUND: no device '3'"):
        rt.get_device("buggy://3")
    with pytest.raises(rt.DriverError, match="NOT_FOUND: local-task has one device"):
        rt.get_device("local-task://5")
    assert rt.get_device("local-task") is rt.get_device("local-task://")


def test_sdk_turns_exceptions_into_statuses(fake_entry_points):
    device = rt.get_device("buggy://7")
    with pytest.raises(rt.DriverError) as error:
        device.allocate(16)
    assert error.value.status == STATUS["INTERNAL"]
    assert "internal error in driver: ZeroDivisionError: boom" in str(error.value)
    with pytest.raises(rt.DriverError, match="UNIMPLEMENTED: create_command_buffer"):
        device.create_command_buffer(ffi.NULL, 0, 0)


def test_sdk_rejects_foreign_handles():
    device = rt.get_device("local-sync")
    semaphore = device.create_semaphore(0)
    buffer = device.allocate(8)
    with pytest.raises(rt.DriverError, match="INVALID_ARGUMENT: handle .* is not a live semaphore"):
        device._check(device._vt.semaphore_signal(device._vt.self, buffer.handle, 1), "signal")
    semaphore.signal(1)
    assert semaphore.query() == 1


def test_every_installed_entry_point_stays_callable_after_its_package_is_imported():
    """A driver package whose submodule shares the entry point's name (``driver``) would replace
    the function with that module once imported, and later lookups would fail."""
    import importlib
    import pkgutil
    from importlib.metadata import entry_points

    for entry in entry_points(group="pyree.runtime.drivers"):
        package = importlib.import_module(entry.module)
        for info in pkgutil.iter_modules(getattr(package, "__path__", [])):
            importlib.import_module(f"{entry.module}.{info.name}")
        assert callable(entry.load()), f"entry point {entry.name} = {entry.value} is no longer callable"


def test_a_driver_asked_for_by_name_is_found_among_pyrees_own_packages_first(tmp_path):
    """pyree's own packages win a driver name, so asking for 'vulkan' reads pyree-hal-*
    metadata only: an earlier distribution of another name that claims 'vulkan' loses, by name
    and in the listing."""
    other = tmp_path / "aaa_other-1.0.dist-info"
    other.mkdir()
    (other / "entry_points.txt").write_text(
        f"[{registry.ENTRY_POINT_GROUP}]\nvulkan = aaa_no_such_module:driver\n")
    # (without libvulkan1 pyree's driver is found and says it is unavailable; the other name's
    # entry point would fail to import aaa_no_such_module)
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "from pyree.runtime.hal import registry\n"
            "try:\n"
            "    print(registry.get_driver('vulkan') is not None)\n"
            "except Exception as e:\n"
            "    print('unavailable' in str(e) and 'aaa_no_such_module' not in str(e))\n"
            "print(sorted(registry._installed()['vulkan'].value.split(':')[:1]))")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "['pyree.hal.vulkan']"], proc.stdout


class _SlowDriver(PythonDriver):
    """A GPU-like driver: create_device waits, as a context's creation does, for up to 5 s for
    the module to have been opened beside it."""

    name = "slowgpu"

    def __init__(self, events: list, opened: threading.Event):
        self.events, self.opened = events, opened

    def create_device(self, path: str):
        self.events.append(("create_device sees the module opened", self.opened.wait(5)))
        return LocalSyncDevice()


def test_load_module_opens_the_file_after_the_driver_import_and_beside_its_start(
        fake_entry_points, monkeypatch, arith_bytes, rng):
    """The device thread's Python runs alone until its driver is imported (hal/device_start.py);
    the module is then opened while the driver starts its device, not after it."""
    from pyree.runtime.vm import loaded_module

    events, opened = [], threading.Event()

    def entry_point():
        time.sleep(0.05)  # a driver's import takes its time
        events.append("driver imported")
        return export_driver(_SlowDriver(events, opened))

    def open_module(source, _open=loaded_module.open_module):
        events.append("module opened")
        opened.set()
        return _open(source)

    monkeypatch.setattr(registry, "_entry_points",
                        lambda prefix="": [_EntryPoint("slowgpu", entry_point)])
    monkeypatch.setattr(loaded_module, "open_module", open_module)
    registry.reset()
    module = rt.load_module(arith_bytes, device="slowgpu")
    assert events == ["driver imported", "module opened",
                      ("create_device sees the module opened", True)]
    assert module.device.uri == "slowgpu"
    a, b = (rng.standard_normal((ROWS, COLS)).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(module.add(a, b).to_host(), a + b)
