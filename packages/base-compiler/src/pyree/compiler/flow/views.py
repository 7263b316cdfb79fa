"""Loads through views: a Generic that reads a ``View`` (a reshape, a contiguous slice) reads the
view's source instead, wherever each of its reads lands on an affine index of the source.

A view is the same bytes under another shape, so a read of the view at index I is a read of the
source at the row-major digits of I's linear offset. Those digits are affine in the loops when no
term can carry into the next digit: each term of the offset (a loop times its coefficient) falls
into the source dim whose stride divides the coefficient, the constant is split into digits, and
every digit's range over the loops stays inside its dim. GPT-2's attention reads q, k and v as
``transpose(reshape(slice(qkv)))`` and writes ``reshape(transpose(p @ v))``: with the views
folded, the slices and transposes are single-user data movement again, and region formation
inlines them into the batch matmuls that read them, instead of materializing each (six kernels of
the block). A read that could carry (a collapsed dim walked past its inner extent) keeps the view,
and so does a barrier view (a convolution's patches, which its GEMM reads densely).
"""

from __future__ import annotations

import dataclasses

from pyree.compiler.flow.rewrite import (
    dedupe_inputs,
    drop_unread,
    is_data_movement,
    is_guarded_data_movement,
    map_results,
    permutation_dims,
)
from pyree.compiler.flow.split_reduction import has_contraction
from pyree.compiler.kernel import AffineExpr, Expr, Gather, Load, itemsize, result_nodes
from pyree.compiler.sizes import is_static, nonnegative, opaque
from pyree.compiler.tensor_program import Function, Generic, Value, View, read_by


def fold_views_into_loads(function: Function) -> Function:
    """``function`` with every Generic reading view sources wherever its reads allow, and
    without the views nothing reads any more (a view read keeps its source materialized)."""
    ops = [_unit_transpose_view(op) or op if isinstance(op, Generic) else op for op in function.ops]
    views = {op.result: op for op in ops if isinstance(op, View) and not op.barrier}
    if not views:
        return function
    producers = {id(v): op for op in ops if isinstance(op, Generic) for v in op.results}
    ops = [_fold(op, views, producers) if isinstance(op, Generic) else op for op in ops]
    while True:  # dropping a view can leave the view it reads unread
        read = {id(v) for op in ops for v in read_by(op)} | {id(v) for v in function.results}
        live = [op for op in ops if not isinstance(op, View) or id(op.result) in read]
        if len(live) == len(ops):
            return dataclasses.replace(function, ops=ops)
        ops = live


def _unit_transpose_view(op: Generic) -> View | None:
    """``op`` as a view of its one input, where it only copies it with dims of size 1 moved."""
    if len(op.inputs) != 1 or len(op.outputs) != 1 or op.num_parallel != len(op.loop_ranges) \
            or op.attention is not None or op.line is not None:
        return None
    out, source, result = op.outputs[0], op.inputs[0], op.results[0]
    if not isinstance(out.value, Load) or out.init is not None or out.epilogue is not None \
            or out.scatter is not None or source.dtype != result.dtype:
        return None
    n = len(op.loop_ranges)
    written, read = permutation_dims(out.index, n), permutation_dims(out.value.index, n)
    if written is None or read is None or any(  # (a slice reads part of its source)
            value.shape[p] != op.loop_ranges[d]
            for value, dims in ((source, read), (result, written)) for p, d in enumerate(dims)):
        return None
    if written == read:  # a plain copy: it may be what keeps a mutable global's old value
        return None
    moved = [d for d in written if not (is_static(op.loop_ranges[d]) and op.loop_ranges[d] == 1)]
    if moved != [d for d in read if d in moved]:
        return None
    return View(result=result, source=source, location=op.location)


def _fold(op: Generic, views: dict[Value, View], producers: dict) -> Generic:
    refused: set[int] = set()
    while True:  # one input per round (folding renumbers them); a view of a view takes two
        j = next((j for j, value in enumerate(op.inputs) if value in views
                  and id(value) not in refused and not _starts(op, j)
                  and _joins(op, views[value], views, producers)), None)
        if j is None:
            return op
        folded = _read_source(op, j, views[op.inputs[j]])
        if folded is None:
            refused.add(id(op.inputs[j]))
        else:
            op = folded


def _starts(op: Generic, j: int) -> bool:
    """Whether input ``j`` is a scatter's starting value, which is copied whole, not read."""
    return any(r.scatter is not None and r.scatter.start == j for r in op.outputs)


def _joins(reader: Generic, view: View, views: dict[Value, View], producers: dict) -> bool:
    """Whether fusion could join ``reader`` to the Generic whose result ``view`` shows (through
    views of views) once the view is gone: an elementwise reader (inlining its producer, or
    becoming a reduction's epilogue) or an elementwise producer that only moves data (inlined
    even into a reduction; a pad's guarded moves into any but a contraction, as region
    formation inlines them: a local response norm's pooling over a padded square read through
    the unsqueeze of a unit dim). Other views stay as they are (a constant's or an argument's, a
    reduction's read by a reduction, arithmetic read by a matmul): folding them would only
    reshape a binding."""
    while view.source in views:
        view = views[view.source]
    producer = producers.get(id(view.source))
    return producer is not None and (_elementwise(reader) or (_elementwise(producer) and all(
        is_data_movement(r.value) or (is_guarded_data_movement(r.value) and not has_contraction(reader))
        for r in producer.outputs)))


