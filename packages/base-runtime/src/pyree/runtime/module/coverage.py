"""What a call must clear so that nothing it reads or returns is memory it did not write.

Results come from a pool and the transient arena and readback area are the function's own, so
without this a call could return (or compute from) bytes of an earlier call. For each function
a must-analysis over its commands (branches included) finds the bytes of results, the transient
arena and the readback area that are written on every path before they are read, and, at the
end, before they are returned; arguments, constants and tied results (schema 1.10: the
argument's bytes when the call starts) are always defined. What is not proven
is cleared (zero-filled) when the call starts, which is harmless then: nothing has written it.

Fills and copies write their whole target. A dispatch counts as writing its ``write`` bindings'
first ``min_length`` bytes only where every executable attests the export: the CPU library's
own record of the kernel (``hal/images/cpu_library.py``) equals the module's export table, so
access, lengths and workgroup count are what the code does. Other dispatches prove nothing and
count as reading every byte of every binding: a rewritten export table could claim writes that
a shrunken grid never makes. The analysis is bounded by a work budget; past it, every byte that
is read or returned is cleared.
"""

from __future__ import annotations

from heapq import heappop, heappush

from pyree.runtime.records import Record

RESULT, TRANSIENT, READBACK = 1, 2, 4          # the BufferKinds a call owns (schema: BufferKind)
_READ, _WRITE = 0, 1                           # BindingAccess
_BUDGET = 1 << 21                              # interval steps per function before giving up


class Clear(Record):
    """Bytes [offset, offset + length) of a call's buffer (kind, index) to zero-fill first."""

    kind: int
    index: int
    offset: int
    length: int


class _OverBudget(Exception):
    pass


