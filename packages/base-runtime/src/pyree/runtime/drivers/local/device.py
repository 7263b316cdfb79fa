"""HostDevice: the device that local-sync and local-task both are, running its command buffers
itself; each driver subclasses it with its scheduling (``queue_submit``, ``run_workgroups``)."""

from __future__ import annotations

import time

from pyree.runtime.drivers.local.allocator import HostBuffer
from pyree.runtime.drivers.local.command_buffer import DispatchRun, HostCommandBuffer, transfer
from pyree.runtime.drivers.local.executable import CpuLibrary, Kernel
from pyree.runtime.drivers.local.timing import HostTiming
from pyree.runtime.hal.ffi import ffi
from pyree.runtime.hal.python_driver import (
    Command,
    ExecutableParams,
    HalError,
    PythonDevice,
)


class HostDevice(PythonDevice):
    """A device whose memory is host memory and whose executables are CPU shared objects.
    Subclasses schedule submissions: ``queue_submit(command_buffer, table, waits, signals,
    execute=None)`` runs ``execute`` (None: ``self.execute``) on the command buffer and table
    once the waits are reached, then signals (or fails) the signals; a timed submission passes
    ``HostTiming.execute``."""

    executable_format = "cpu"

    def allocate(self, size: int) -> HostBuffer:
        return HostBuffer(size)

    def allocate_mapped(self, size: int) -> tuple[HostBuffer, int]:
        """Every buffer here is host memory: mapped ones are the same buffers."""
        buffer = HostBuffer(size)
        return buffer, buffer.address

    def import_host(self, address: int, size: int) -> HostBuffer:
        """The runtime's host memory (a mapped module file's constants), used in place."""
        return HostBuffer(size, address)

    def dlpack_device(self) -> tuple[int, int, int]:
        """DLPack's CPU device (kDLCPU = 1); host work has no stream."""
        return 1, 0, 0

    def buffer_address(self, buffer: HostBuffer) -> int:
        return buffer.address

    def import_device(self, address: int, size: int) -> HostBuffer:
        """Another library's host memory (a numpy array, a torch CPU tensor), used in place."""
        return HostBuffer(size, address, alignment=1)

    def write_buffer(self, buffer: HostBuffer, offset: int, source: memoryview) -> None:
        buffer.range(offset, len(source), "write")[:] = source

    def read_buffer(self, buffer: HostBuffer, offset: int, target: memoryview) -> None:
        target[:] = buffer.range(offset, len(target), "read")

    def load_executable(self, params: ExecutableParams) -> CpuLibrary:
        return CpuLibrary(params)

    def create_command_buffer(self, commands: list[Command], binding_table_size: int):
        HostCommandBuffer.check(commands)  # (the SDK checked the rest)
        return HostCommandBuffer(tuple(commands), binding_table_size)

    # -- execution -----------------------------------------------------------------------------

    def run_workgroups(self, kernel: Kernel, state, count: int | None = None) -> int:
        """Runs workgroups [0, count) (None: the kernel's export's count); returns the first
        nonzero kernel status."""
        raise NotImplementedError

    def run_dispatches(self, run: DispatchRun, states) -> None:
        """Runs ``run``'s dispatches in order, each over ``states[i]``, one finished before the
        next starts; raises the first kernel's error status. Devices with a faster way to run
        several (local-task's native loop) override this."""
        for kernel, count, state in zip(run.kernels, run.counts, states):
            status = self.run_workgroups(kernel, ffi.addressof(state), count) if count else 0
            if status:
                raise kernel_error(kernel, status)

    def execute(self, command_buffer: HostCommandBuffer, table: list, steps: tuple = ()) -> None:
        """Runs the command buffer's ``steps`` (all: empty) on ``table``'s buffers."""
        if len(table) < command_buffer.binding_table_size:
            raise HalError("INVALID_ARGUMENT", f"binding table has {len(table)} entries, the "
                                               f"command buffer needs "
                                               f"{command_buffer.binding_table_size}")
        for step in steps or command_buffer.steps:
            if isinstance(step, DispatchRun):
                states, _addresses = step.states(table)   # the addresses live until the run ends
                self.run_dispatches(step, states)
            else:
                transfer(*step, table)

    def execute_timed(self, command_buffer: HostCommandBuffer, table: list) -> list[tuple]:
        """``execute`` with each command timed on the host's monotonic clock: (index, begin ns,
        end ns) per dispatch, copy and fill. Each dispatch is a run of its own (local-task then
        hands each to its workers alone), so each time is that dispatch's."""
        clock, times = time.monotonic_ns, []
        for step in command_buffer.timed_steps:
            begin = clock()
            self.execute(command_buffer, table, (step,))
            index = step.commands[0][0] if isinstance(step, DispatchRun) else step[0]
            times.append((index, begin, clock()))
        return times

    def queue_submit_timed(self, command_buffer, binding_table, waits, signals) -> HostTiming:
        timing = HostTiming(self.execute_timed)
        self.queue_submit(command_buffer, binding_table, waits, signals + [(timing.done, 1)],
                          timing.execute)
        return timing

    def read_timing(self, timing: HostTiming) -> list[tuple]:
        timing.done.wait(1)  # raises the submission's error
        return timing.times


def kernel_error(kernel: Kernel, status: int) -> HalError:
    return HalError("INTERNAL", f"kernel '{kernel.name}' returned error status {status}")
