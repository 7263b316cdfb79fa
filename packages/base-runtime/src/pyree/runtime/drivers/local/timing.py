"""Timed submissions of the local devices (hal.h revision 4): each command's times on the host's
monotonic clock."""

from __future__ import annotations

from pyree.runtime.hal.python_driver import TimelineSemaphore


class HostTiming:
    """One timed submission (hal.h revision 4): its commands' host clock times, and a semaphore
    of its own that the submission signals, or fails, with its others: read_timing waits on it.
    ``execute`` is what the submission runs in place of HostDevice.execute: the device's
    ``execute_timed``, whose times it keeps."""

    def __init__(self, execute_timed):
        self._execute_timed, self.times, self.done = execute_timed, [], TimelineSemaphore(0)

    def execute(self, command_buffer, table: list) -> None:
        self.times = self._execute_timed(command_buffer, table)
