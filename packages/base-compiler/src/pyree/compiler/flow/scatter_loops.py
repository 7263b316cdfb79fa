"""A scatter's update loop in the shape its updates were flattened from.

torch-mlir lowers ``index_put`` (``F.fold``, ``max_unpool``, ``x[i, j] = v`` with index tensors)
to a scatter over *flattened* updates: every index tensor and the updates are collapsed to one
dim of N elements, so the scatter has one loop of N, and each operand is a view collapsing the
tensor that computed it. A read of such a view at that loop walks past the inner extents of the
collapsed dims, which is not affine in the loop (``flow/views.py`` keeps the view), so every
index tensor (a broadcast of an arange, mostly) was materialized: F.fold's col2im wrote and read
four int64 tensors of 7.2M elements, and ran at 0.37x PyTorch on the H200.

Here such a loop becomes one loop per collapsed dim (the old loop is their row-major linear
index, an affine substitution that changes nothing the scatter computes). The next region
formation then folds the views into loads and inlines the producers into the scatter's places.
The dims come from the first view that collapses dims into the loop's position; a scatter
without one is left as it is.
"""

from __future__ import annotations

import dataclasses
import math

from pyree.compiler.flow.rewrite import drop_unread, fold_decided, remap_loops
from pyree.compiler.kernel import AffineExpr, Load, result_nodes, scatter_result
from pyree.compiler.sizes import is_static
from pyree.compiler.tensor_program import Function, Generic, Value, View, is_scatter


def expand_scatter_loops(function: Function) -> Function:
    views = {op.result: op for op in function.ops if isinstance(op, View) and not op.barrier}
    if not views:
        return function
    ops = [_expanded(op, views) if is_scatter(op) else op for op in function.ops]
    return dataclasses.replace(function, ops=ops)


def _expanded(op: Generic, views: dict[Value, View]) -> Generic:
    if not all(is_static(n) for n in op.loop_ranges):
        return op
    op = _decided(op)
    for d in reversed(range(op.num_parallel)):  # a split renumbers only the loops after d
        dims = _collapsed_dims(op, d, views)
        if dims is not None:
            op = _split_loop(op, d, dims)
    return op


def _decided(op: Generic) -> Generic:
    """``op`` without the branches its loop box decides: an inlined concatenation of the index
    columns, read at one column each, leaves the other columns' loads at positions out of
    range behind a select that never picks them, which would keep their views."""
    def simple(e):
        return None if e is None else fold_decided(e, op.loop_ranges)
    outputs = []
    for r in op.outputs:
        scatter = r.scatter if r.scatter is None else dataclasses.replace(
            r.scatter, place=tuple(simple(e) for e in r.scatter.place))
        outputs.append(dataclasses.replace(r, value=simple(r.value), init=simple(r.init),
                                           epilogue=simple(r.epilogue), scatter=scatter))
    return drop_unread(dataclasses.replace(op, outputs=tuple(outputs)))


def _collapsed_dims(op: Generic, d: int, views: dict[Value, View]) -> tuple[int, ...] | None:
    """The source dims a view read at loop ``d`` alone collapses into that position."""
    extent = op.loop_ranges[d]
    if extent < 2:
        return None
    for load in (e for r in op.outputs for e in result_nodes(r) if isinstance(e, Load)):
        value = op.inputs[load.binding]
        for p, ix in enumerate(load.index):
            if ix.const or ix.coeffs[d] != 1 or any(c for k, c in enumerate(ix.coeffs) if k != d):
                continue
            stride = math.prod(value.shape[p + 1:])
            source = _source(value, views)
            if source is None or not all(is_static(n) for n in source.shape):
                continue
            dims = _dims_at(source.shape, stride, extent)
            if dims is not None and len(dims) > 1:
                return dims
    return None


def _source(value: Value, views: dict[Value, View]) -> Value | None:
    """The tensor behind a chain of whole views (no offset, same dtype), or None if ``value``
    is no view."""
    if value not in views:
        return None
    while value in views and views[value].byte_offset == 0 \
            and views[value].source.dtype == value.dtype:
        value = views[value].source
    return value


def _dims_at(shape: tuple[int, ...], stride: int, extent: int) -> tuple[int, ...] | None:
    """The consecutive dims of a row-major ``shape`` that together step by ``stride`` over
    ``extent`` elements, or None."""
    strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    for last in range(len(shape)):
        if strides[last] != stride:
            continue
        for first in range(last, -1, -1):
            covered = strides[first] * shape[first] // stride
            if covered == extent:
                return tuple(shape[first:last + 1])
            if covered > extent:
                break
    return None


def _split_loop(op: Generic, d: int, dims: tuple[int, ...]) -> Generic:
    """``op`` with loop ``d`` as ``len(dims)`` loops of ``dims``, d their row-major index."""
    n_old, grow = len(op.loop_ranges), len(dims) - 1
    n_new = n_old + grow
    linear = [0] * n_new
    for i in range(len(dims)):
        linear[d + i] = math.prod(dims[i + 1:])
    loop_map = tuple(AffineExpr(tuple(linear)) if k == d
                     else AffineExpr.loop(n_new, k if k < d else k + grow) for k in range(n_old))

    def moved(e):
        return None if e is None else remap_loops(e, loop_map, n_new, lambda b: b)

    outputs = []
    for r in op.outputs:
        assert not r.index, "a scatter result stores at its places alone"
        scatter = r.scatter
        if scatter is not None:
            scatter = dataclasses.replace(
                scatter, place=tuple(moved(e) for e in scatter.place),
                disjoint=tuple(k if k < d else k + grow for k in scatter.disjoint if k != d))
        outputs.append(dataclasses.replace(r, value=moved(r.value), init=moved(r.init),
                                           epilogue=moved(r.epilogue), scatter=scatter))
    assert scatter_result(tuple(outputs)) is not None
    ranges = op.loop_ranges[:d] + tuple(dims) + op.loop_ranges[d + 1:]
    return dataclasses.replace(op, outputs=tuple(outputs), loop_ranges=ranges,
                               num_parallel=op.num_parallel + grow)