def _elementwise(op: Generic) -> bool:
    return op.num_parallel == len(op.loop_ranges)


def _read_source(op: Generic, j: int, view: View) -> Generic | None:
    source = view.source
    if source.dtype != view.result.dtype or not is_static(view.byte_offset) \
            or view.byte_offset % itemsize(source.dtype):
        return None
    reads = {e for r in op.outputs for e in result_nodes(r) if isinstance(e, (Load, Gather))
             and e.binding == j}
    if any(isinstance(e, Gather) for e in reads):
        return None
    offset = view.byte_offset // itemsize(source.dtype)
    new_index = {}
    for load in reads:
        index = source_index(load.index, view.result.shape, source.shape, offset, op.loop_ranges)
        if index is None:
            return None
        new_index[load.index] = index
    base = len(op.inputs)

    def leaf(e: Expr) -> Expr | None:
        if isinstance(e, Load) and e.binding == j:
            return Load(base, new_index[e.index], e.dtype)
        return None

    moved = dataclasses.replace(op, inputs=[*op.inputs, source],
                                outputs=map_results(op.outputs, leaf))
    return dedupe_inputs(drop_unread(moved))


def source_index(index: tuple[AffineExpr, ...], view_shape: tuple[int, ...],
                 source_shape: tuple[int, ...], offset: int,
                 loop_ranges: tuple[int, ...]) -> tuple[AffineExpr, ...] | None:
    """The source index (affine in the loops) of the element a view of ``view_shape``, starting
    ``offset`` elements into the source, holds at ``index``; None when a digit could carry.
    With run-time sizes in the shapes or loop ranges, a term falls into a dim only where its
    stride provably divides it, a digit is kept only where it provably stays in its dim for
    every size (``sizes.nonnegative``), and the index must come out static (its coefficients
    and constants are no kernel parameters), else None: the view stays."""
    n = len(loop_ranges)
    coeffs, const = [0] * n, offset
    for stride, ix in zip(_strides(view_shape), index):
        coeffs = [c + stride * k for c, k in zip(coeffs, ix.coeffs)]
        const += stride * ix.const
    strides = _strides(source_shape)
    digits = [[0] * n for _ in source_shape]
    for loop, c in enumerate(coeffs):
        if c == 0:
            continue
        if loop_ranges[loop] == 1:  # always 0: kept only where it indexes a dim as itself and
            # the dim holds no other unit loop (a [1, n] value read as [1, 1, n] reads dim 0 at
            # d0, not d0 + d1), so that a read keeps its loops one to a dim, as fusion needs
            dim = next((i for i, s in enumerate(strides) if s == c), None)
            if dim is not None and not any(loop_ranges[l] == 1 and digits[dim][l] != 0
                                           for l in range(n)):
                digits[dim][loop] = 1
            continue
        dim = next((i for i, s in enumerate(strides) if _quotient(c, s) is not None), None)
        if dim is None:
            return None
        digits[dim][loop] = _quotient(c, strides[dim])
    if not is_static(const):
        return None  # a read at a run-time offset (a slice from the end of a ``?`` dim) stays
    out = []
    for dim, (stride, extent) in enumerate(zip(strides, source_shape)):
        if not is_static(stride) and const:
            return None
        digit_const = 0 if not const else const // stride if dim == 0 else const // stride % extent
        spans = [_span(k, r) for k, r in zip(digits[dim], loop_ranges)]
        if None in spans:
            return None
        low = digit_const + sum(lo for lo, _ in spans)
        high = digit_const + sum(hi for _, hi in spans)
        if not nonnegative(low) or not nonnegative(extent - 1 - high):
            return None
        out.append(AffineExpr(tuple(digits[dim]), digit_const))
    if not all(is_static(c) for ix in out for c in (*ix.coeffs, ix.const)):
        return None  # a size in an index is no loop range or operand dim: outlining could not pass it
    return tuple(out)


def _quotient(c, s):
    """``c / s`` where ``s`` provably divides ``c`` (ints, a size by an int dividing every
    coefficient, or equal sizes), else None."""
    if is_static(c) and is_static(s):
        return c // s if c % s == 0 else None
    if c == s:
        return 1
    if is_static(s):
        q = opaque("floordiv", c, s)
        return q if q * s == c else None
    return None


def _span(k, r):
    """(least, greatest) of ``k * i`` over i in [0, r); for a run-time ``r``, of a loop that
    runs (r >= 1: an empty loop reads nothing); None where the sign of a run-time ``k`` is not
    known."""
    if is_static(k) and is_static(r):
        return min(0, k * (r - 1)), max(0, k * (r - 1))
    if is_static(k) and k < 0:
        return k * (r - 1), 0
    if is_static(k) or nonnegative(k):
        return 0, k * (r - 1)
    return None


def _strides(shape: tuple[int, ...]) -> list[int]:
    strides, s = [], 1
    for extent in reversed(shape):
        strides.append(s)
        s *= extent
    return strides[::-1]
