"""A returned argument with a window written into it, as a scatter of the window alone.

``tensor.insert_slice`` at a run-time offset and ``stablehlo.dynamic_update_slice`` lower to a
Generic over the whole destination: ``select(inside the window, the update, dest)``. Where the
destination is an argument of the function and the result is returned (a language model's KV
cache: ``cache.slice_scatter(new, 3, position, position + 1)``, JAX's
``lax.dynamic_update_slice`` of a carried cache), that kernel reads and writes every element to
change a few rows. Here it becomes a scatter (``kernel.Scatter``) over the window: each point
``j`` stores the update's element at ``lo + j``; the result starts as the argument
(``host/planning.py``: a copy, or the argument's own buffer where the caller donates it, which
is what ties a result to an argument in the module, schema 1.10). The places ``lo + j`` are
distinct, so each is a plain store (of any dtype, on every target: no atomics), and one that
falls outside the destination is skipped, as the select never chose it.

The window is read from the select's condition: a conjunction of, per dim, ``d >= lo`` and
``d < lo + n``, or ``d - lo >= 0`` and ``d - lo < n`` (the two lowerings' forms), with ``n``
a constant and ``lo`` not depending on the loops; a dim without bounds is whole. Anything else,
an update that reads the destination, or a kernel with run-time sizes (the scatter templates
take static ones), is left as it was.
"""

from __future__ import annotations

import dataclasses

from pyree.compiler.flow.rewrite import drop_unread
from pyree.compiler.kernel import (
    Acc,
    AffineExpr,
    Binary,
    Compare,
    Const,
    Expr,
    Gather,
    Load,
    LoopIndex,
    Result,
    Scatter,
    Select,
    affine_of,
    transform,
    walk,
    within,
)
from pyree.compiler.sizes import is_static
from pyree.compiler.tensor_program import (
    Function,
    Generic,
    has_run_time_sizes,
    is_line_walk,
    is_scatter,
)


def scatter_argument_windows(function: Function) -> Function:
    arguments = set(function.arguments)
    results = set(function.results)
    ops = [_as_scatter(op, arguments) if isinstance(op, Generic) and op.results[0] in results
           else op for op in function.ops]
    return dataclasses.replace(function, ops=ops)


def _as_scatter(op: Generic, arguments: set) -> Generic:
    if len(op.outputs) != 1 or is_scatter(op) or is_line_walk(op) or op.attention is not None \
            or op.num_parallel != len(op.loop_ranges) or not op.loop_ranges \
            or has_run_time_sizes(op):  # (scatter templates take static kernels)
        return op
    out = op.outputs[0]
    value = out.value
    if out.init is not None or out.epilogue is not None or out.row \
            or out.index != AffineExpr.identity(len(op.loop_ranges)) \
            or not isinstance(value, Select) or not isinstance(value.b, Load) \
            or value.b.index != out.index:
        return op
    dest = value.b.binding
    if op.inputs[dest] not in arguments or op.inputs[dest].shape != op.results[0].shape:
        return op
    if any(isinstance(e, (Load, Gather)) and e.binding == dest or isinstance(e, Acc)
           or isinstance(e, Load) and not _static(e.index) for e in walk(value.a)):
        return op
    window = _window(value.cond, op.results[0].shape)
    if window is None:
        return op
    starts, sizes = window

    def shifted(e: Expr) -> Expr | None:
        if isinstance(e, LoopIndex):
            return _plus(starts[e.dim], e)
        if isinstance(e, Load) and any(c and not isinstance(starts[d], Const)
                                       for ix in e.index for d, c in enumerate(ix.coeffs)):
            return Gather(e.binding, tuple(_affine_at(ix, starts) for ix in e.index), e.dtype)
        if isinstance(e, Load):  # shifted by constants: still affine
            return dataclasses.replace(e, index=tuple(AffineExpr(ix.coeffs, ix.const + sum(
                c * starts[d].value for d, c in enumerate(ix.coeffs))) for ix in e.index))
        return None

    update = transform(transform(value.a, shifted),
                       lambda e: _as_load(e, op.inputs, sizes) if isinstance(e, Gather) else None)
    place = tuple(_plus(s, LoopIndex(d)) for d, s in enumerate(starts))
    result = Result(0, (), update, scatter=Scatter(place, dest))
    return drop_unread(dataclasses.replace(op, outputs=(result,), loop_ranges=tuple(sizes),
                                           num_parallel=len(sizes)))


