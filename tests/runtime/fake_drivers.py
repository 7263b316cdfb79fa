"""Test drivers installed in place of the registry's entry points: local-sync variants under names
of their own, to see what the runtime does with a driver that lacks an entry point or counts
its crossings."""

from __future__ import annotations

from pyree.runtime.hal import registry
from pyree.runtime.hal.python_driver import DeviceInfo, PythonDriver, export_driver


class FakeDriver(PythonDriver):
    """Driver ``name`` whose devices are ``device_type()``; ``devices``: those made so far."""

    def __init__(self, name: str, device_type):
        self.name, self._device_type, self.devices = name, device_type, []

    def enumerate_devices(self):
        return [DeviceInfo("", self.name)]

    def create_device(self, path: str):
        self.devices.append(self._device_type())
        return self.devices[-1]


class _EntryPoint:
    def __init__(self, driver):
        self.name, self._driver = driver.name, driver

    def load(self):
        return lambda: export_driver(self._driver)


def install(monkeypatch, device_types: dict) -> dict[str, FakeDriver]:
    """Makes ``{name: device type}`` the only drivers the registry finds (undo: registry.reset()
    after monkeypatch's undo)."""
    found = {name: FakeDriver(name, kind) for name, kind in device_types.items()}
    entries = [_EntryPoint(d) for d in found.values()]
    monkeypatch.setattr(registry, "_entry_points", lambda prefix="": entries)
    registry.reset()
    return found
