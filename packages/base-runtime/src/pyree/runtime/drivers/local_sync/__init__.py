"""local-sync: runs every submission inline on the calling thread, one workgroup range per call.

The simplest correct executor, and the reference local-task is compared against.
"""

from __future__ import annotations

from pyree.runtime.drivers.host_device import HostDevice
from pyree.runtime.hal.python_driver import (
    DeviceInfo,
    HalError,
    PythonDriver,
    export_driver,
)


class LocalSyncDevice(HostDevice):
    def run_workgroups(self, kernel, state) -> int:
        return kernel.fn(state, 0, kernel.workgroup_count)

    def queue_submit(self, command_buffer, binding_table, waits, signals, execute=None) -> None:
        try:
            for semaphore, value in waits:
                semaphore.wait(value)
            (execute or self.execute)(command_buffer, binding_table)
        except HalError as error:
            for semaphore, _ in signals:
                semaphore.fail(error)
            raise
        for semaphore, value in signals:
            semaphore.signal(value)


class LocalSyncDriver(PythonDriver):
    name = "local-sync"

    def enumerate_devices(self) -> list[DeviceInfo]:
        return [DeviceInfo("", "host CPU, inline execution")]

    def create_device(self, path: str) -> LocalSyncDevice:
        if path not in ("", "0"):
            raise HalError("NOT_FOUND", f"local-sync has one device ('local-sync'), not '{path}'")
        return LocalSyncDevice()


_address: int | None = None


def driver() -> int:
    """Entry point of "pyree.runtime.drivers": the address of this driver's ABI struct."""
    global _address
    if _address is None:
        _address = export_driver(LocalSyncDriver())
    return _address
