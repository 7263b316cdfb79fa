"""What local-sync and local-task share: host buffers, CPU executables, recorded commands and
their execution. The two drivers differ only in how a submission is scheduled and how a
dispatch's workgroups are spread over threads.
"""

from __future__ import annotations

import functools
import time

from pyree.runtime.drivers.cpu_executable import CpuLibrary, Kernel
from pyree.runtime.hal.ffi import ffi
from pyree.runtime.hal.python_driver import (
    Command,
    ExecutableParams,
    HalError,
    PythonDevice,
    TimelineSemaphore,
)
from pyree.runtime.records import Record

ALIGNMENT = 64
_libc = ffi.dlopen(None)  # memset (hal/ffi_build.py declares it)
# Uncleared memory, as malloc gives it: a large buffer's pages are touched only when written.
_allocate = ffi.new_allocator(should_clear_after_alloc=False)


class HostBuffer:
    """``size`` bytes of host memory (``bytes``, a memoryview), 64-byte aligned except another
    library's memory imported for a call (import_device), which is aligned to its elements:
    kernels assume no more."""

    def __init__(self, size: int, address: int | None = None, alignment: int = ALIGNMENT):
        if address is not None:  # memory the runtime or another library owns (import_*)
            if address % alignment:
                raise HalError("INVALID_ARGUMENT", f"imported host memory at {address:#x} is not "
                                                   f"{alignment}-byte aligned")
            self.bytes = memoryview(ffi.buffer(ffi.cast("char *", address), size))
            self.address, self.size = address, size
            return
        try:
            self._memory = _allocate("char[]", size + ALIGNMENT)
        except (MemoryError, OverflowError):
            raise HalError("RESOURCE_EXHAUSTED", f"cannot allocate {size} bytes of host memory") from None
        start = -int(ffi.cast("uintptr_t", self._memory)) % ALIGNMENT
        self.bytes = memoryview(ffi.buffer(self._memory))[start:start + size]
        self.address = int(ffi.cast("uintptr_t", self._memory)) + start
        self.size = size

    def range(self, offset: int, length: int, what: str) -> memoryview:
        if offset + length > self.size:
            raise HalError("OUT_OF_RANGE", f"{what}: bytes [{offset}, +{length}) lie outside a "
                                           f"{self.size}-byte buffer")
        return self.bytes[offset:offset + length]


class DispatchRun:
    """Consecutive dispatches of a command buffer (barriers between them are implied: each
    dispatch runs once the one before has finished), with what does not change between
    executions worked out once: whole-run lists of binding slots, offsets and ends, and the
    dispatch states less their binding addresses. Per execution that leaves one bounds check
    and one address list for the run, not a Python round per dispatch."""

    def __init__(self, commands: list[tuple[int, Command]]):
        self.commands = commands                       # (index in the command buffer, command)
        self.kernels: tuple[Kernel, ...] = tuple(c.executable.kernels[c.export_ordinal]
                                                 for _, c in commands)
        bindings = [b for _, c in commands for b in c.bindings]
        self.slots = tuple(b.slot for b in bindings)
        self.offsets = tuple(b.offset for b in bindings)
        self.ends = tuple(b.offset + b.length for b in bindings)
        self.starts, start = [], 0
        for _, c in commands:
            self.starts.append(start)
            start += len(c.bindings)
        self._arrays = [(ffi.new("uint64_t[]", [b.length for b in c.bindings]),
                         ffi.new("uint32_t[]", c.push_constants)) for _, c in commands]
        self.template = ffi.new("pyree_cpu_dispatch_state_t[]", len(commands))
        for state, (_, c), (lengths, push) in zip(self.template, commands, self._arrays):
            state.binding_lengths, state.binding_count = lengths, len(c.bindings)
            state.push_constants, state.push_constant_count = push, len(c.push_constants)
        self.native = None   # what a device's native executor keeps for this run (local-task)
        self._last: tuple | None = None   # (table, states, addresses) of the last execution

    def states(self, table: list):
        """The run's dispatch states for binding table ``table``: (states, what must outlive
        them). Raises the first binding that lies outside its buffer.

        The last table's states are kept: a static-shape function binds the same buffers call
        after call (the runtime's "same buffer, same role"), and working them out took ~70-150
        us of a 5 ms MobileNet v2 call (455 bindings). A table equal to the last one (the same
        buffer objects, whose sizes and addresses never change) gets them back; kept states are
        never written again, so two executions may share them."""
        last = self._last
        if last is not None and last[0] == table:
            return last[1], last[2]
        buffers = [table[slot] for slot in self.slots]
        if not all(buffer is not None and buffer.size >= end
                   for buffer, end in zip(buffers, self.ends)):
            raise self._binding_error(table)
        addresses = ffi.new("uintptr_t[]", [buffer.address + offset
                                            for buffer, offset in zip(buffers, self.offsets)])
        states = ffi.new("pyree_cpu_dispatch_state_t[]", len(self.commands))
        ffi.memmove(states, self.template, ffi.sizeof(states))
        base = ffi.cast("void **", addresses)
        for state, start in zip(states, self.starts):
            state.bindings = base + start
        self._last = (table, states, addresses)
        return states, addresses

    def _binding_error(self, table: list) -> HalError:
        for index, command in self.commands:
            for b, binding in enumerate(command.bindings):
                buffer = table[binding.slot]
                if buffer is None or binding.offset + binding.length > buffer.size:
                    return _binding_error(index, command, b, buffer, binding)
        raise AssertionError("no binding lies outside its buffer")


