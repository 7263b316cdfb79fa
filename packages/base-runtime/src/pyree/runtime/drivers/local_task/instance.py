"""The ``local-task`` driver: one device, the host CPU, with the worker threads topology.py
counts. (Not named driver.py: importing such a submodule would replace the package's ``driver``
entry point function with the module.)"""

from __future__ import annotations

from pyree.runtime.drivers.local_task.device import LocalTaskDevice
from pyree.runtime.drivers.local_task.topology import topology
from pyree.runtime.hal.python_driver import DeviceInfo, HalError, PythonDriver


class LocalTaskDriver(PythonDriver):
    name = "local-task"

    def enumerate_devices(self) -> list[DeviceInfo]:
        threads = topology()
        plural = "s" if threads.threads != 1 else ""
        return [DeviceInfo("", f"host CPU, {threads.threads} worker thread{plural} "
                               f"({threads.reason})")]

    def create_device(self, path: str) -> LocalTaskDevice:
        if path not in ("", "0"):
            raise HalError("NOT_FOUND", f"local-task has one device ('local-task'), not '{path}'")
        return LocalTaskDevice()
