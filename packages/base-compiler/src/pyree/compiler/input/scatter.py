"""Scatter (``tm_tensor.scatter``, ``iree_linalg_ext.scatter``: torch's scatter/index_put/
index_add) as one reduction Generic that every output element runs over the updates.

The op's reference semantics: ``indices`` is ``[batch..., index depth]`` and ``updates``
``[batch..., slice...]`` (one batch dim in torch-mlir's output, any number in IREE's); for
every update element ``(u, s_1..s_m)`` (``u`` the batch position), the target place in
``original`` is ``s`` (the update's slice dims, aligned to the original's last ``m`` dims) plus,
for each ``i`` of the index depth, ``indices[u, i]`` added on dim ``dimension_map[i]``; there the
region combines (update, current value). Written the other way round, each output element
starts from ``original`` and folds in, in update order, every update element that targets it:
``Select(target == here, region(update, Acc), Acc)``. So a repeated index accumulates (or the
last one wins, for a plain set) exactly as the reference loop does, on every backend, with no
atomics; an index out of range targets nothing. A slice dim that no index moves is not a loop:
its place is the output's own. The work is (output size) x (updates per place).

Where every target writes at computed places atomically (``Backend.scatter_atomics``), the
sizes are static and the region is one commutative, associative op of (update, current)
(``COMBINERS``: index_add, scatter_add, scatter's sum/prod/amax/amin), or a plain set whose
indices are declared unique, the op is instead one Generic over the updates whose result is
stored at computed places (``kernel.Scatter``): work proportional to the updates, with an
atomic combine per element. A float sum is then summed in no fixed order (as PyTorch's CUDA
index_add is). A plain set with possibly repeated indices keeps the fold above, whose last
update wins, deterministically.
"""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.input.body import convert, lower_block
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.kernel import (
    Acc,
    AffineExpr,
    Binary,
    Compare,
    Const,
    Expr,
    LoopIndex,
    Result,
    Scatter,
    Select,
    walk,
)
from pyree.compiler.sizes import static_shape
from pyree.compiler.tensor_program import Generic, Value
from xdsl.ir import Operation

# The region ops (of update and current value) that a scatter combines atomically, in any order.
COMBINERS = frozenset({"add", "mul", "max", "min", "and", "or", "xor"})


def lower_scatter(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    if len(op.operands) != 3 or len(op.results) != 1 or "dimension_map" not in op.properties:
        raise CompileError(f"{op.name} takes ins(updates, indices), outs(original), a "
                           "dimension_map and one result", where)
    updates, indices, original = (fn.tensor(v, where) for v in op.operands)
    dimension_map = [int(d) for d in op.properties["dimension_map"].get_values()]
    # indices: [batch..., index depth]; updates: [batch..., slice...]
    batch = len(indices.shape) - 1
    rank, m = len(original.shape), len(updates.shape) - batch
    offset = rank - m
    if (batch < 1 or indices.shape[:batch] != updates.shape[:batch] or m < 0 or offset < 0
            or indices.shape[batch] != len(dimension_map)
            or any(not 0 <= d < rank for d in dimension_map)
            or len(set(dimension_map)) != len(dimension_map)
            or any(updates.shape[batch + j] > original.shape[offset + j] for j in range(m))):
        raise CompileError(f"{op.name}: indices {indices.shape}, updates {updates.shape} and "
                           f"dimension_map {dimension_map} do not fit {original.shape}", where)
    if fn.scatter_atomics and static_shape(original.shape + updates.shape + indices.shape):
        generic = _at_computed_places(fn, op, updates, indices, original, dimension_map, where)
        if generic is not None:
            fn.emit(generic)
            return
    # loops: the output's (parallel), then the batch dims, then each slice dim an index moves
    moved = [j for j in range(m) if offset + j in dimension_map]
    num_loops = rank + batch + len(moved)
    slice_loop = {j: rank + batch + n for n, j in enumerate(moved)}

    def loop(k: int) -> AffineExpr:
        return AffineExpr.loop(num_loops, k)

    batch_at = tuple(loop(rank + b) for b in range(batch))
    inputs = Inputs()
    update_at = (*batch_at, *(loop(slice_loop[j]) if j in slice_loop else loop(offset + j)
                              for j in range(m)))
    conditions: list[Expr] = []
    for k in range(rank):
        j = k - offset
        if k >= offset and j not in slice_loop:  # the update's slice place is the output's own
            if updates.shape[batch + j] < original.shape[k]:
                conditions.append(Compare("lt", LoopIndex(k), Const(updates.shape[batch + j],
                                                                    "index")))
            continue
        target: Expr = LoopIndex(slice_loop[j]) if j in slice_loop else Const(0, "index")
        for i, dim in enumerate(dimension_map):
            if dim == k:
                at = (*batch_at, AffineExpr((0,) * num_loops, i))
                target = Binary("add", target, convert(inputs.load(indices, at), "index"),
                                "index")
        conditions.append(Compare("eq", target, LoopIndex(k)))
    block = op.regions[0].block
    combined = lower_block(fn, block, {block.args[0]: inputs.load(updates, update_at),
                                       block.args[1]: Acc(0, original.dtype)},
                           inputs, list(range(num_loops)), where)[0]
    hit = conditions[0] if conditions else Const(True, "i1")
    for c in conditions[1:]:
        hit = Binary("and", hit, c, "i1")
    here = tuple(loop(k) for k in range(rank))
    result = Result(0, here, Select(hit, combined, Acc(0, original.dtype), original.dtype),
                    init=inputs.load(original, here))
    out = fn.result_value(op.results[0], where)
    ranges = original.shape + indices.shape[:batch] + tuple(updates.shape[batch + j]
                                                            for j in moved)
    fn.emit(Generic(inputs.values, [out], (result,), ranges, rank, where, op.name))


def _at_computed_places(fn: FunctionLowering, op: Operation, updates: Value, indices: Value,
                        original: Value, dimension_map: list[int], where: str) -> Generic | None:
    """The scatter as one Generic over the update elements (loops: the batch dims, then the
    slice dims) whose result is stored at computed places (``kernel.Scatter``), or None where
    its region is no combine that runs in any order."""
    batch = len(indices.shape) - 1
    rank, m = len(original.shape), len(updates.shape) - batch
    offset = rank - m
    num_loops = batch + m
    inputs = Inputs()
    update = inputs.load(updates, AffineExpr.identity(num_loops))
    block = op.regions[0].block
    current = Acc(0, original.dtype)
    combined = lower_block(fn, block, {block.args[0]: update, block.args[1]: current},
                           inputs, list(range(num_loops)), where)[0]
    if not (_combines(combined, current) or (
            not any(isinstance(e, Acc) for e in walk(combined)) and _unique(op))):
        return None
    place: list[Expr] = []
    for k in range(rank):
        target: Expr = LoopIndex(batch + k - offset) if k >= offset else Const(0, "index")
        for i, dim in enumerate(dimension_map):
            if dim == k:
                at = (*AffineExpr.identity(num_loops)[:batch], AffineExpr((0,) * num_loops, i))
                target = Binary("add", target, convert(inputs.load(indices, at), "index"),
                                "index")
        place.append(target)
    start = inputs.binding(original)
    result = Result(0, (), combined, scatter=Scatter(tuple(place), start))
    out = fn.result_value(op.results[0], where)
    ranges = indices.shape[:batch] + updates.shape[batch:]
    return Generic(inputs.values, [out], (result,), ranges, num_loops, where, op.name)


def _combines(value: Expr, current: Acc) -> bool:
    """Whether ``value`` is one ``COMBINERS`` op of ``current`` and an update not reading it."""
    if not isinstance(value, Binary) or value.op not in COMBINERS or value.dtype != current.dtype:
        return False
    other = value.b if value.a == current else value.a if value.b == current else None
    return other is not None and not any(isinstance(e, Acc) for e in walk(other))


def _unique(op: Operation) -> bool:
    """Whether the op declares its indices unique (``unique_indices(true)``)."""
    flag = op.properties.get("unique_indices")
    return flag is not None and bool(flag.value.data)
