"""Records what a call hands a device to read in place (DLPack and large host arrays), for the
DLPack tests of every driver: the runtime's one ``Device.import_device`` is wrapped."""

from __future__ import annotations

from pyree.runtime.hal.device import Device


def record_imports(monkeypatch) -> list[tuple[int, int]]:
    """The (address, size) of every import from now on, in call order."""
    seen: list[tuple[int, int]] = []
    original = Device.import_device

    def spy(self, address, size, owner):
        seen.append((address, size))
        return original(self, address, size, owner)

    monkeypatch.setattr(Device, "import_device", spy)
    return seen
