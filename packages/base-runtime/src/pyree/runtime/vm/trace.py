"""Traces of calls: where a call's time goes, on the host and on each device queue.

    import pyree.runtime as rt
    with rt.trace("calls.json") as t:          # Chrome trace-event JSON: Perfetto opens it
        y = module["main"](x).to_host()
    print(t.format_summary())                  # the dispatches, by device time

While a trace is active every call, from any thread, takes the traced path (``Trace.call``): the
host stages of the call are timed (its arguments -- checks, conversions, uploads --, each submit,
each wait, each branch or check the host runs) and each command buffer goes to the driver with
``queue_submit_timed`` (hal.h revision 4), which times every command on the device. A driver
without it (revision 3 or older) is waited for after each submission instead, and its lane shows
one span per submission, from the submit's return until the wait's. Results of traced calls time
their waits and reads too. With no trace active a call pays one test (``Function._trace``).

Device times are read once the work is done: when the trace stops or is reported, or, the
oldest, once MAX_PENDING timed submissions are outstanding, so calls queued back to back stay
queued while traced.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from contextlib import contextmanager

from pyree.runtime.errors import PyreeError
from pyree.runtime.module.verifier import FORMATS
from pyree.runtime.vm import executables
from pyree.runtime.vm.device_array import DeviceArray
from pyree.runtime.vm.function import Function
from pyree.runtime.vm.trace_report import DispatchRow, chrome_trace, format_summary, summarize

clock = time.monotonic_ns  # the clock drivers map device times to (hal.h revision 4)
MAX_PENDING = 64           # timed submissions outstanding before the oldest are read
QUEUE = "queue 0"          # each pyree device has one queue


class Event:
    """One span of a trace, drawn in ``lane`` (process, thread): ("host", a thread's name) or
    (a device's URI, QUEUE). ``category``: "host", "dispatch", "copy", "fill", or "submission"
    (a whole submission, on a device that does not time commands). (A plain class, not a
    Record: a traced call makes several, and a Record's generic __init__ was most of its cost.)"""

    __slots__ = ("lane", "name", "begin_ns", "end_ns", "category", "args")

    def __init__(self, lane: tuple[str, str], name: str, begin_ns: int, end_ns: int,
                 category: str, args: dict | None = None):
        self.lane, self.name, self.category, self.args = lane, name, category, args
        self.begin_ns, self.end_ns = begin_ns, end_ns


class Trace:
    """A tracing session: every call made while it is active is traced (one at a time per
    process). ``path``: where ``stop`` writes the trace-event JSON (None: nowhere)."""

    def __init__(self, path: str | None = None):
        self.path = path
        self.events: list[Event] = []
        self.calls: dict[str, int] = {}  # traced calls per function name
        self.origin_ns = clock()          # time 0 of the trace
        self._lock = threading.Lock()
        self._pending: deque = deque()    # (device, timing, function, step) not read yet
        self._labels: dict[int, tuple] = {}  # id(function) -> (function, its kernels' labels)

    # -- the session ---------------------------------------------------------------------------

    def start(self) -> Trace:
        if Function._trace is not None:
            raise PyreeError("a trace is already active in this process: stop it first")
        self.origin_ns = clock()
        Function._trace = self
        return self

    def stop(self) -> None:
        """Ends the session: later calls run untraced. Reads every device time and, with a
        ``path``, writes the trace there (whole or not at all)."""
        if Function._trace is self:
            Function._trace = None
        if self.path is not None:
            self.write(self.path)
        else:
            self._read_pending()

    def __enter__(self) -> Trace:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @contextmanager
    def span(self, name: str, **args):
        """Times a host stage of the caller's own (``args``: shown with it)."""
        begin = clock()
        try:
            yield
        finally:
            self._add([Event(("host", threading.current_thread().name), name, begin, clock(),
                             "host", args or None)])

    # -- reports -------------------------------------------------------------------------------

    def summary(self) -> list[DispatchRow]:
        """The dispatches by kernel and device, most device time first."""
        self._read_pending()
        return summarize(self.events)

    def format_summary(self) -> str:
        """``summary`` as a table, for people."""
        self._read_pending()
        return format_summary(self.events, self.calls)

    def chrome(self) -> dict:
        """The trace as Chrome trace-event JSON (``{"traceEvents": [...]}``)."""
        self._read_pending()
        return chrome_trace(self.events, self.origin_ns)

    def write(self, path: str) -> None:
        """Writes ``chrome()`` to ``path`` as JSON, whole or not at all."""
        import json

        from pyree.runtime.output_file import write_output

        write_output(path, json.dumps(self.chrome(), separators=(",", ":")))

    # -- the traced call -----------------------------------------------------------------------

    def call(self, function: Function, args: tuple, failures: list | None, donate=()) -> list:
        """``function._run`` with every stage and command timed."""
        call = _TracedCall(self, function)
        begin = clock()
        try:
            results = function._run(args, failures, call.hooks, donate)
        finally:
            call.done(begin, clock())
        for array in results:
            array.__class__ = TracedArray  # its waits and reads are traced too
        return results

    def _add(self, events: list[Event]) -> None:
        with self._lock:
            self.events += events

    def _kernel_labels(self, function: Function) -> list:
        """Each kernel's (name, sources) of ``function``'s module, worked out once per trace."""
        known = self._labels.get(id(function))
        if known is None:
            known = self._labels[id(function)] = (function, kernel_labels(function._loaded))
        return known[1]

    def _timed(self, device, timing: int, function: Function, step) -> None:
        with self._lock:
            self._pending.append((device, timing, function, step))
            over = len(self._pending) > MAX_PENDING
        if over:
            self._read_pending(MAX_PENDING // 2)

    def _read_pending(self, count: int | None = None) -> None:
        """Reads the device times of the oldest ``count`` outstanding submissions (all: None),
        waiting for them to finish."""
        while count is None or count > 0:
            with self._lock:
                if not self._pending:
                    return
                device, timing, function, step = self._pending.popleft()
            count = None if count is None else count - 1
            labels, contents = self._kernel_labels(function), step.contents
            try:
                times = device.read_timing(timing, len(contents))
            except PyreeError:  # a failed submission: its call reports the error
                continue
            lane = (device.uri, QUEUE)
            self._add([_command_event(lane, contents[index], labels, function.name, begin, end)
                       for index, begin, end in times if index < len(contents)])


class _TracedCall:
    """The hooks of one traced call (Function._run_steps): each submit, wait, branch condition's
    read and check timed, the call's host spans kept until it is done."""

    def __init__(self, trace: Trace, function: Function):
        self.trace, self.function = trace, function
        self.device = function._loaded.device
        self.lane = ("host", threading.current_thread().name)
        self.events: list[Event] = []
        self.first: int | None = None  # when the call's arguments were ready (its first hook)
        self.hooks = (self.submit, self.wait, self.read, self.check)

    def _host(self, name: str, begin: int, end: int, **args) -> None:
        if self.first is None:
            self.first = begin
        self.events.append(Event(self.lane, name, begin, end, "host", args or None))

    def submit(self, step, table: list, waits: list, signals: list) -> None:
        device, begin = self.device, clock()
        if device.times_commands:
            try:
                timing = device.queue_submit_timed(step, table, waits, signals)
            finally:
                self._host("submit", begin, clock())
            self.trace._timed(device, timing, self.function, step)
            return
        try:
            device.queue_submit(step, table, waits, signals)
        finally:
            self._host("submit", begin, clock())
        submitted = clock()
        self.wait(*signals[-1])  # the only way to see when its work ended
        contents = step.contents
        kernels = [kernel for kind, kernel, _ in contents if kind == "dispatch"]
        self.events.append(Event((device.uri, QUEUE), f"submission ({len(contents)} commands)",
                                 submitted, clock(), "submission",
                                 {"function": self.function.name, "kernels": kernels}))

    def wait(self, semaphore, value: int) -> None:
        begin = clock()
        try:
            self.function._wait(semaphore, value)
        finally:
            self._host("wait", begin, clock())

    def read(self, operand, items: list):
        """A branch's condition, read on the host."""
        begin = clock()
        try:
            return self.function._read(operand, items)
        finally:
            self._host("branch", begin, clock())

    def check(self, step, items: list):
        begin = clock()
        try:
            return self.function._check(step, items)
        finally:
            self._host("check", begin, clock())

    def done(self, begin: int, end: int) -> None:
        name = self.function.name
        stages = [Event(self.lane, f"call {name}", begin, end, "host", None),
                  Event(self.lane, "arguments", begin, self.first or end, "host", None)]
        self.trace._add(stages + self.events)
        with self.trace._lock:
            self.trace.calls[name] = self.trace.calls.get(name, 0) + 1


class TracedArray(DeviceArray):
    """A traced call's result: while its trace is active, its waits and reads are host stages."""

    __slots__ = ()

    def wait(self) -> None:
        trace = Function._trace
        if trace is None or self._done:
            return super().wait()
        with trace.span("wait for result"):
            super().wait()

    def to_host(self):
        trace = Function._trace
        if trace is None:
            return super().to_host()
        with trace.span("read result", bytes=self.nbytes):
            return super().to_host()

    def to_host_array(self):
        trace = Function._trace
        if trace is None:
            return super().to_host_array()
        with trace.span("read result", bytes=self.nbytes):
            return super().to_host_array()


def kernel_labels(loaded) -> list[tuple[str, tuple[str, ...]]]:
    """(name, source ops) of each kernel of a loaded module: the module's own (schema 1.4), or,
    for an older module, the names its executable for this device gives its exports."""
    infos = loaded.module.tree.kernels
    if infos:
        return [(info.name, tuple(info.sources)) for info in infos]
    chosen = executables.select(loaded.module, loaded.device)
    if chosen is None:
        return []
    member = getattr(chosen, FORMATS[chosen.format])
    return [(getattr(export, "symbol", None) or export.name, ()) for export in member.exports]


SHOWN_SOURCES = 3  # source ops an event's name lists; its args list them all


def label(name: str, sources: tuple[str, ...]) -> str:
    """A dispatch's name in a trace: the source ops it fused, or its kernel's name."""
    if not sources:
        return name
    more = len(sources) - SHOWN_SOURCES
    return "; ".join(sources[:SHOWN_SOURCES]) + (f"; +{more} more" if more > 0 else "")


def _command_event(lane: tuple[str, str], content: tuple[str, int, int], labels: list,
                   function: str, begin: int, end: int) -> Event:
    kind, kernel, nbytes = content
    if kind != "dispatch":
        return Event(lane, f"{kind} {nbytes} bytes", begin, end, kind, {"function": function})
    name, sources = labels[kernel] if kernel < len(labels) else (f"kernel {kernel}", ())
    return Event(lane, label(name, sources), begin, end, "dispatch",
                 {"kernel": name, "sources": list(sources), "function": function,
                  "bytes": nbytes})


def trace(path: str | None = None) -> Trace:
    """A tracing session, started by ``with`` (or ``start()``), ended by leaving it (or
    ``stop()``), which writes the trace to ``path`` when one is given."""
    return Trace(path)
