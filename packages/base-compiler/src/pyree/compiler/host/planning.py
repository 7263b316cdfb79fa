"""Buffer planning: where every tensor value of a function lives while the function runs.

Arguments and constants live in their own buffers. A value returned by the function is computed
straight into that result's allocation, and so is a value it returns reshaped (``_Reshapes``).
Every other computed value gets a range of one transient arena, reused once the value is dead
(first fit, 64-byte aligned, live from the step first touching it to the last step reading it
or any view of it, in the linearized program order; a value live into a loop and used in it
stays live to the loop's end). Views share their source's bytes. All of this is decided here
and the runtime only allocates the arena and the results.
A value sized at run time (a ``Size``) gets a range of its own after the reused ones, at an
offset that is a size expression, so the runtime computes the arena's size per call; such
ranges are not reused (that would need the runtime to compare sizes it only knows per call),
except by the versions of size-chosen Ifs, only one of which runs per call (``_Versions``).
A scatter's result (``kernel.Scatter``) starts as a copy of its original; where the original
is a value this function computes (a dispatch's result or a fill) that nothing reads later,
the scatter works in the original's bytes instead (``in_place``), and no copy is made. Where the
original is an argument that nothing reads later and the scatter's result is returned, the
result is *tied* to the argument (``ties``): the host program makes no copy, and the runtime
starts the result as the argument's bytes, its own buffer where the caller donates it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyree.compiler.host.linearize import Branch, Copy, Label, Step
from pyree.compiler.kernel import Gather, Load, result_nodes
from pyree.compiler.sizes import Size, align_up, code, compare, opaque, select
from pyree.compiler.tensor_program import (
    ALIGNMENT,
    Check,
    Constant,
    Function,
    Generic,
    Value,
    View,
    defined_by,
    read_by,
)


@dataclass(frozen=True)
class Storage:
    kind: str  # "argument" | "result" | "transient" | "constant"
    index: int
    offset: int | Size


@dataclass
class Plan:
    storage: dict[Value, Storage] = field(default_factory=dict)
    transient_size: int | Size = 0
    result_sizes: list = field(default_factory=list)  # ints, or Sizes
    # Results whose value lives elsewhere (an argument, a constant, a view, a value returned
    # twice): (result index, value) pairs that need a copy into the result allocation at the end.
    result_copies: list[tuple[int, Value]] = field(default_factory=list)
    # result index -> the argument index it is tied to (schema 1.10, ``ties``)
    tied: dict[int, int] = field(default_factory=dict)


def plan_function(function: Function, steps: list[Step], constant_index: dict[Value, int]) -> Plan:
    """Storage for every value of ``function``, whose program order is ``steps``
    (``host/linearize.py``)."""
    plan = Plan(result_sizes=[v.num_bytes for v in function.results])
    for i, arg in enumerate(function.arguments):
        plan.storage[arg] = Storage("argument", i, 0)
    written = {v for step in steps for v in _written(step)}
    made = _makers(steps)
    pins = _pins(steps, made)
    reshaped = _Reshapes(steps, pins)
    for r, value in enumerate(function.results):
        if value in written and value not in plan.storage and value not in constant_index:
            plan.storage[value] = Storage("result", r, 0)
            continue
        source = reshaped.source(value)
        if source is not None and source not in plan.storage and source not in function.results:
            plan.storage[source] = Storage("result", r, 0)  # the views follow it (below)
        else:
            plan.result_copies.append((r, value))
    deferred: list[Value] = []  # pinned values: placed where the value they make is
    aliases = in_place(function, steps, written)
    # a function result's bytes are its original's too (last first: down a chain of scatters)
    for result, original in reversed(aliases.items()):
        if result in plan.storage:
            plan.storage[original] = plan.storage[result]
    last = _last_uses(function, steps, aliases)
    live: list[tuple[int, int, Value]] = []  # (offset, size, value) of live arena ranges
    run_time: list = []  # transients sized at run time (and views of them), placed last
    for position, step in enumerate(steps):
        live = [block for block in live if last[block[2]] >= position]
        for value in _defined(step):
            if value in plan.storage:
                continue
            if value in pins:
                deferred.append(value)
            elif value in constant_index:
                plan.storage[value] = Storage("constant", constant_index[value], 0)
            elif value in aliases:
                plan.storage[value] = plan.storage[aliases[value]]
            elif isinstance(step, View) and step.source in plan.storage:
                source = plan.storage[step.source]
                plan.storage[value] = Storage(source.kind, source.index, source.offset + step.byte_offset)
            elif isinstance(step, View) or isinstance(value.num_bytes, Size):
                run_time.append((position, step if isinstance(step, View) else value))
            else:
                offset = _first_fit(live, value.num_bytes)
                live.append((offset, value.num_bytes, value))
                plan.storage[value] = Storage("transient", 0, offset)
                plan.transient_size = max(plan.transient_size, offset + value.num_bytes)
    plan.tied = ties(function, steps, plan)
    offset = _align(plan.transient_size)
    versions = _Versions(steps)
    # Values several steps make (a size-chosen If's results) outlive the If: placed first;
    # then every other value outside the versions; last the versions' own values, in one area
    # that every such If's versions share (_Versions).
    def order(entry) -> int:
        position, item = entry
        if versions.any and len(made[item.result if isinstance(item, View) else item]) > 1:
            return 0
        return 2 if position in versions.inside else 1

    for position, item in sorted(run_time, key=order):  # (stable: program order in each)
        if order((position, item)) == 2:
            offset = versions.at(position, offset)
        if isinstance(item, View) and item.source in pins:
            if item.result in plan.storage:
                continue
            item = item.result  # the made value, placed here; what makes it follows (below)
        if isinstance(item, View):
            source = plan.storage[item.source]
            plan.storage[item.result] = Storage(source.kind, source.index,
                                                source.offset + item.byte_offset)
            continue
        if item in plan.storage:  # (made again by a later version)
            continue
        plan.storage[item] = Storage("transient", 0, offset)
        # offset is aligned already: aligning the size alone keeps each offset a sum of
        # aligned sizes, like terms merged, instead of an atom nesting every one before it
        # (GPT-2's prefill: 1172 program entries, past the runtime's 1024)
        offset = offset + align_up(item.num_bytes, ALIGNMENT)
    offset = versions.end(offset)
    if run_time:
        plan.transient_size = offset
    for value in deferred:
        made = pins[value]
        while made not in plan.storage:
            made = pins[made]
        plan.storage[value] = plan.storage[made]
    return plan


# The versions' area ends past the longest of the Ifs' versions (a run-time max of their sizes),
# while that size's program stays this short; past it, at their sum, which is a polynomial of
# bounded length (a model of many unlike Ifs would otherwise nest one max per If, and a SizeExpr
# holds at most 1024 entries).
MOST_AREA_CODE = 256


class _Versions:
    """The run-time ranges of size-chosen Ifs' versions (flow/versions.py): one version of an
    If runs per call and its values die with the If (its results aside, placed before), so
    every version of every such If starts at one place, ``start`` (the offset when the first
    is placed), and the area ends past the longest. A sum of the versions' sizes, as values
    outside them are placed, would hold and clear bytes no call uses."""

    def __init__(self, steps: list[Step]):
        self.steps = steps
        self.any = any(isinstance(s, Branch) and s.by_size for s in steps)
        # an If's end: where the jump at the end of its first version lands
        self.ends = {id(s.target) for s in steps
                     if isinstance(s, Branch) and s.by_size and s.condition is None}
        self.inside: set[int] = set()  # the positions within some If's versions
        depth = 0
        for position, step in enumerate(steps):
            if isinstance(step, Branch) and step.by_size and step.condition is not None:
                depth += 1
            elif isinstance(step, Label) and id(step) in self.ends:
                depth -= 1
            if depth:
                self.inside.add(position)
        self.done = 0       # steps seen
        self.open: list[dict] = []
        self.start = self.furthest = None

    def at(self, position: int, offset):
        """Where the next value of the versions goes, ``offset`` being where the last ended:
        moved by the If boundaries among the steps before ``position``."""
        if self.start is None:
            self.start = self.furthest = offset
        for step in self.steps[self.done:position]:
            if isinstance(step, Branch) and step.by_size and step.condition is not None:
                if not self.open:
                    offset = self.start
                self.open.append({"base": offset, "otherwise": step.target, "then": None,
                                  "condition": step.condition})
            elif isinstance(step, Label) and step.by_size and self.open:
                top = self.open[-1]
                if step is top["otherwise"]:
                    top["then"], offset = offset - top["base"], top["base"]
                elif top["then"] is not None and id(step) in self.ends:
                    # what the version the call takes needs (the first where the condition holds)
                    offset = top["base"] + select(top["condition"], top["then"],
                                                  offset - top["base"])
                    self.open.pop()
                    if not self.open:
                        longest = _longest(self.furthest - self.start, offset - self.start)
                        self.furthest = self.start + (
                            longest if len(code(longest, _NAMES)) <= MOST_AREA_CODE
                            else self.furthest - self.start + offset - self.start)
        self.done = max(self.done, position)
        return offset

    def end(self, offset):
        """The end of the run-time area: past the versions' area where there is one."""
        if self.start is None:
            return offset
        self.at(len(self.steps), offset)
        return self.furthest


