"""Direct command buffers (ROCm has only direct ones, as IREE's ROCm guide says): every submit
issues the recorded commands on the device's stream.

Recording packs each launch's argument block once (the kernels take their binding pointers,
then their i32 push constants, one 8-byte slot each); a submit patches the binding addresses in
place and calls hipModuleLaunchKernel with kernelParams. Bindings are checked against each
kernel's declared minimum lengths when recorded (by the SDK) and against the actual buffers the
first time a binding table is submitted; the last few tables are remembered (buffers never change
address or size, so a table of the same buffer objects needs no new check): a bad module cannot
make a kernel touch memory out of range. Barriers are no-ops: one in-order stream. A traced
submission (hal.h revision 4, ``issue_timed``) records a timing event before and after each
command (timing.py). A submit may
come from any thread: one at a time per command buffer, whose packed arguments are patched in place.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from pyree.hal.rocm.allocator import void
from pyree.hal.rocm.symbols import SUCCESS, check, error, ffi
from pyree.runtime.hal.python_driver import Command, check_binding

MODES = ("direct",)
_KNOWN_TABLES = 16  # binding tables checked recently


@dataclass
class _Dispatch:
    kernel: object      # executable.Kernel
    grid: tuple         # its blocks: the export's, or the command's own (hal.h revision 5)
    bindings: tuple     # (slot, offset) per pointer parameter
    values: object      # uint64_t[]: one slot per parameter
    params: object      # void *[]: the kernelParams hipModuleLaunchKernel reads


class CommandBuffer:
    def __init__(self, device, commands: list[Command], table_size: int):
        self.device, self.lib = device, device.lib
        self.table_size = table_size
        self.ops: list = []
        self.op_commands: list[int] = []  # the command index of each op (barriers have none)
        self.kernel_names: list[str] = []
        self._checks: list[tuple[int, int, int, str]] = []
        for i, c in enumerate(commands):
            self._record(i, c)
        self._known: dict[tuple, None] = {}  # binding tables validated recently
        self._lock = threading.Lock()

    # -- recording ---------------------------------------------------------------------------
    def _record(self, i: int, c: Command) -> None:
        """``c`` was checked by the driver kit against the table and the kernel's declaration."""
        where = f"command {i} ({c.kind})"
        for b in c.bindings:
            self._checks.append((b.slot, b.offset, b.length, where))
        k = c.executable.kernels[c.export_ordinal] if c.kind == "dispatch" else None
        if c.kind == "barrier" or k is not None and 0 in c.workgroups(k.grid):
            return  # one in-order stream: every command already follows the previous ones
        self.op_commands.append(i)
        if c.kind == "dispatch":
            k.check_arguments(len(c.bindings), len(c.push_constants), where)
            n = len(c.bindings) + len(c.push_constants)
            values = ffi.new("uint64_t[]", max(n, 1))
            for j, constant in enumerate(c.push_constants):
                values[len(c.bindings) + j] = constant & 0xFFFFFFFF
            params = ffi.new("void *[]", [values + j for j in range(max(n, 1))])
            self.ops.append(_Dispatch(k, c.workgroups(k.grid),
                                      tuple((b.slot, b.offset) for b in c.bindings), values,
                                      params))
            self.kernel_names.append(k.name)
        elif c.kind == "copy":
            src, dst = c.bindings
            self.ops.append(("copy", (src.slot, src.offset), (dst.slot, dst.offset), src.length))
        elif c.kind == "fill":
            (t,) = c.bindings
            self.ops.append(("fill", (t.slot, t.offset), t.length, c.fill_pattern,
                             c.fill_pattern_length))

    # -- submission --------------------------------------------------------------------------
    def validate(self, table) -> None:
        key = tuple(table)  # the buffer objects: identity, never a stale address
        if key in self._known:
            return
        for slot, offset, length, where in self._checks:
            check_binding(table, slot, offset, length, where)
        if len(self._known) >= _KNOWN_TABLES:
            self._known.pop(next(iter(self._known)))
        self._known[key] = None

    def issue(self, table) -> None:
        """Queues the commands on the device's stream with ``table``'s buffers."""
        with self._lock:
            self._issue(table)

    def issue_timed(self, table, events: list) -> None:
        """Queues the commands, each between its pair of timing events (``events[2k]``,
        ``events[2k + 1]`` around op k)."""
        lib, stream = self.lib, self.device.stream
        with self._lock:
            for k, op in enumerate(self.ops):
                check(lib.hipEventRecord(events[2 * k], stream), "hipEventRecord")
                self._issue(table, (op,))
                check(lib.hipEventRecord(events[2 * k + 1], stream), "hipEventRecord")

    def _issue(self, table, ops=None) -> None:
        """Queues ``ops`` (all: None) on the device's stream."""
        self.validate(table)
        lib, stream = self.lib, self.device.stream
        for op in ops or self.ops:
            if isinstance(op, _Dispatch):
                k, values = op.kernel, op.values
                for j, (slot, offset) in enumerate(op.bindings):
                    values[j] = table[slot].ptr + offset
                err = lib.hipModuleLaunchKernel(k.function, *op.grid, *k.block, k.shared, stream,
                                                op.params, ffi.NULL)
                if err != SUCCESS:
                    raise error(err, f"launch of kernel '{k.name}' (grid {op.grid}, block "
                                          f"{k.block}, {k.shared} bytes shared)")
            elif op[0] == "copy":
                _, (ss, so), (ds, do), n = op
                check(lib.hipMemcpyDtoDAsync(void(table[ds].ptr + do),
                                                  void(table[ss].ptr + so), n, stream),
                      f"copy of {n} bytes")
            else:
                _, (ts, to), n, pattern, width = op
                self.device.fill(table[ts].ptr + to, n, pattern, width)
