"""Merging adjacent loops of a reduction Generic into one, with free reshapes of its operands.

The contraction templates of every backend want one m loop, one n loop and one reduction loop. A
convolution's GEMM after ``rewrite_convolutions`` still loops over (oh, ow) and a contraction may
reduce over two adjacent dims; both are one loop wherever every access allows it: loops d and d+1
(both parallel or both reduction) merge when each access either ignores both or indexes two
adjacent dims with exactly ``d`` and ``d+1`` over their whole extents. Such an operand is read
through a ``View`` with those dims merged, and a merged result is written to a collapsed value
that a ``View`` expands back, so nothing moves. Run after fusion, so epilogues and producers have
already joined the region and their accesses are checked too.
"""

from __future__ import annotations

import dataclasses

from pyree.compiler.kernel import (
    AffineExpr,
    Gather,
    Load,
    LoopIndex,
    merge_loop,
    merge_loop_ranges,
    result_nodes,
)
from pyree.compiler.tensor_program import Function, Generic, Op, Value, View, is_line_walk, is_scatter

BLOCKED = -1


def collapse_reductions(function: Function) -> Function:
    """``function`` with every Generic's loops merged where ``collapse_loops`` allows."""
    return dataclasses.replace(function, ops=[
        new for op in function.ops for new in (collapse_loops(op) if isinstance(op, Generic) else [op])])


def collapse_loops(op: Generic) -> list[Op]:
    """``[op]``, or views of its inputs, the collapsed op and views of its results."""
    if op.num_parallel == len(op.loop_ranges) or is_scatter(op) or is_line_walk(op):
        return [op]
    current = op
    d = 0
    while d < len(current.loop_ranges) - 1:
        merged = _merge(current, d)
        if merged is None:
            d += 1
        else:
            current = merged
    if current is op:
        return [op]
    before = [View(new, old, location=op.location)
              for old, new in zip(op.inputs, current.inputs) if new is not old]
    after = [View(old, new, location=op.location)
             for old, new in zip(op.results, current.results) if new is not old]
    return before + [current] + after


def _merge(op: Generic, d: int) -> Generic | None:
    np_, ranges = op.num_parallel, op.loop_ranges
    if (d < np_) != (d + 1 < np_):
        return None
    exprs = [e for r in op.outputs for e in result_nodes(r)]
    if any(isinstance(e, LoopIndex) and e.dim in (d, d + 1) for e in exprs):
        return None
    loads: dict[int, set[Load]] = {j: set() for j in range(len(op.inputs))}
    for e in exprs:
        if isinstance(e, Load):
            loads[e.binding].add(e)
    gathered = {e.binding for e in exprs if isinstance(e, Gather)}
    in_dims = []
    for j, value in enumerate(op.inputs):
        where = {_position(ld.index, value.shape, d, ranges) for ld in loads[j]}
        if len(where) > 1 or BLOCKED in where or (j in gathered and where - {None}):
            return None  # a Gather's computed index keeps its binding's shape
        in_dims.append(where.pop() if where else None)
    out_dims = []
    for r in op.outputs:
        where = _position(r.index, op.results[r.binding].shape, d, ranges)
        if where == BLOCKED:
            return None
        out_dims.append((r.binding, where))

    result_dim = dict(out_dims)
    outputs = tuple(merge_loop(r, d, in_dims.__getitem__, result_dim[r.binding]) for r in op.outputs)
    inputs = [_collapsed(v, at, "v") for v, at in zip(op.inputs, in_dims)]
    results = [_collapsed(v, result_dim.get(k), "c") for k, v in enumerate(op.results)]
    loop_ranges, num_parallel = merge_loop_ranges(ranges, np_, d)
    return dataclasses.replace(op, inputs=inputs, results=results, outputs=outputs,
                               loop_ranges=loop_ranges, num_parallel=num_parallel)


def _position(index: tuple[AffineExpr, ...], shape: tuple[int, ...], d: int, ranges) -> int | None:
    """None: the access ignores loops d, d+1; i: dims i, i+1 are exactly d, d+1 over their whole
    extents and nothing else uses them; BLOCKED: neither, so the loops cannot merge."""
    users = [i for i, ix in enumerate(index) if ix.coeffs[d] != 0 or ix.coeffs[d + 1] != 0]
    if not users:
        return None
    if len(users) != 2 or users[1] != users[0] + 1:
        return BLOCKED
    i = users[0]
    exact = all(index[i + k] == AffineExpr(tuple(int(j == d + k) for j in range(len(ranges))))
                for k in (0, 1))
    if not exact or shape[i] != ranges[d] or shape[i + 1] != ranges[d + 1]:
        return BLOCKED
    return i


def _collapsed(value: Value, at: int | None, suffix: str) -> Value:
    if at is None:
        return value
    shape = value.shape[:at] + (value.shape[at] * value.shape[at + 1],) + value.shape[at + 2:]
    return Value(value.dtype, shape, f"{value.name}_{suffix}" if value.name else "")
