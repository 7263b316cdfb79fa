"""What every test of a trace (pyree.runtime.trace, --pyree-trace) checks of the file it wrote:
valid Chrome trace-event JSON, as Perfetto and chrome://tracing read it."""

from __future__ import annotations

import json
from collections import defaultdict

from pyree.runtime.module import read_module

SLACK_US = 0.002  # JSON keeps ts/dur to the nanosecond: sums of rounded values may differ by this


def check_trace(source) -> list[dict]:
    """Checks a trace (a path or its parsed JSON) and returns its complete events: required keys,
    ``ts``/``dur`` >= 0, every lane named by metadata, events of a lane in time order, host spans
    nested or disjoint, device spans disjoint (one queue runs one command at a time)."""
    trace = json.loads(open(source).read()) if isinstance(source, str) else source
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list)
    processes, threads, spans = {}, set(), []
    for event in trace["traceEvents"]:
        assert {"name", "ph", "pid", "tid"} <= event.keys(), event
        if event["ph"] == "M":
            assert event["name"] in ("process_name", "thread_name", "process_sort_index"), event
            if event["name"] == "process_name":
                processes[event["pid"]] = event["args"]["name"]
            elif event["name"] == "thread_name":
                assert isinstance(event["args"]["name"], str) and event["args"]["name"]
                threads.add((event["pid"], event["tid"]))
            continue
        assert event["ph"] == "X", event
        assert isinstance(event["name"], str) and event["name"] and event["cat"], event
        assert isinstance(event["ts"], (int, float)) and event["ts"] >= 0, event
        assert isinstance(event["dur"], (int, float)) and event["dur"] >= 0, event
        assert (event["pid"], event["tid"]) in threads and event["pid"] in processes, event
        spans.append(event)
    lanes = defaultdict(list)
    for span in spans:
        lanes[span["pid"], span["tid"]].append(span)
    for (pid, _), lane in lanes.items():
        assert [s["ts"] for s in lane] == sorted(s["ts"] for s in lane), "out of time order"
        device = processes[pid] != "host"
        open_spans: list[dict] = []
        for span in lane:
            end = span["ts"] + span["dur"]
            while open_spans and open_spans[-1]["ts"] + open_spans[-1]["dur"] <= span["ts"] + SLACK_US:
                open_spans.pop()
            if open_spans:
                parent = open_spans[-1]
                assert not device, f"device spans overlap: {parent} and {span}"
                assert end <= parent["ts"] + parent["dur"] + SLACK_US, \
                    f"{span} starts inside {parent} but ends after it"
            open_spans.append(span)
    return spans


def device_lanes(spans: list[dict]) -> set[int]:
    return {s["pid"] for s in spans if s["cat"] in ("dispatch", "copy", "fill", "submission")}


def dispatches(spans: list[dict]) -> list[dict]:
    return [s for s in spans if s["cat"] == "dispatch"]


def dispatches_per_call(module_bytes: bytes, function: str | None = None) -> int:
    """The dispatch commands of a function without control flow (None: the module's only one):
    each runs once per call."""
    tree = read_module(module_bytes).tree
    (fn,) = [f for f in tree.functions if function is None or f.name == function]
    return sum(command.kind == 0 for command in fn.commands)


def check_summary(rows, spans: list[dict]) -> None:
    """The summary's rows add up to the dispatch events: counts, and times to the nanosecond."""
    events = dispatches(spans)
    assert sum(row.count for row in rows) == len(events)
    assert abs(sum(row.total_ns for row in rows) / 1e3 - sum(e["dur"] for e in events)) \
        <= SLACK_US * len(events) + 1e-6
    for row in rows:
        mine = [e for e in events if e["args"]["kernel"] == row.kernel]
        assert len(mine) == row.count
        assert 0 <= row.share <= 1
    assert [row.total_ns for row in rows] == sorted((row.total_ns for row in rows), reverse=True)
