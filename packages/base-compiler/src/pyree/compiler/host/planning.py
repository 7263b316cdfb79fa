"""Buffer planning: where every tensor value of a function lives while the function runs.

Arguments and constants live in their own buffers. A value returned by the function is computed
straight into that result's allocation. Every other computed value gets a range of one transient
arena, reused once the value is dead (first fit, 64-byte aligned, live from the op defining it to
the last op reading it or any view of it). Views share their source's bytes. Shapes are static,
so all of this is decided here and the runtime only allocates the arena and the results.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyree.compiler.flow.tensor_program import Check, Constant, Function, Generic, Op, Value, View

ALIGNMENT = 64


@dataclass(frozen=True)
class Storage:
    kind: str  # "argument" | "result" | "transient" | "constant"
    index: int
    offset: int


@dataclass
class Plan:
    storage: dict[Value, Storage] = field(default_factory=dict)
    transient_size: int = 0
    result_sizes: list[int] = field(default_factory=list)
    # Results whose value lives elsewhere (an argument, a constant, a view, a value returned
    # twice): (result index, value) pairs that need a copy into the result allocation at the end.
    result_copies: list[tuple[int, Value]] = field(default_factory=list)


def plan_function(function: Function, constant_index: dict[Value, int]) -> Plan:
    plan = Plan(result_sizes=[v.num_bytes for v in function.results])
    for i, arg in enumerate(function.arguments):
        plan.storage[arg] = Storage("argument", i, 0)
    written = {v for op in function.ops if _writes(op) for v in _defined(op)}
    for r, value in enumerate(function.results):
        if value in written and value not in plan.storage and value not in constant_index:
            plan.storage[value] = Storage("result", r, 0)
        else:
            plan.result_copies.append((r, value))
    last_use = _last_uses(function)
    live: list[tuple[int, int, Value]] = []  # (offset, size, value) of live arena ranges
    for position, op in enumerate(function.ops):
        live = [block for block in live if last_use.get(block[2], -1) >= position]
        for value in _defined(op):
            if value in plan.storage:
                continue
            if value in constant_index:
                plan.storage[value] = Storage("constant", constant_index[value], 0)
            elif isinstance(op, View):
                source = plan.storage[op.source]
                plan.storage[value] = Storage(source.kind, source.index, source.offset + op.byte_offset)
            else:
                offset = _first_fit(live, value.num_bytes)
                live.append((offset, value.num_bytes, value))
                plan.storage[value] = Storage("transient", 0, offset)
                plan.transient_size = max(plan.transient_size, offset + value.num_bytes)
    return plan


def _writes(op: Op) -> bool:
    """Ops that become a command writing their result (a dispatch, or a fill for a splat)."""
    return isinstance(op, Generic) or (isinstance(op, Constant) and op.data is None)


def _defined(op: Op) -> list[Value]:
    if isinstance(op, Generic):
        return list(op.results)
    if isinstance(op, (Constant, View)):
        return [op.result]
    return []


def _read(op: Op) -> list[Value]:
    if isinstance(op, Generic):
        return list(op.inputs)
    if isinstance(op, View):
        return [op.source]
    if isinstance(op, Check):
        return [v for v in (op.lhs, op.rhs) if v is not None]
    return []


def _last_uses(function: Function) -> dict[Value, int]:
    """Position of the last op reading each value, a view's readers counting for its source."""
    root: dict[Value, Value] = {}
    for op in function.ops:
        if isinstance(op, View):
            root[op.result] = root.get(op.source, op.source)
    end = len(function.ops)
    last: dict[Value, int] = {}
    for position, op in enumerate(function.ops):
        for v in _read(op):
            last[root.get(v, v)] = position
    for v in function.results:
        last[root.get(v, v)] = end
    return last


def _first_fit(live: list[tuple[int, int, Value]], size: int) -> int:
    offset = 0
    for start, length, _ in sorted(live, key=lambda b: b[0]):
        if offset + size <= start:
            break
        offset = max(offset, _align(start + length))
    return offset


def _align(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT
