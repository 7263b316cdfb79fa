"""What local-sync and local-task share: host buffers, CPU executables, recorded commands and
their execution. The two drivers differ only in how a submission is scheduled and how a
dispatch's workgroups are spread over threads.
"""

from __future__ import annotations

import functools

from pyree.runtime.drivers.cpu_executable import CpuLibrary, Kernel
from pyree.runtime.hal.ffi import ffi
from pyree.runtime.hal.python_driver import (
    Command,
    ExecutableParams,
    HalError,
    PythonDevice,
)
from pyree.runtime.records import Record

ALIGNMENT = 64
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


class HostCommandBuffer(Record):
    commands: tuple[Command, ...]
    binding_table_size: int

    @functools.cached_property
    def dispatches(self) -> tuple:
        """Per command, a dispatch's kernel, binding lengths and push constants (fixed when it
        was recorded; None for a copy or fill), made on the first execution. They live with the
        command buffer: a cache keyed by the commands hashed every dispatch's fields on each call
        and kept a dropped module's kernel libraries loaded."""
        return tuple(
            (c.executable.kernels[c.export_ordinal],
             ffi.new("uint64_t[]", [binding.length for binding in c.bindings]),
             ffi.new("uint32_t[]", c.push_constants)) if c.kind == "dispatch" else None
            for c in self.commands)


class HostDevice(PythonDevice):
    """A device whose memory is host memory and whose executables are CPU shared objects."""

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

    def execute(self, command_buffer: HostCommandBuffer, table: list) -> None:
        if len(table) < command_buffer.binding_table_size:
            raise HalError("INVALID_ARGUMENT", f"binding table has {len(table)} entries, the "
                                               f"command buffer needs "
                                               f"{command_buffer.binding_table_size}")
        for index, (command, dispatch) in enumerate(zip(command_buffer.commands,
                                                        command_buffer.dispatches)):
            buffers = [table[binding.slot] for binding in command.bindings]
            for b, (buffer, binding) in enumerate(zip(buffers, command.bindings)):
                if buffer is None or binding.offset + binding.length > buffer.size:
                    raise _binding_error(index, command, b, buffer, binding)
            if dispatch is not None:
                self._dispatch(dispatch, command, buffers)
            elif command.kind == "copy":
                source, target = (_view(buf, binding) for buf, binding in zip(buffers, command.bindings))
                target[:] = source
            elif command.kind == "fill":
                pattern = command.fill_pattern.to_bytes(8, "little")[:command.fill_pattern_length]
                _fill(_view(buffers[0], command.bindings[0]), pattern)

    def _dispatch(self, dispatch: tuple, command: Command, buffers: list) -> None:
        kernel, lengths, push = dispatch
        addresses = ffi.new("uintptr_t[]", [buffer.address + binding.offset
                                            for buffer, binding in zip(buffers, command.bindings)])
        state = ffi.new("pyree_cpu_dispatch_state_t *")  # addresses stays referenced until the call ends
        state.bindings = ffi.cast("void **", addresses)
        state.binding_lengths, state.binding_count = lengths, len(buffers)
        state.push_constants, state.push_constant_count = push, len(command.push_constants)
        status = self.run_workgroups(kernel, state) if kernel.workgroup_count else 0
        if status:
            raise HalError("INTERNAL", f"kernel '{kernel.name}' returned error status {status}")


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
