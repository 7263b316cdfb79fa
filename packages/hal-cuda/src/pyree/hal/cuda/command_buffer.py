"""Command buffers in three modes (chosen per device, see README.md; ``graph`` is the default):

- ``direct``: nothing is prepared; every submit walks the commands and packs each launch's
  arguments afresh through cuda-python. The reference behaviour.
- ``stream``: recording packs every launch's argument block once; a submit patches the binding
  addresses in place and issues the launches on the stream.
- ``graph``: the stream-mode launches are captured once into a CUDA graph and instantiated; a
  submit is one cuGraphLaunch. Executable graphs are kept per binding table (the runtime's buffer
  pool hands a static-shape function the same buffers call after call); a new table is
  re-captured and applied with cuGraphExecUpdate once the cache is full.

Bindings are checked against each kernel's declared minimum lengths when recorded and against the
actual buffers the first time a binding table is submitted; the last few tables are remembered
(buffers never change address or size, so a table of the same buffer objects needs no new check);
a bad module cannot make a kernel touch memory out of range. Launches go through ``hotpath`` (cffi).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from pyree.hal.cuda.hotpath import SUCCESS, ffi, handle
from pyree.hal.cuda.symbols import CudaError, check
from pyree.runtime.hal.python_driver import Command, check_binding

MODES = ("direct", "stream", "graph")
# Calls queued back to back rotate through as many buffer sets as calls are in flight (the
# runtime's pool hands a dropped result back once its work is done): with 4 graphs, 5 sets in
# rotation missed on every call (a capture and cuGraphExecUpdate each).
_GRAPH_CACHE = 16
_KNOWN_TABLES = 32  # binding tables checked (and, in graph mode, captured) recently


@dataclass
class _Dispatch:
    kernel: object                     # executable.Kernel
    bindings: tuple                    # (slot, offset, length) per kernel parameter
    push_constants: tuple
    values: object                     # stream mode: one u64 per parameter (cffi uint64_t[])
    pointers: object                   # stream mode: the void*[] cuLaunchKernel reads (cffi)
    params: object                     # stream mode: ``pointers`` as a cffi void **


class CommandBuffer:
    def __init__(self, device, commands: list[Command], table_size: int, mode: str):
        self.device, self.cu, self.hot, self.mode = device, device.cu, device.hot, mode
        self.table_size = table_size
        self.ops: list = []
        self.kernel_names: list[str] = []
        self._checks: list[tuple[int, int, int, str]] = []
        for i, c in enumerate(commands):
            self._record(i, c)
        self._graphs: dict[tuple, object] = {}      # binding table -> cuda-python CUgraphExec
        self._known: dict[tuple, object] = {}       # validated binding table -> graph handle/None
        self._last: tuple | None = None              # (binding table, graph handle) last issued

    # -- recording ---------------------------------------------------------------------------
    def _record(self, i: int, c: Command) -> None:
        """``c`` was checked by the driver kit against the table and the kernel's declaration."""
        where = f"command {i} ({c.kind})"
        for b in c.bindings:
            self._checks.append((b.slot, b.offset, b.length, where))
        if c.kind == "barrier":
            return  # one in-order stream: every command already follows the previous ones
        if c.kind == "dispatch":
            k = c.executable.kernels[c.export_ordinal]
            n = len(c.bindings) + len(c.push_constants)
            values = ffi.new("uint64_t[]", max(n, 1))  # zeroed
            values[len(c.bindings):n] = list(c.push_constants)
            pointers = ffi.new("void *[]", [values + j for j in range(max(n, 1))])
            self.ops.append(_Dispatch(k, tuple((b.slot, b.offset, b.length) for b in c.bindings),
                                      tuple(c.push_constants), values, pointers,
                                      ffi.cast("void **", pointers)))
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
                graph = self._graph_for(key, table) if self.mode == "graph" else None
                if len(self._known) >= _KNOWN_TABLES:
                    self._known.pop(next(iter(self._known)))
                self._known[key] = graph
            self._last = (key, graph)
        if graph is None:
            return self._issue_stream(self.device.stream, table, packed=self.mode == "stream")
        err = self.hot.cuGraphLaunch(graph, self.device.stream_handle)
        if err != SUCCESS:
            self.hot.fail(err, f"graph launch of kernels {', '.join(self.kernel_names)}")

    def _graph_for(self, key, table):
        """The executable graph for this binding table (cffi handle), captured if new."""
        exec_ = self._graphs.get(key)
        if exec_ is None:
            exec_ = self._capture(key, table)
        return handle(exec_)

    def _issue_stream(self, stream, table, packed: bool) -> None:
        cu, hot = self.cu, self.hot
        raw_stream = self.device.stream_handle if stream is self.device.stream else handle(stream)
        for op in self.ops:
            if isinstance(op, _Dispatch):
                k = op.kernel
                addresses = [table[s].ptr + off for s, off, _ in op.bindings]
                if packed:  # raw C launch; the stream may be the capture stream
                    op.values[0:len(addresses)] = addresses  # cffi slices name both ends
                    err = hot.cuLaunchKernel(k.handle, *k.grid, *k.block, k.shared,
                                             raw_stream, op.params, ffi.NULL)
                    if err != SUCCESS:
                        hot.fail(err, f"launch of kernel '{k.name}' (grid {k.grid}, block "
                                      f"{k.block}, {k.shared} bytes shared)")
                    continue
                args = (tuple(addresses) + op.push_constants,
                        (ctypes.c_void_p,) * len(addresses)
                        + (ctypes.c_uint32,) * len(op.push_constants))
                err = cu.cuLaunchKernel(k.function, *k.grid, *k.block, k.shared, stream, args, 0)[0]
                if err != cu.CUresult.CUDA_SUCCESS:
                    check(cu, (err,), f"launch of kernel '{k.name}' (grid {k.grid}, block "
                                      f"{k.block}, {k.shared} bytes shared)")
            elif op[0] == "copy":
                _, (ss, so), (ds, do), n = op
                check(cu, cu.cuMemcpyDtoDAsync(table[ds].ptr + do, table[ss].ptr + so, n, stream),
                      f"copy of {n} bytes")
            else:
                _, (ts, to), n, pattern, width = op
                self.device.fill(stream, table[ts].ptr + to, n, pattern, width)

    def _capture(self, key, table):
        cu, capture = self.cu, self.device.capture_stream
        # Relaxed: Python may collect a dropped result in the middle of the capture, and its
        # cuMemFreeAsync / cuMemFreeHost (memory this graph never uses) invalidated a
        # thread-local capture (seen on the H100: 1 call in a few thousand).
        check(cu, cu.cuStreamBeginCapture(
            capture, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED),
            "cuStreamBeginCapture")
        try:
            self._issue_stream(capture, table, packed=True)
        finally:
            graph = check(cu, cu.cuStreamEndCapture(capture), "cuStreamEndCapture")
        try:
            if len(self._graphs) >= _GRAPH_CACHE:
                old_key = next(iter(self._graphs))
                exec_ = self._graphs.pop(old_key)
                self._known.pop(old_key, None)  # its graph is about to run other buffers
                try:
                    check(cu, cu.cuGraphExecUpdate(exec_, graph)[:1], "cuGraphExecUpdate")
                except CudaError:
                    cu.cuGraphExecDestroy(exec_)
                    exec_ = check(cu, cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
            else:
                exec_ = check(cu, cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        finally:
            cu.cuGraphDestroy(graph)
        self._graphs[key] = exec_
        return exec_

    def destroy(self) -> None:
        self._last = None
        self._known.clear()
        for exec_ in self._graphs.values():
            self.cu.cuGraphExecDestroy(exec_)
        self._graphs.clear()
