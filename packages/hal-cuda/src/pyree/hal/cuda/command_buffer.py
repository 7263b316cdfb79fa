"""Command buffers in three modes (chosen per device, see README.md; ``graph`` is the default):

- ``direct``: nothing is prepared; every submit walks the commands and packs each launch's
  arguments afresh (new cffi arrays). The reference behaviour: no state kept between submits.
- ``stream``: recording packs every launch's argument block once; a submit patches the binding
  addresses in place and issues the launches on the stream.
- ``graph``: the stream-mode launches are captured once into a CUDA graph and instantiated; a
  submit is one cuGraphLaunch. Executable graphs are kept per binding table (the runtime's buffer
  pool hands a static-shape function the same buffers call after call); a new table is
  re-captured and applied with cuGraphExecUpdate once the cache is full. A function with
  run-time sizes is recorded once per size (hal.h revision 5: each dispatch's grid, push
  constants and ranges are that size's), so its graphs belong to one size's command buffer and
  never replay for another; they are destroyed with it.

Bindings are checked against each kernel's declared minimum lengths when recorded and against the
actual buffers the first time a binding table is submitted; the last few tables are remembered
(buffers never change address or size, so a table of the same buffer objects needs no new check);
a bad module cannot make a kernel touch memory out of range.

A traced submission (hal.h revision 4, ``issue_timed``) issues the commands in stream order in
every mode, each between two timing events (timing.py): a graph's nodes cannot be timed one by
one, and the kernels and their order are the same.

A submit may come from any thread: one at a time per command buffer (the table caches and the
packed arguments patched in place are its own), and one capture at a time per device (they share
its capture stream).
"""

from __future__ import annotations

import threading

from pyree.hal.cuda import symbols
from pyree.hal.cuda.symbols import check, ffi
from pyree.runtime.hal.python_driver import Command, check_binding

MODES = ("direct", "stream", "graph")
# Calls queued back to back rotate through as many buffer sets as calls are in flight (the
# runtime's pool hands a dropped result back once its work is done): with 4 graphs, 5 sets in
# rotation missed on every call (a capture and cuGraphExecUpdate each).
_GRAPH_CACHE = 16
_KNOWN_TABLES = 32  # binding tables checked (and, in graph mode, captured) recently


def _pack(addresses: list, push_constants: tuple):
    """A launch's arguments: one u64 per parameter (a u32 push constant is its low half) and the
    ``void *[]`` of pointers to them that cuLaunchKernel reads."""
    values = ffi.new("uint64_t[]", [*addresses, *push_constants] or [0])
    return values, ffi.new("void *[]", [values + j for j in range(len(values))])


class _Dispatch:
    """A recorded launch. ``values``/``params``: its packed arguments (see _pack), whose binding
    addresses stream and graph modes patch in place before each launch. (A plain class: the
    dataclasses import is not free at a process's start.)"""

    __slots__ = ("kernel", "grid", "bindings", "push_constants", "values", "params")

    def __init__(self, kernel, grid: tuple, bindings: tuple, push_constants: tuple, values,
                 params):
        self.kernel = kernel                  # executable.Kernel
        self.grid = grid                      # its blocks: the export's, or the command's own
        self.bindings = bindings              # (slot, offset, length) per kernel parameter
        self.push_constants = push_constants
        self.values, self.params = values, params


