"""Timed submissions (hal.h revision 4) for drivers whose work runs on streams with timing events,
CUDA's and HIP's: the driver records an event before and after each command of a traced
submission, and ``EventTimer`` turns the events into host times once the last has completed.

Events give only the time between two of them (a float of milliseconds), so the timer keeps a
reference event whose host time is known: it is recorded on a stream of its own that nothing else
uses, so it completes as soon as the device sees it, between host times noted before the record
and after its synchronize; the middle of the shortest of a few such windows is taken. A float of
milliseconds resolves ~0.25 us at 2 s from the reference, so a new one is made every
REFERENCE_EVERY_NS. A command's begin is placed from the reference and its duration measured
between its own two events, at the events' full resolution.
"""

from __future__ import annotations

import threading
import time

REFERENCE_EVERY_NS = 2_000_000_000
REFERENCE_ROUNDS = 5


class EventApi:
    """What a driver gives the timer: its native calls, each raising its HalError on failure."""

    def create(self):
        """A new event with timing enabled."""
        raise NotImplementedError

    def destroy(self, event) -> None:
        raise NotImplementedError

    def record(self, event, stream) -> None:
        raise NotImplementedError

    def synchronize(self, event) -> None:
        raise NotImplementedError

    def elapsed_ms(self, start, end) -> float:
        raise NotImplementedError

    def create_stream(self):
        raise NotImplementedError

    def destroy_stream(self, stream) -> None:
        raise NotImplementedError


class EventTiming:
    """One timed submission: ``events[2k]`` and ``events[2k + 1]`` around the command
    ``commands[k]``, against ``reference`` (event, host ns)."""

    def __init__(self, reference: tuple, events: list, commands: list[int]):
        self.reference, self.events, self.commands = reference, events, commands


class EventTimer:
    """A device's timing events (reused) and its reference event."""

    def __init__(self, api: EventApi):
        self.api = api
        self._free: list = []
        self._all: list = []                # every timing event made, destroyed at the end
        self._references: list[tuple] = []  # kept to the end: a timing may use any of them
        self._stream = None
        self._made = 0
        self._lock = threading.Lock()

    def start(self, commands: list[int]) -> EventTiming:
        """Events for a submission timing ``commands`` (record them with its commands)."""
        count = 2 * len(commands)
        with self._lock:
            reference = self._reference()
            events = self._free[len(self._free) - min(count, len(self._free)):]
            del self._free[len(self._free) - len(events):]
            made = [self.api.create() for _ in range(count - len(events))]
            self._all += made
        return EventTiming(reference, events + made, commands)

    def read(self, timing: EventTiming) -> list[tuple[int, int, int]]:
        """(command, begin ns, end ns) of each timed command, once they have run; the events
        are then reused (not after a failure: they may still be pending)."""
        api, events = self.api, timing.events
        if events:
            api.synchronize(events[-1])
        anchor, host = timing.reference
        out = []
        for k, command in enumerate(timing.commands):
            begin = host + round(api.elapsed_ms(anchor, events[2 * k]) * 1e6)
            out.append((command, begin,
                        begin + round(api.elapsed_ms(events[2 * k], events[2 * k + 1]) * 1e6)))
        self.give_back(timing)
        return out

    def give_back(self, timing: EventTiming) -> None:
        """Takes back the events of a timing never submitted, or read."""
        with self._lock:
            self._free += timing.events
        timing.events = []

    def destroy(self) -> None:
        """Once the device's work is done."""
        for event in self._all + [event for event, _ in self._references]:
            self.api.destroy(event)
        self._free, self._all, self._references = [], [], []
        if self._stream is not None:
            self.api.destroy_stream(self._stream)
            self._stream = None

    def _reference(self) -> tuple:
        now = time.monotonic_ns()
        if self._references and now - self._made < REFERENCE_EVERY_NS:
            return self._references[-1]
        api = self.api
        if self._stream is None:
            self._stream = api.create_stream()
        best = None
        for _ in range(REFERENCE_ROUNDS):
            event = api.create()
            before = time.monotonic_ns()
            api.record(event, self._stream)
            api.synchronize(event)
            after = time.monotonic_ns()
            if best is None or after - before < best[0]:
                if best is not None:
                    api.destroy(best[1])
                best = (after - before, event, (before + after) // 2)
            else:
                api.destroy(event)
        self._references.append(best[1:])
        self._made = time.monotonic_ns()
        return self._references[-1]
