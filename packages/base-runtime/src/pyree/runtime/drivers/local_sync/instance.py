"""The ``local-sync`` driver: one device, the host CPU. (Not named driver.py: importing such a
submodule would replace the package's ``driver`` entry point function with the module.)"""

from __future__ import annotations

from pyree.runtime.drivers.local_sync.device import LocalSyncDevice
from pyree.runtime.hal.python_driver import DeviceInfo, HalError, PythonDriver


class LocalSyncDriver(PythonDriver):
    name = "local-sync"

    def enumerate_devices(self) -> list[DeviceInfo]:
        return [DeviceInfo("", "host CPU, inline execution")]

    def create_device(self, path: str) -> LocalSyncDevice:
        if path not in ("", "0"):
            raise HalError("NOT_FOUND", f"local-sync has one device ('local-sync'), not '{path}'")
        return LocalSyncDevice()
