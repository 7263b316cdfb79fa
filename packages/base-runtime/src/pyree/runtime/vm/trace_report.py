"""What a trace (vm/trace.py) reports: Chrome trace-event JSON and the dispatches by device time.

The JSON is the format chrome://tracing and Perfetto (ui.perfetto.dev) open: complete events
(``"ph": "X"``, ``ts``/``dur`` in microseconds from the trace's start), one process per lane
group -- "host", whose threads are the calling threads, and one per device, whose thread is its
queue -- named by metadata events. Events of a lane come in time order, an enclosing span before
the spans inside it.
"""

from __future__ import annotations

from pyree.runtime.records import Record

DEVICE_CATEGORIES = ("dispatch", "copy", "fill", "submission")  # what a device's lane holds


class DispatchRow(Record):
    """One kernel's dispatches on one device."""

    device: str
    kernel: str
    sources: tuple[str, ...]
    count: int
    total_ns: int
    share: float  # of the device's time in commands (dispatches, copies, fills)

    @property
    def mean_ns(self) -> float:
        return self.total_ns / self.count


def chrome_trace(events: list, origin_ns: int) -> dict:
    """``{"traceEvents": [...]}`` for ``events`` (trace.Event), time 0 at ``origin_ns``."""
    processes: dict[str, int] = {"host": 1}
    threads: dict[tuple[str, str], int] = {}
    for event in events:
        process, thread = event.lane
        processes.setdefault(process, len(processes) + 1)
        threads.setdefault(event.lane, sum(lane[0] == process for lane in threads) + 1)
    out = []
    for process, pid in processes.items():
        label = process if process == "host" else f"device {process}"
        out.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                    "args": {"name": label}})
        out.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                    "args": {"sort_index": pid}})
    for (process, thread), tid in threads.items():
        out.append({"name": "thread_name", "ph": "M", "pid": processes[process], "tid": tid,
                    "args": {"name": thread}})
    spans = []
    for event in events:
        begin = max(event.begin_ns - origin_ns, 0)
        span = {"name": event.name, "cat": event.category, "ph": "X",
                "ts": begin / 1000, "dur": max(event.end_ns - origin_ns - begin, 0) / 1000,
                "pid": processes[event.lane[0]], "tid": threads[event.lane]}
        if event.args:
            span["args"] = event.args
        spans.append(span)
    spans.sort(key=lambda s: (s["pid"], s["tid"], s["ts"], -s["dur"]))
    return {"traceEvents": out + spans, "displayTimeUnit": "ns"}


def summarize(events: list) -> list[DispatchRow]:
    """Dispatch events grouped by device and kernel, most total time first."""
    busy: dict[str, int] = {}
    rows: dict[tuple[str, str], list] = {}
    for event in events:
        if event.category not in DEVICE_CATEGORIES:
            continue
        device, duration = event.lane[0], event.end_ns - event.begin_ns
        busy[device] = busy.get(device, 0) + duration
        if event.category == "dispatch":
            row = rows.setdefault((device, event.args["kernel"]),
                                  [tuple(event.args["sources"]), 0, 0])
            row[1] += 1
            row[2] += duration
    out = [DispatchRow(device, kernel, sources, count, total,
                       total / busy[device] if busy[device] else 0.0)
           for (device, kernel), (sources, count, total) in rows.items()]
    return sorted(out, key=lambda row: (-row.total_ns, row.device, row.kernel))


def format_summary(events: list, calls: dict[str, int]) -> str:
    """The summary as a table: per row total, count, mean, share of device time, the kernel's
    name and its source ops."""
    rows = summarize(events)
    traced = ", ".join(_count(count, "call") + f" of @{name}"
                       for name, count in calls.items()) or "no calls"
    lines = [f"pyree trace: {traced}; {_count(sum(r.count for r in rows), 'dispatch')}, "
             f"{_count(len(rows), 'kernel')}"]
    if not rows:
        if any(event.category == "submission" for event in events):
            lines.append("  (the device's driver does not time commands: the trace shows each "
                         "submission as a whole)")
        return "\n".join(lines)
    lines.append(f"{'total ms':>10} {'count':>7} {'mean us':>10} {'device %':>9}  "
                 f"dispatch (source ops)")
    for row in rows:
        sources = f"  [{'; '.join(row.sources)}]" if row.sources else ""
        device = f"  on {row.device}" if len({r.device for r in rows}) > 1 else ""
        lines.append(f"{row.total_ns / 1e6:>10.3f} {row.count:>7} {row.mean_ns / 1e3:>10.2f} "
                     f"{100 * row.share:>8.1f}%  {row.kernel}{sources}{device}")
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "es" if noun.endswith("h") else "s")
