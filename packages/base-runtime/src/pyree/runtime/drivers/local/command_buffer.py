"""Command buffers of the local devices: the recorded commands, grouped on first execution into
runs of consecutive dispatches (DispatchRun, whose per-execution work is worked out once) and,
between them, copies and fills, which ``transfer`` runs."""

from __future__ import annotations

import functools

from pyree.runtime.drivers.local.allocator import HostBuffer
from pyree.runtime.drivers.local.executable import Kernel
from pyree.runtime.drivers.local.symbols import libc
from pyree.runtime.hal.ffi import ffi
from pyree.runtime.hal.python_driver import Command, HalError
from pyree.runtime.records import Record


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
        # each dispatch's linear workgroups (its export's, or its own: hal.h revision 5)
        self.counts: tuple[int, ...] = tuple(
            c.workgroups((k.workgroup_count, 1, 1))[0] for k, (_, c) in zip(self.kernels, commands))
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
        after call (the runtime's "same buffer, same role"), and working them out again was a
        visible share of a small model's call (hundreds of bindings). A table equal to the last
        one (the same buffer objects, whose sizes and addresses never change) gets them back;
        kept states are never written again, so two executions may share them."""
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

    @staticmethod
    def check(commands: list[Command]) -> None:
        """CPU workgroups are linear: a dispatch's count is (x, 1, 1), or has a 0 (none)."""
        for i, c in enumerate(commands):
            x, y, z = c.workgroup_count
            if x * y * z and (y, z) != (1, 1):
                raise HalError("INVALID_ARGUMENT", f"command {i} (dispatch): workgroup count "
                                                   f"{(x, y, z)} is not linear: a CPU dispatch "
                                                   f"runs x workgroups, with y = z = 1")

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


def transfer(index: int, command: Command, table: list) -> None:
    """Runs copy or fill command ``index`` of a command buffer on ``table``'s buffers."""
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
            libc.memset(ffi.cast("void *", target.address + binding.offset), pattern[0],
                        binding.length)
        else:
            _fill(_view(target, binding), pattern)


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