class _Names(dict):
    """Any symbol's number (0): what a size's program length is measured with."""

    def __missing__(self, key):
        return 0


_NAMES = _Names()


def _longest(a, b):
    """The larger of two sizes: the one proven larger, else their run-time ``max``."""
    held = compare("le", a, b)
    return (b if held else a) if isinstance(held, bool) else opaque("max", a, b)


def _makers(steps: list[Step]) -> dict[Value, set[int]]:
    """The steps that make each value (a loop's rotated steps repeat: the same step twice)."""
    makers: dict[Value, set[int]] = {}
    for step in steps:
        for value in _defined(step):
            makers.setdefault(value, set()).add(id(step))
    return makers


def _pins(steps: list[Step], makers: dict[Value, set[int]]) -> dict[Value, Value]:
    """{value: the value it makes through a view}, where that one is made by several steps:
    a size-chosen If's result, which each of its versions makes (flow/versions.py), one
    through a view of what it computes (its loops collapsed, say). Each such value is computed
    in the bytes of the result, as the other versions' are: the view's source follows it."""
    return {step.source: step.result for step in steps
            if isinstance(step, View) and len(makers[step.result]) > 1
            and isinstance(step.byte_offset, int) and step.byte_offset == 0}


class _Reshapes:
    """A result that views all of one value's bytes (a reshape, or a chain of them: no offset,
    no fewer bytes) of a value that only dispatches compute: that value is computed straight
    into the result's allocation, as a result itself is, instead of into the arena and copied
    at the end. The flow's collapsed loops end many programs so (a model's logits, reshaped
    back from the rows its last matmul wrote; a split product's fold, written flat): a
    transformer's call ended with a copy of its logits, a 1024^3 split matmul's with a 4 MiB
    copy (2.6 us on the H200)."""

    def __init__(self, steps: list[Step], pins: dict[Value, Value]):
        self.views = {step.result: step for step in steps if isinstance(step, View)}
        dispatched = {v for step in steps if isinstance(step, Generic) for v in step.results}
        self.dispatched = dispatched - {v for step in steps if not isinstance(step, Generic)
                                        for v in _defined(step)} - set(pins)

    def source(self, value: Value) -> Value | None:
        """The dispatched value whose bytes ``value`` views whole, or None."""
        if value not in self.views:
            return None
        while value in self.views:
            view = self.views[value]
            if not (isinstance(view.byte_offset, int) and view.byte_offset == 0) \
                    or view.source.num_bytes != view.result.num_bytes:
                return None
            value = view.source
        return value if value in self.dispatched else None


