"""Gathers whose indices turn out affine in the loops become Loads: indices computed from
constants alone, or written with steps that are no-ops over the loop box.

torch exports index arithmetic on constant index tensors as gathers: MobileNet v2 behind an NHWC
wrapper reads ``x[i0[c], i1[c], i2[c], i3[c]]`` with each index an i64 constant (behind
negative-index wraparound selects) that is really ``(0, c, 0, 0)``; a scatter_reduce's source
and indices come through a copy gathered at ``i % 100000`` over ``i < 100000``. As a Gather such
an op is a dispatch of its own, since fusion never inlines a producer into a Gather's source; as
a Load it fuses like any other access. An index whose every step ``kernel.affine_of`` proves a
no-op (a remainder of a value below the divisor, a wrap that never happens, a cast that keeps
every value) is rewritten symbolically at any size; one that reads constants is evaluated over
the whole loop box at compile time (clamped, as a Gather clamps) and kept only where one affine
map reproduces it at every point.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from pyree.compiler.flow.constant_folding import record_constant
from pyree.compiler.flow.rewrite import drop_unread, transform
from pyree.compiler.kernel import (
    DTYPES,
    Acc,
    AffineExpr,
    Binding,
    Expr,
    Final,
    Gather,
    Kernel,
    Load,
    Result,
    affine_of,
    affine_range,
    evaluate,
    walk,
)
from pyree.compiler.sizes import static_shape
from pyree.compiler.tensor_program import Function, Generic, Value

MAX_POINTS = 1 << 14  # the index is evaluated one point at a time (kernel.evaluate)


def fold_constant_gathers(function: Function) -> Function:
    known: dict[Value, np.ndarray] = {}
    ops = []
    for op in function.ops:
        if record_constant(op, known):
            pass
        elif isinstance(op, Generic):
            folded = _fold(op, known)
            op = op if folded is op else drop_unread(folded)
        ops.append(op)
    return dataclasses.replace(function, ops=ops)


def _fold(op: Generic, known: dict[Value, np.ndarray]) -> Generic:
    """A Generic whose loop box holds run-time sizes is left as it is: its index cannot be
    evaluated over a box of unknown extent."""
    if not static_shape(op.loop_ranges) or not 0 < math.prod(op.loop_ranges):
        return op
    changed = False
    evaluated = math.prod(op.loop_ranges) <= MAX_POINTS

    def leaf(e: Expr) -> Expr | None:
        nonlocal changed
        if not isinstance(e, Gather):
            return None
        index = _symbolic_index(op, e)
        if index is None and evaluated and all(_constant(op, x, known) for ix in e.index
                                               for x in walk(ix)):
            index = _affine_index(op, e, known)
        if index is None:
            return None
        changed = True
        return Load(e.binding, index, e.dtype)

    def go(e):
        return None if e is None else transform(e, leaf)

    outputs = tuple(dataclasses.replace(r, value=go(r.value), init=go(r.init), epilogue=go(r.epilogue))
                    for r in op.outputs)
    return dataclasses.replace(op, outputs=outputs) if changed else op


def _constant(op: Generic, e: Expr, known: dict[Value, np.ndarray]) -> bool:
    """Whether ``e`` is computable at compile time: no accumulators, other results' final values
    (an epilogue's) or gathers, and every load reads a constant inside its bounds (numpy would
    wrap a negative index silently)."""
    if isinstance(e, (Acc, Final, Gather)):
        return False
    if not isinstance(e, Load):
        return True
    if op.inputs[e.binding] not in known:
        return False
    for ix, n in zip(e.index, op.inputs[e.binding].shape):
        lo, hi = affine_range(ix, op.loop_ranges)
        if lo < 0 or hi >= n:
            return False
    return True


def _symbolic_index(op: Generic, g: Gather) -> tuple[AffineExpr, ...] | None:
    """``g``'s index as one affine map per dim (``kernel.affine_of``), where each stays inside
    its dim over the whole loop box (so the Gather's clamp never acts), or None."""
    shape = op.inputs[g.binding].shape
    if not static_shape(shape):
        return None
    index = tuple(affine_of(ix, op.loop_ranges) for ix in g.index)
    if any(ix is None for ix in index) or not all(
            0 <= lo and hi < n for ix, n in zip(index, shape)
            for lo, hi in [affine_range(ix, op.loop_ranges)]):
        return None
    return index


def _affine_index(op: Generic, g: Gather, known: dict[Value, np.ndarray]) -> tuple[AffineExpr, ...] | None:
    """``g``'s clamped index as one affine map per dim over the loops, or None."""
    ranges = op.loop_ranges
    if not static_shape(op.inputs[g.binding].shape):
        return None  # the index is clamped into dims known per call only
    n = len(ranges)
    identity = tuple(AffineExpr(tuple(int(k == d) for k in range(n))) for d in range(n))
    base = len(op.inputs)
    kernel = Kernel("gather_index", ranges, n,
                    tuple(Binding(v.dtype, v.shape, "read") for v in op.inputs)
                    + tuple(Binding(ix.dtype, ranges, "write") for ix in g.index),
                    tuple(Result(base + d, identity, ix) for d, ix in enumerate(g.index)))
    outs = [np.zeros(ranges, DTYPES[ix.dtype]) for ix in g.index]
    evaluate(kernel, [known.get(v) for v in op.inputs] + outs)
    grid = np.indices(ranges)
    index = []
    for values, size in zip(outs, op.inputs[g.binding].shape):
        at = np.array([min(max(int(v), 0), size - 1) for v in values.ravel()]).reshape(ranges)
        origin = int(at[(0,) * n])
        coeffs = tuple(int(at[tuple(int(k == d) for k in range(n))]) - origin if ranges[d] > 1 else 0
                       for d in range(n))
        fitted = sum((c * grid[d] for d, c in enumerate(coeffs)), np.full(ranges, origin))
        if not np.array_equal(fitted, at):
            return None
        index.append(AffineExpr(coeffs, origin))
    return tuple(index)
