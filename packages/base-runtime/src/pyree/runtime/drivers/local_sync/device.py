"""The local-sync device: every submission runs inline on the submitting thread, each dispatch's
workgroups in one call."""

from __future__ import annotations

from pyree.runtime.drivers.local.device import HostDevice
from pyree.runtime.hal.python_driver import HalError


class LocalSyncDevice(HostDevice):
    def run_workgroups(self, kernel, state, count: int | None = None) -> int:
        return kernel.fn(state, 0, kernel.workgroup_count if count is None else count)

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