def _window(cond: Expr, shape: tuple) -> tuple[list[Expr], list[int]] | None:
    """(lo, n) per dim of the window ``cond`` tests, or None where it is not one."""
    lower: dict[int, Expr] = {}
    upper: dict[int, tuple[Expr, int] | Expr] = {}
    for c in _conjuncts(cond):
        if not isinstance(c, Compare) or c.predicate not in ("ge", "lt"):
            return None
        a, b = c.a, c.b
        if isinstance(a, LoopIndex):  # d >= lo, d < hi
            d, bound, relative = a.dim, b, False
        elif isinstance(a, Binary) and a.op == "sub" and isinstance(a.a, LoopIndex) \
                and _constant(b):  # d - lo >= 0, d - lo < n
            d, bound, relative = a.a.dim, a.b, True
        else:
            return None
        if not _loop_free(bound):
            return None
        side = lower if c.predicate == "ge" else upper
        if d in side:
            return None
        if relative and c.predicate == "ge":
            if b.value != 0:
                return None
            side[d] = bound
        elif relative:
            side[d] = (bound, b.value)
        else:
            side[d] = bound
    starts, sizes = [], []
    for d, extent in enumerate(shape):
        if d not in lower and d not in upper:
            if not is_static(extent):
                return None
            starts.append(Const(0, "index"))
            sizes.append(extent)
            continue
        if d not in lower or d not in upper:
            return None
        n = _size(lower[d], upper[d])
        if n is None or n < 0 or is_static(extent) and n > extent:
            return None
        starts.append(lower[d])
        sizes.append(n)
    return starts, sizes


def _size(lo: Expr, hi) -> int | None:
    """n where the upper bound is ``lo + n``: ``(lo, n)`` from ``d - lo < n``, or
    ``add(lo, n)``, or two constants."""
    if isinstance(hi, tuple):
        return hi[1] if hi[0] == lo else None
    if isinstance(hi, Binary) and hi.op == "add" and hi.a == lo and _constant(hi.b):
        return int(hi.b.value)
    if _constant(hi) and _constant(lo):
        return int(hi.value) - int(lo.value)
    return None


def _constant(e: Expr) -> bool:
    return isinstance(e, Const) and is_static(e.value)


def _conjuncts(cond: Expr) -> list[Expr]:
    if isinstance(cond, Binary) and cond.op == "and" and cond.dtype == "i1":
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def _loop_free(e: Expr) -> bool:
    return not any(isinstance(x, (LoopIndex, Acc)) or isinstance(x, Load) and x.index
                   for x in walk(e))


def _as_load(e: Gather, inputs: list, ranges: list[int]) -> Load | None:
    """A gather whose indices, once ``lo + j - lo`` cancels, are affine in the loops and inside
    their dims, as a Load: what region formation inlines a producer into (the stacked rows of a
    cache's layers)."""
    index = [affine_of(_cancelled(ix), tuple(ranges)) for ix in e.index]
    shape = inputs[e.binding].shape
    if any(ix is None or within(ix, ranges, n) is not True for ix, n in zip(index, shape)):
        return None
    return Load(e.binding, tuple(index), e.dtype)


def _cancelled(e: Expr) -> Expr:
    """``e`` with ``(x + y) - x`` as ``y`` (and ``(y + x) - x``)."""
    if isinstance(e, Binary):
        a, b = _cancelled(e.a), _cancelled(e.b)
        if e.op == "sub" and isinstance(a, Binary) and a.op == "add":
            if a.a == b:
                return a.b
            if a.b == b:
                return a.a
        return e if a is e.a and b is e.b else dataclasses.replace(e, a=a, b=b)
    return e


def _static(index: tuple[AffineExpr, ...]) -> bool:
    return all(is_static(ix.const) and all(is_static(c) for c in ix.coeffs) for ix in index)


def _plus(start: Expr, e: Expr) -> Expr:
    if isinstance(start, Const) and start.value == 0:
        return e
    return Binary("add", start, e, "index")


def _affine_at(ix: AffineExpr, starts: list[Expr]) -> Expr:
    """An affine index of the old loops, at old loop d = starts[d] + new loop d."""
    terms: list[Expr] = [] if ix.const == 0 else [Const(ix.const, "index")]
    for d, c in enumerate(ix.coeffs):
        if c == 0:
            continue
        at = _plus(starts[d], LoopIndex(d))
        terms.append(at if c == 1 else Binary("mul", Const(c, "index"), at, "index"))
    out = terms[0] if terms else Const(0, "index")
    for t in terms[1:]:
        out = Binary("add", out, t, "index")
    return out