class _Analysis:
    def __init__(self, function, trusted: list[list | None], tensor_bytes):
        self.function = function
        self.commands = function.commands
        self.trusted = trusted      # per kernel: its binding layouts (access, min length), or None
        self.result_bytes = [tensor_bytes(t) for t in function.results]
        self.work, self.limit = 0, _BUDGET

    # -- interval sets: sorted tuples of disjoint (start, end) ------------------------------

    def _spend(self, amount: int) -> None:
        self.work += amount
        if self.work > self.limit:
            raise _OverBudget

    def union(self, spans: tuple, start: int, end: int) -> tuple:
        self._spend(len(spans) + 1)
        out = []
        for s, e in spans:
            if e < start or s > end:
                out.append((s, e))
            else:
                start, end = min(s, start), max(e, end)
        out.append((start, end))
        return tuple(sorted(out))

    def intersect(self, a: tuple, b: tuple) -> tuple:
        if a == b:
            return a
        self._spend(len(a) + len(b))
        out, i, j = [], 0, 0
        while i < len(a) and j < len(b):
            s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
            if s < e:
                out.append((s, e))
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        return tuple(out)

    def missing(self, spans: tuple, start: int, end: int) -> list[tuple[int, int]]:
        self._spend(len(spans) + 1)
        out = []
        for s, e in spans:
            if s > start:
                out.append((start, min(s, end)))
            start = max(start, e)
            if start >= end:
                return out
        return out + [(start, end)] if start < end else out

    # -- the commands' reads and writes -------------------------------------------------------

    def accesses(self, command) -> tuple[list, list]:
        """(reads, writes) of a command, each a list of (BufferRef, length)."""
        kind = command.kind
        if kind == 0:
            d = command.dispatch
            layouts = self.trusted[d.kernel]
            if layouts is None:
                return [(ref, ref.length) for ref in d.bindings], []
            reads = [(ref, n) for ref, (access, n) in zip(d.bindings, layouts) if access != _WRITE]
            writes = [(ref, n) for ref, (access, n) in zip(d.bindings, layouts) if access == _WRITE]
            return reads, writes
        if kind == 1:
            c = command.copy
            return [(c.source, c.source.length)], [(c.target, c.target.length)]
        if kind == 2:
            return [], [(command.fill.target, command.fill.target.length)]
        if kind == 4:
            c = command.check
            refs = [c.lhs] if c.rhs is None or c.kind < 3 else [c.lhs, c.rhs]
            return [(ref, ref.length) for ref in refs], []
        if kind == 5 and command.branch.condition is not None:
            return [(command.branch.condition, command.branch.condition.length)], []
        return [], []

    def successors(self, i: int) -> tuple[int, ...]:
        command = self.commands[i]
        if command.kind == 5:
            branch = command.branch
            return (branch.target,) if branch.condition is None else (i + 1, branch.target)
        return (i + 1,)

    # -- the analysis ---------------------------------------------------------------------------

    def defined_before(self) -> list[dict | None]:
        """Per command (and the end), the bytes written on every path to it; None: unreached.
        A worklist in command order: a command is looked at again only when what reaches it
        shrank, so straight-line code takes one pass and each loop a few."""
        n = len(self.commands)
        writes = [[((ref.kind, ref.index if ref.kind == RESULT else 0), ref.offset, length)
                   for ref, length in self.accesses(c)[1]
                   if ref.kind in (RESULT, TRANSIENT, READBACK) and length]
                  for c in self.commands]
        state: list[dict | None] = [None] * (n + 1)
        # a tied result holds its argument's bytes when the call starts
        state[0] = {(RESULT, r): ((0, self.result_bytes[r]),)
                    for r in getattr(self.function, "ties", {}) if self.result_bytes[r]}
        work, queued = [0], {0}
        while work:
            i = heappop(work)
            queued.discard(i)
            self._spend(1)
            if i == n:
                continue
            after = state[i]
            if writes[i]:
                after = dict(after)
                for key, offset, length in writes[i]:
                    after[key] = self.union(after.get(key, ()), offset, offset + length)
            for s in self.successors(i):
                old = state[s]
                new = after if old is None else {
                    key: spans for key in old.keys() & after.keys()
                    if (spans := self.intersect(old[key], after[key]))}
                if new != old:
                    state[s] = new
                    if s not in queued:
                        heappush(work, s)
                        queued.add(s)
        return state

    def clears(self) -> list[Clear]:
        try:
            state = self.defined_before()
        except _OverBudget:
            self.limit = float("inf")   # against empty sets: linear in the commands
            state = [{}] * (len(self.commands) + 1)
        need: dict[tuple[int, int], list] = {}

        def require(key, spans: tuple, start: int, end: int) -> None:
            for s, e in self.missing(spans, start, end):
                low, high = need.get(key, (s, e))
                need[key] = (min(low, s), max(high, e))

        for i, command in enumerate(self.commands):
            if state[i] is None:
                continue
            for ref, length in self.accesses(command)[0]:
                if ref.kind in (RESULT, TRANSIENT, READBACK) and length:
                    key = (ref.kind, ref.index if ref.kind == RESULT else 0)
                    require(key, state[i].get(key, ()), ref.offset, ref.offset + length)
        end = state[len(self.commands)]
        if end is not None:
            for r, size in enumerate(self.result_bytes):
                if size:
                    require((RESULT, r), end.get((RESULT, r), ()), 0, size)
        return [self.widened(kind, index, start, stop) for (kind, index), (start, stop)
                in sorted(need.items())]

    def widened(self, kind: int, index: int, start: int, stop: int) -> Clear:
        """The clear of [start, stop) widened to 4-byte words (the verifier rounds allocations
        to them): a Vulkan fill takes only those, and clearing more at the start of a call
        costs nothing."""
        size = {RESULT: lambda: self.function.resultSizes[index],
                TRANSIENT: lambda: self.function.transientSize,
                READBACK: lambda: self.function.readbackSize}[kind]()
        start, wide = start - start % 4, stop + -stop % 4
        return Clear(kind, index, start, (wide if wide <= size else stop) - start)


def clears(function, trusted: list[list | None], tensor_bytes) -> list[Clear]:
    """The zero-fills a call of ``function`` (verified) runs first. ``trusted``: per kernel,
    its binding layouts as (access, min length) where every executable attests them, else
    None; ``tensor_bytes(t)``: the bytes of a TensorType."""
    return _Analysis(function, trusted, tensor_bytes).clears()