def in_place(function: Function, steps: list[Step], written: set[Value]) -> dict[Value, Value]:
    """{scatter result: its original} for each scatter whose original is a value of static
    size that a step of this function writes (no argument, constant or view), that is no
    function result and that nothing uses after the scatter: the scatter updates it in place."""
    last = _last_uses(function, steps)
    views = {s.result for s in steps if isinstance(s, View)} | {
        s.source for s in steps if isinstance(s, View)}
    aliases = {}
    for position, step in enumerate(steps):
        if not isinstance(step, Generic):
            continue
        for r in step.outputs:
            if r.scatter is None:
                continue
            original = step.inputs[r.scatter.start]
            if original in written and original not in views and last[original] == position \
                    and original not in function.results and not _reads_original(step, r) \
                    and not isinstance(original.num_bytes, Size):
                aliases[step.results[r.binding]] = original
    return aliases


def ties(function: Function, steps: list[Step], plan: Plan) -> dict[int, int]:
    """{result: argument} for each scatter whose original is an argument that no step reads
    after it (nor returns), and whose result is returned as computed (a top-level value in
    its result's allocation): the result may start as the argument's own bytes."""
    last = _last_uses(function, steps)
    arguments = {v: i for i, v in enumerate(function.arguments)}
    out: dict[int, int] = {}
    for position, step in enumerate(steps):
        if not isinstance(step, Generic):
            continue
        for r in step.outputs:
            if r.scatter is None:
                continue
            original, result = step.inputs[r.scatter.start], step.results[r.binding]
            a = arguments.get(original)
            if a is None or a in out.values() or original in function.results \
                    or last.get(original, -1) > position or function.results.count(result) != 1 \
                    or _reads_original(step, r) \
                    or original.shape != result.shape or original.dtype != result.dtype:
                continue
            index = function.results.index(result)
            if plan.storage.get(result) == Storage("result", index, 0):
                out[index] = a
    return out