class HostCommandBuffer(Record):
    commands: tuple[Command, ...]
    binding_table_size: int

    @functools.cached_property
    def steps(self) -> tuple:
        """The commands as runs of consecutive dispatches (DispatchRun) and, between them, each
        copy or fill as (index, command); made on the first execution and kept with the command
        buffer (a cache keyed by the commands hashed every dispatch's fields on each call and kept
        a dropped module's kernel libraries loaded)."""
        return self._steps(split=False)

    @functools.cached_property
    def timed_steps(self) -> tuple:
        """``steps`` with each dispatch a run of its own, for a timed submission."""
        return self._steps(split=True)

    def _steps(self, split: bool) -> tuple:
        steps, run = [], []
        for index, command in enumerate(self.commands):
            if command.kind == "dispatch":
                run.append((index, command))
                if not split:
                    continue
            elif command.kind == "barrier":   # a run's dispatches already run one by one
                continue
            if run:
                steps.append(DispatchRun(run))
                run = []
            if command.kind != "dispatch":
                steps.append((index, command))
        if run:
            steps.append(DispatchRun(run))
        return tuple(steps)


class HostTiming:
    """One timed submission (hal.h revision 4): its commands' host clock times, and a semaphore
    of its own that the submission signals, or fails, with its others: read_timing waits on it.
    ``execute`` is what the submission runs in place of HostDevice.execute."""

    def __init__(self, device: HostDevice):
        self.device, self.times, self.done = device, [], TimelineSemaphore(0)

    def execute(self, command_buffer: HostCommandBuffer, table: list) -> None:
        self.times = self.device.execute_timed(command_buffer, table)


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
        return HostCommandBuffer(tuple(commands), binding_table_size)  # the SDK checked them

    # -- execution -----------------------------------------------------------------------------

    def run_workgroups(self, kernel: Kernel, state) -> int:
        """Runs workgroups [0, kernel.workgroup_count); returns the first nonzero kernel status."""
        raise NotImplementedError

    def run_dispatches(self, run: DispatchRun, states) -> None:
        """Runs ``run``'s dispatches in order, each over ``states[i]``, one finished before the
        next starts; raises the first kernel's error status. Devices with a faster way to run
        several (local-task's native loop) override this."""
        for kernel, state in zip(run.kernels, states):
            status = self.run_workgroups(kernel, ffi.addressof(state)) if kernel.workgroup_count else 0
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
                continue
            index, command = step
            buffers = [table[binding.slot] for binding in command.bindings]
            for b, (buffer, binding) in enumerate(zip(buffers, command.bindings)):
                if buffer is None or binding.offset + binding.length > buffer.size:
                    raise _binding_error(index, command, b, buffer, binding)
            if command.kind == "copy":
                source, target = (_view(buf, binding) for buf, binding in zip(buffers, command.bindings))
                target[:] = source
            elif command.kind == "fill":
                pattern = command.fill_pattern.to_bytes(8, "little")[:command.fill_pattern_length]
                target, binding = buffers[0], command.bindings[0]
                if pattern.count(pattern[0]) == len(pattern):  # one byte repeated: zero clears
                    _libc.memset(ffi.cast("void *", target.address + binding.offset), pattern[0],
                                 binding.length)
                else:
                    _fill(_view(target, binding), pattern)

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
        timing = HostTiming(self)
        self.queue_submit(command_buffer, binding_table, waits, signals + [(timing.done, 1)],
                          timing.execute)
        return timing

    def read_timing(self, timing: HostTiming) -> list[tuple]:
        timing.done.wait(1)  # raises the submission's error
        return timing.times


def kernel_error(kernel: Kernel, status: int) -> HalError:
    return HalError("INTERNAL", f"kernel '{kernel.name}' returned error status {status}")


def _view(buffer: HostBuffer, binding) -> memoryview:
    return buffer.bytes[binding.offset:binding.offset + binding.length]


def _fill(target: memoryview, pattern: bytes) -> None:
    """Repeats ``pattern`` over ``target`` (a whole number of patterns long): the filled part is
    copied onto the rest, doubling, so no pattern-sized temporary is made."""
    filled = min(len(pattern), len(target))
    target[:filled] = pattern[:filled]
    while filled < len(target):
        step = min(filled, len(target) - filled)
        target[filled:filled + step] = target[:step]
        filled += step


def _binding_error(index: int, command: Command, b: int, buffer, binding) -> HalError:
    where = f"command {index} ({command.kind}) binding {b}"
    if buffer is None:
        return HalError("INVALID_ARGUMENT", f"{where}: slot {binding.slot} has no buffer")
    return HalError("OUT_OF_RANGE", f"{where}: bytes [{binding.offset}, +{binding.length}) lie "
                                    f"outside a {buffer.size}-byte buffer")
