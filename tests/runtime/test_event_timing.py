"""The runtime's EventTimer (hal/event_timing.py), which the CUDA and HIP drivers time traced
submissions with, over events that read the host's clock: command times land on the host's
clock, durations come from each command's own pair, events are reused and all destroyed."""

from __future__ import annotations

import time

import pytest
from pyree.runtime.hal import event_timing
from pyree.runtime.hal.event_timing import EventApi, EventTimer


class _HostEvents(EventApi):
    """Events recorded at once on the host's monotonic clock, as a stream with nothing queued."""

    def __init__(self):
        self.made, self.destroyed, self.streams = [], [], 0

    def create(self):
        event = {"ns": None}
        self.made.append(event)
        return event

    def destroy(self, event) -> None:
        self.destroyed.append(event)

    def record(self, event, stream) -> None:
        assert stream == "clock stream" or stream == "work"
        event["ns"] = time.monotonic_ns()

    def synchronize(self, event) -> None:
        assert event["ns"] is not None

    def elapsed_ms(self, start, end) -> float:
        return (end["ns"] - start["ns"]) / 1e6

    def create_stream(self):
        self.streams += 1
        return "clock stream"

    def destroy_stream(self, stream) -> None:
        self.streams -= 1


def _run(api, timing, work_s: float) -> list[tuple[int, int]]:
    """Records each command's pair around ``work_s`` of host time; returns the host spans."""
    spans = []
    for k in range(len(timing.commands)):
        begin = time.monotonic_ns()
        api.record(timing.events[2 * k], "work")
        time.sleep(work_s)
        api.record(timing.events[2 * k + 1], "work")
        spans.append((begin, time.monotonic_ns()))
    return spans


def test_command_times_land_on_the_host_clock_and_events_are_reused():
    api = _HostEvents()
    timer = EventTimer(api)
    timing = timer.start([0, 2, 5])
    assert len(timing.events) == 6 and api.streams == 1
    spans = _run(api, timing, 0.002)
    times = timer.read(timing)
    assert [command for command, _, _ in times] == [0, 2, 5]
    for (_, begin, end), (host_begin, host_end) in zip(times, spans):
        assert end - begin >= 2_000_000  # its own pair: the sleep between the records
        # placed through the reference, whose host time is known to its window's half width
        assert host_begin - 1_000_000 <= begin and end <= host_end + 1_000_000
    made = len(api.made)
    again = timer.start([1, 3, 4])
    assert len(api.made) == made  # the events of a read timing come back
    timer.give_back(again)
    timer.destroy()
    assert sorted(map(id, api.destroyed)) == sorted(map(id, api.made)) and api.streams == 0


def test_a_new_reference_is_made_once_the_last_is_old(monkeypatch):
    monkeypatch.setattr(event_timing, "REFERENCE_EVERY_NS", 0)
    api = _HostEvents()
    timer = EventTimer(api)
    first = timer.start([0])
    second = timer.start([0])
    assert first.reference is not second.reference
    for timing in (first, second):
        _run(api, timing, 0)
        ((_, begin, end),) = timer.read(timing)
        assert 0 <= end - begin < 50_000_000
    timer.destroy()
    assert len(api.destroyed) == len(api.made)


def test_a_submission_without_commands_needs_no_events():
    timer = EventTimer(_HostEvents())
    timing = timer.start([])
    assert timing.events == [] and timer.read(timing) == []


@pytest.mark.parametrize("rounds", [1, event_timing.REFERENCE_ROUNDS])
def test_the_reference_keeps_one_event_of_its_rounds(rounds, monkeypatch):
    monkeypatch.setattr(event_timing, "REFERENCE_ROUNDS", rounds)
    api = _HostEvents()
    EventTimer(api).start([])
    assert len(api.made) - len(api.destroyed) == 1