class CommandBuffer:
    def __init__(self, device, commands: list[Command], table_size: int, mode: str):
        self.device, self.cu, self.mode = device, device.cu, mode
        self.table_size = table_size
        self.ops: list = []
        self.op_commands: list[int] = []  # the command index of each op (barriers have none)
        self.kernel_names: list[str] = []
        self._checks: list[tuple[int, int, int, str]] = []
        for i, c in enumerate(commands):
            self._record(i, c)
        self._graphs: dict[tuple, object] = {}      # binding table -> CUgraphExec
        self._known: dict[tuple, object] = {}       # validated binding table -> CUgraphExec/None
        self._last: tuple | None = None              # (binding table, CUgraphExec) last issued
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
            values, params = _pack([0] * len(c.bindings), tuple(c.push_constants))
            self.ops.append(_Dispatch(k, c.workgroups(k.grid),
                                      tuple((b.slot, b.offset, b.length) for b in c.bindings),
                                      tuple(c.push_constants), values, params))
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
        for slot, offset, length, where in self._checks:
            check_binding(table, slot, offset, length, where)

    def issue(self, table) -> None:
        """Queues the commands on the device's stream with ``table``'s buffers."""
        with self._lock:
            self._issue(table)

    def _issue(self, table) -> None:
        key = tuple(table)  # the buffer objects: identity, never a stale address
        last = self._last
        if last is not None and last[0] == key:
            graph = last[1]
        else:  # e.g. a caller holding each result until the next call alternates two tables
            self._last = None
            if key in self._known:
                graph = self._known[key]
            else:
                self.validate(table)
                graph = (self._graphs.get(key) or self._capture(key, table)) \
                    if self.mode == "graph" else None
                if len(self._known) >= _KNOWN_TABLES:
                    self._known.pop(next(iter(self._known)))
                self._known[key] = graph
            self._last = (key, graph)
        if graph is None:
            return self._issue_stream(self.device.stream, table, packed=self.mode == "stream")
        err = self.cu.cuGraphLaunch(graph, self.device.stream)
        if err:
            check(err, f"graph launch of kernels {', '.join(self.kernel_names)}")

    def issue_timed(self, table, events: list) -> None:
        """Queues the commands in stream order, each between its pair of timing events
        (``events[2k]``, ``events[2k + 1]`` around op k)."""
        cu, stream = self.cu, self.device.stream
        with self._lock:
            if tuple(table) not in self._known:
                self.validate(table)
            for k, op in enumerate(self.ops):
                check(cu.cuEventRecord(events[2 * k], stream), "cuEventRecord")
                self._issue_stream(stream, table, self.mode != "direct", (op,))
                check(cu.cuEventRecord(events[2 * k + 1], stream), "cuEventRecord")

    def _issue_stream(self, stream, table, packed: bool, ops=None) -> None:
        """Queues ``ops`` (all: None) on ``stream``."""
        cu = self.cu
        for op in ops or self.ops:
            if isinstance(op, _Dispatch):
                k = op.kernel
                addresses = [table[s].ptr + off for s, off, _ in op.bindings]
                if packed:  # the stream may be the capture stream
                    values, params = op.values, op.params
                    values[0:len(addresses)] = addresses  # cffi slices name both ends
                else:  # ``values`` holds what ``params`` points to until the launch copies it
                    values, params = _pack(addresses, op.push_constants)
                err = cu.cuLaunchKernel(k.function, *op.grid, *k.block, k.shared, stream, params,
                                        ffi.NULL)
                if err:
                    check(err, f"launch of kernel '{k.name}' (grid {op.grid}, block {k.block}, "
                               f"{k.shared} bytes shared)")
            elif op[0] == "copy":
                _, (ss, so), (ds, do), n = op
                check(cu.cuMemcpyDtoDAsync(table[ds].ptr + do, table[ss].ptr + so, n, stream),
                      f"copy of {n} bytes")
            else:
                _, (ts, to), n, pattern, width = op
                self.device.fill(stream, table[ts].ptr + to, n, pattern, width)

    def _capture(self, key, table):
        """Captures the commands with ``table``'s buffers into an executable graph: a new one, or,
        once the cache is full, the oldest one updated in place (cuGraphExecUpdate)."""
        cu, capture = self.cu, self.device.capture_stream
        out = ffi.new("CUgraph *")
        with self.device.capture_lock:
            # Relaxed: Python may collect a dropped result in the middle of the capture, and its
            # cuMemFreeAsync / cuMemFreeHost (memory this graph never uses) invalidated a
            # thread-local capture; other threads' calls go on meanwhile too.
            check(cu.cuStreamBeginCapture(capture, symbols.CU_STREAM_CAPTURE_MODE_RELAXED),
                  "cuStreamBeginCapture")
            try:
                self._issue_stream(capture, table, packed=True)
            finally:
                check(cu.cuStreamEndCapture(capture, out), "cuStreamEndCapture")
        graph, exec_ = out[0], ffi.new("CUgraphExec *")
        try:
            if len(self._graphs) >= _GRAPH_CACHE:
                old_key = next(iter(self._graphs))
                exec_[0] = self._graphs.pop(old_key)
                self._known.pop(old_key, None)  # its graph is about to run other buffers
                info = ffi.new("CUgraphExecUpdateResultInfo *")
                if cu.cuGraphExecUpdate(exec_[0], graph, info) != symbols.CUDA_SUCCESS:
                    cu.cuGraphExecDestroy(exec_[0])
                    check(cu.cuGraphInstantiateWithFlags(exec_, graph, 0), "cuGraphInstantiateWithFlags")
            else:
                check(cu.cuGraphInstantiateWithFlags(exec_, graph, 0), "cuGraphInstantiateWithFlags")
        finally:
            cu.cuGraphDestroy(graph)
        self._graphs[key] = exec_[0]
        return exec_[0]

    def destroy(self) -> None:
        with self._lock:
            self._last = None
            self._known.clear()
            for exec_ in self._graphs.values():
                self.cu.cuGraphExecDestroy(exec_)
            self._graphs.clear()