def _reads_original(step: Generic, r) -> bool:
    """Whether a scatter reads its original other than as its starting value: as another
    input, or through loads of that one binding (a fused producer's read of it, the inputs
    deduplicated): in the original's own bytes those reads would see the scatter's stores."""
    start = r.scatter.start
    original = step.inputs[start]
    return original in step.inputs[:start] + step.inputs[start + 1:] or any(
        isinstance(e, (Load, Gather)) and e.binding == start
        for out in step.outputs for e in result_nodes(out))


def _written(step: Step) -> list[Value]:
    """Values a command writes (a dispatch, a fill for a splat, a copy)."""
    if isinstance(step, Generic):
        return list(step.results)
    if isinstance(step, Constant) and step.splat is not None:
        return [step.result]
    if isinstance(step, Copy):
        return [step.target]
    return []


def _defined(step: Step) -> list[Value]:
    if isinstance(step, Copy):
        return [step.target]
    if isinstance(step, (Generic, Constant, View)):
        return defined_by(step)
    return []


def _touched(step: Step) -> list[Value]:
    if isinstance(step, Copy):
        return [step.source, step.target]
    if isinstance(step, Branch):
        return [step.condition] if isinstance(step.condition, Value) else []
    if isinstance(step, (Generic, Constant, View, Check)):
        return read_by(step) + defined_by(step)
    return []


def _last_uses(function: Function, steps: list[Step],
               aliases: dict[Value, Value] | None = None) -> dict[Value, int]:
    """The last position where each value's bytes are used, a view's uses (and an in-place
    scatter's, ``aliases``) counting for its source's. A value used inside a loop that it was
    live into stays live to the loop's end: the next iteration reads it again."""
    root: dict[Value, Value] = {}
    aliases = aliases or {}
    for step in steps:
        if isinstance(step, View):
            root[step.result] = root.get(step.source, step.source)
        for value in _defined(step):
            if value in aliases:
                root[value] = root.get(aliases[value], aliases[value])
    first: dict[Value, int] = {}
    last: dict[Value, int] = {}
    for position, step in enumerate(steps):
        for v in _touched(step):
            v = root.get(v, v)
            first.setdefault(v, position)
            last[v] = position
    for v in function.results:
        last[root.get(v, v)] = len(steps)
    labels = {step: position for position, step in enumerate(steps) if isinstance(step, Label)}
    loops = [(labels[step.target], position) for position, step in enumerate(steps)
             if isinstance(step, Branch) and labels[step.target] < position]
    for begin, end in loops:
        for v, at in first.items():
            if at < begin <= last[v]:
                last[v] = max(last[v], end)
    return {**last, **{v: last[r] for v, r in root.items() if r in last}}


def _first_fit(live: list[tuple[int, int, Value]], size: int) -> int:
    offset = 0
    for start, length, _ in sorted(live, key=lambda b: b[0]):
        if offset + size <= start:
            break
        offset = max(offset, _align(start + length))
    return offset


def _align(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT
