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

Where every target writes at computed places atomically (``Backend.scatter_atomics``, for the
original's dtype: ``Backend.scatter_atomic_dtypes``), the sizes are static and the region is one
commutative, associative op of (update, current) (``COMBINERS``: index_add, scatter_add,
scatter's sum/prod/amax/amin), or a plain set (index_put, scatter without reduce), the op is
instead a Generic over the updates whose result is stored at computed places
(``kernel.Scatter``): work proportional to the updates, with an atomic combine per element. A
float sum is then summed in no fixed order (as PyTorch's CUDA index_add is); a plain set stays
deterministic, the last update winning (``_at_computed_places``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

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
    Gather,
    LoopIndex,
    Result,
    Scatter,
    Select,
    walk,
)
from pyree.compiler.sizes import static_shape
from pyree.compiler.tensor_program import Constant, Generic, Value
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
        if _at_computed_places(fn, op, updates, indices, original, dimension_map, where):
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
                        original: Value, dimension_map: list[int], where: str) -> bool:
    """The scatter over its update elements (loops: the batch dims, then the slice dims), by
    ``emit_at_computed_places``; False (nothing emitted) where it keeps the fold."""
    batch = len(indices.shape) - 1
    num_loops = len(updates.shape)
    inputs = Inputs()
    update = inputs.load(updates, AffineExpr.identity(num_loops))
    block = op.regions[0].block
    current = Acc(0, original.dtype)
    combined = lower_block(fn, block, {block.args[0]: update, block.args[1]: current},
                           inputs, list(range(num_loops)), where)[0]
    return emit_at_computed_places(
        fn, inputs, combined, original, fn.result_value(op.results[0], where),
        indices.shape[:batch] + updates.shape[batch:], list(range(batch)),
        lambda ins: _place(ins, indices, original, dimension_map, num_loops), where, op.name)


def emit_at_computed_places(fn: FunctionLowering, inputs: Inputs, combined: Expr,
                            original: Value, out: Value, ranges: tuple[int, ...],
                            batch_loops: list[int], place: Callable[[Inputs], tuple[Expr, ...]],
                            where: str, origin: str) -> bool:
    """A scatter as a Generic over its update elements (``ranges``, all parallel) whose result
    ``out`` is stored at computed places (``kernel.Scatter``): ``combined``, lowered into
    ``inputs``, is the region of (update, ``Acc(0)`` the current element); ``place(inputs)``
    the target, one index per dim of ``original`` (a place outside it is skipped). False,
    emitting nothing, where ``combined`` is no combine that runs in any order, ``original``
    is empty, or a target cannot combine its dtype (or the winners' of a plain set)
    atomically (``FunctionLowering.scatter_dtypes``).

    A plain set takes two: the first stores at each place the number of the last update
    targeting it (an atomic max over the row-major numbers of ``batch_loops``, starting from
    -1), and the second stores each update where it is that winner, which keeps the fold's
    answer (the last update wins) without an order between threads. ``unique_indices`` is not
    trusted to skip the first: torch-mlir declares index_put's indices unique whatever they
    are."""
    current = Acc(0, original.dtype)
    plain = not any(isinstance(e, Acc) for e in walk(combined))
    if not (plain or _combines(combined, current)) or 0 in original.shape:
        return False  # (an empty original: the fold has nothing to do)
    count = math.prod(ranges[b] for b in batch_loops)
    winner_dtype = "i32" if count < 2**31 else "i64"
    if fn.scatter_dtypes is not None and not {original.dtype} | (
            {winner_dtype} if plain else set()) <= fn.scatter_dtypes:
        return False
    num_loops = len(ranges)
    if plain:
        wins = fn.new_value(winner_dtype, original.shape, "scatter_winner")
        number = _update_number(batch_loops, ranges, wins.dtype)
        first = fn.new_value(wins.dtype, original.shape, "scatter_no_winner")
        fn.emit(Constant(first, splat=-1, location=where))
        pass_inputs = Inputs()
        at = place(pass_inputs)
        fn.emit(Generic(pass_inputs.values, [wins], (Result(0, (), Binary(
            "max", number, Acc(0, wins.dtype), wins.dtype), scatter=Scatter(
                at, pass_inputs.binding(first))),), ranges, num_loops, where, origin))
        winner = Gather(inputs.binding(wins), place(inputs), wins.dtype)
        combined = Select(Compare("eq", winner, number), combined, current, original.dtype)
    result = Result(0, (), combined, scatter=Scatter(place(inputs), inputs.binding(original)))
    fn.emit(Generic(inputs.values, [out], (result,), ranges, num_loops, where, origin))
    return True


def _place(inputs: Inputs, indices: Value, original: Value, dimension_map: list[int],
           num_loops: int) -> tuple[Expr, ...]:
    """Where update element (batch..., slice...) goes: per dim of the original, its slice
    position (a dim the slice covers) plus each index that dimension_map puts there."""
    batch = len(indices.shape) - 1
    offset = len(original.shape) - (num_loops - batch)
    place: list[Expr] = []
    for k in range(len(original.shape)):
        target: Expr | None = LoopIndex(batch + k - offset) if k >= offset else None
        for i, dim in enumerate(dimension_map):
            if dim == k:
                at = (*AffineExpr.identity(num_loops)[:batch], AffineExpr((0,) * num_loops, i))
                index = convert(inputs.load(indices, at), "index")
                target = index if target is None else Binary("add", target, index, "index")
        place.append(Const(0, "index") if target is None else target)
    return tuple(place)


def _update_number(batch_loops: list[int], ranges: tuple[int, ...], dtype: str) -> Expr:
    """The row-major number of the update (its position over ``batch_loops``), as ``dtype``."""
    number: Expr = Const(0, "index")
    for b in batch_loops:
        number = Binary("add", Binary("mul", number, Const(ranges[b], "index"), "index"),
                        LoopIndex(b), "index") if b != batch_loops[0] else LoopIndex(b)
    return convert(number, dtype)


def _combines(value: Expr, current: Acc) -> bool:
    """Whether ``value`` is one ``COMBINERS`` op of ``current`` and an update not reading it."""
    if not isinstance(value, Binary) or value.op not in COMBINERS or value.dtype != current.dtype:
        return False
    other = value.b if value.a == current else value.a if value.b == current else None
    return other is not None and not any(isinstance(e, Acc) for e in walk(other))
