"""gather and scatter, general dimension numbers.

gather is one parallel Generic whose load from the operand is a ``Gather`` at start + offset,
each start read from the index tensor (an affine load) and clamped as the spec says. scatter is
a reduction over the scatter positions per result element: the element folds in, through the
update computation and in index order (so repeated indices combine as they do sequentially),
the update at its offset in each window that holds it, starting from the operand. A window
not wholly in bounds is skipped, as XLA does. That costs |result| x |scatter positions|, so
where the targets allow, a scatter of one operand whose update computation is one commutative
op (JAX's ``.at[].add/mul/max/min``) or a plain set (``.at[].set``) is instead a Generic over
the updates that stores at computed places (``input/scatter.py``).
Batching dims (``operand_batching_dims``, ``input_batching_dims``) pair with index dims.
"""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.input.dialects.stablehlo import hlo_fields
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.scatter import emit_at_computed_places
from pyree.compiler.input.stablehlo.common import all_of, as_index, clamp, emit_map, hlo_attr, in_range, ints
from pyree.compiler.input.stablehlo.dynamic import shape_operand
from pyree.compiler.input.stablehlo.elementwise import lower_region
from pyree.compiler.kernel import (
    Acc,
    AffineExpr,
    Binary,
    Compare,
    Const,
    Expr,
    LoopIndex,
    Result,
    Select,
)
from pyree.compiler.sizes import static_shape
from pyree.compiler.tensor_program import Generic, Value
from xdsl.ir import Operation


def _index_loops(indices: Value, ivd: int, batch_loops: list[int]) -> dict[int, int]:
    """The loop that walks each dim of the index tensor but the index vector's."""
    dims = [j for j in range(len(indices.shape)) if j != ivd]
    return dict(zip(dims, batch_loops))


def _start(inputs: Inputs, indices: Value, ivd: int, batch_loops: list[int], k: int,
           n: int) -> Expr:
    """Component ``k`` of the index vector at the batch position given by ``batch_loops``."""
    loops = _index_loops(indices, ivd, batch_loops)
    index = tuple(AffineExpr.loop(n, None, const=k) if j == ivd else AffineExpr.loop(n, loops[j])
                  for j in range(len(indices.shape)))
    return as_index(inputs.load(indices, index))


def lower_dynamic_gather(fn: FunctionLowering, op: Operation) -> None:
    """A gather whose slice sizes are an operand: constant ones (a shape tensor of sizes would
    make the result's shape depend on them, which pyree does not take yet)."""
    where = location_of(op)
    sizes = shape_operand(fn, op.operands[2], where)
    if not all(isinstance(s, int) for s in sizes):
        raise CompileError("stablehlo.dynamic_gather with run-time slice sizes is not supported "
                           "yet (constant ones are)", where)
    lower_gather(fn, op, list(sizes))


def lower_gather(fn: FunctionLowering, op: Operation, sizes: list[int] | None = None) -> None:
    where = location_of(op)
    fields = hlo_fields(hlo_attr(op, "dimension_numbers"))
    operand, indices = (fn.tensor(v, where) for v in op.operands[:2])
    sizes = ints(op, "slice_sizes") if sizes is None else sizes
    offset_dims = fields.get("offset_dims", [])
    collapsed = fields.get("collapsed_slice_dims", [])
    start_map = fields.get("start_index_map", [])
    ivd = fields.get("index_vector_dim", [0])[0]  # omitted when 0
    rank = len(op.results[0].type.get_shape())
    batch_loops = [d for d in range(rank) if d not in offset_dims]
    operand_batching = fields.get("operand_batching_dims", [])
    index_batching = fields.get("start_indices_batching_dims", [])
    window = [d for d in range(len(operand.shape)) if d not in collapsed + operand_batching]

    def build(inputs: Inputs) -> Expr:
        at: list[Expr] = [Const(0, "index")] * len(operand.shape)
        for k, d in enumerate(start_map):
            start = _start(inputs, indices, ivd, batch_loops, k, rank)
            at[d] = clamp(start, 0, operand.shape[d] - sizes[d])
        loops = _index_loops(indices, ivd, batch_loops)
        for d, j in zip(operand_batching, index_batching):
            at[d] = LoopIndex(loops[j])
        for d, out_dim in zip(window, offset_dims):
            at[d] = Binary("add", at[d], LoopIndex(out_dim), "index")
        return inputs.gather(operand, tuple(at), where)

    emit_map(fn, op, build)


def lower_scatter(fn: FunctionLowering, op: Operation) -> None:
    """Loops: the result's dims (parallel), then the updates' scatter dims (reduction; one
    unit loop when there are none). Each result element reads, per scatter position, the
    update element at its offset in that window, when the window holds it."""
    where = location_of(op)
    fields = hlo_fields(hlo_attr(op, "scatter_dimension_numbers"))
    values = [fn.tensor(v, where) for v in op.operands]
    count = len(values) // 2  # operands..., indices, updates...
    operands, indices, all_updates = values[:count], values[count], values[count + 1:]
    operand, updates = operands[0], all_updates[0]
    window_dims = fields.get("update_window_dims", [])
    inserted = fields.get("inserted_window_dims", [])
    input_batching = fields.get("input_batching_dims", [])
    ivd = fields.get("index_vector_dim", [0])[0]  # omitted when 0
    rank = len(operand.shape)
    scatter_dims = [u for u in range(len(updates.shape)) if u not in window_dims]
    scatter_loops = [rank + k for k in range(len(scatter_dims))]
    for j, loop in _index_loops(indices, ivd, scatter_loops).items():  # the same positions
        fn.unify(indices.shape[j], updates.shape[scatter_dims[loop - rank]], where)
    if fn.scatter_atomics and count == 1 and updates.shape and static_shape(
            operand.shape + indices.shape + updates.shape) and _at_computed_places(
                fn, op, operand, indices, updates, fields, where):
        return
    ranges = operand.shape + tuple(updates.shape[u] for u in scatter_dims)
    if not scatter_dims:
        ranges += (1,)
    n = len(ranges)
    window = [d for d in range(rank) if d not in inserted + input_batching]
    size = {d: updates.shape[u] for d, u in zip(window, window_dims)}
    inputs = Inputs()
    start, conds = _window_starts(inputs, indices, fields, operand.shape, size, scatter_loops, n)
    loops = _index_loops(indices, ivd, scatter_loops)
    at: list[Expr] = [LoopIndex(loops[scatter_dims.index(u)]) if u in scatter_dims else None
                      for u in range(len(updates.shape))]
    for d in range(rank):
        offset = Binary("sub", LoopIndex(d), start[d], "index")
        if d in size:
            conds += in_range(offset, 0, size[d])
            at[window_dims[window.index(d)]] = offset
        else:
            conds.append(Compare("eq", offset, Const(0, "index")))
    accs = [Acc(k, x.dtype) for k, x in enumerate(operands)]
    update = [inputs.gather(u, tuple(at), where) for u in all_updates]
    combined = lower_region(fn, op.regions[0].block, [*accs, *update], inputs, where)
    index = tuple(AffineExpr.loop(n, d) for d in range(rank))
    hit = all_of(conds)
    outputs = tuple(Result(k, index, Select(hit, c, acc, acc.dtype), inputs.load(x, index))
                    for k, (c, acc, x) in enumerate(zip(combined, accs, operands)))
    results = [fn.result_value(r, where) for r in op.results]
    fn.emit(Generic(inputs.values, results, outputs, ranges, rank, where, op.name))


def _window_starts(inputs: Inputs, indices: Value, fields: dict, shape: tuple[int, ...],
                   size: dict[int, int], scatter_loops: list[int], n: int) -> tuple[list[Expr], list[Expr]]:
    """Each operand dim's window start (its entry of the index vector, or a batching dim's
    loop) and the conditions that the window lies wholly in bounds (XLA skips one that does
    not), over ``n`` loops of which ``scatter_loops`` walk the updates' scatter dims."""
    ivd = fields.get("index_vector_dim", [0])[0]
    start: list[Expr] = [Const(0, "index")] * len(shape)
    conds: list[Expr] = []
    for k, d in enumerate(fields.get("scatter_dims_to_operand_dims", [])):
        start[d] = _start(inputs, indices, ivd, scatter_loops, k, n)
        conds += in_range(start[d], 0, shape[d] - size.get(d, 1) + 1)
    loops = _index_loops(indices, ivd, scatter_loops)
    for d, j in zip(fields.get("input_batching_dims", []), fields.get("scatter_indices_batching_dims", [])):
        start[d] = LoopIndex(loops[j])
    return start, conds


def _at_computed_places(fn: FunctionLowering, op: Operation, operand: Value, indices: Value,
                        updates: Value, fields: dict, where: str) -> bool:
    """The scatter over its update elements (one loop per updates dim), each stored at its
    window's start plus its offset there (``input/scatter.emit_at_computed_places``); a
    window not wholly in bounds places its elements outside, where they are skipped."""
    window_dims = fields.get("update_window_dims", [])
    inserted = fields.get("inserted_window_dims", [])
    input_batching = fields.get("input_batching_dims", [])
    rank, n = len(operand.shape), len(updates.shape)
    scatter_dims = [u for u in range(n) if u not in window_dims]
    window = [d for d in range(rank) if d not in inserted + input_batching]
    size = {d: updates.shape[u] for d, u in zip(window, window_dims)}

    def place(inputs: Inputs) -> tuple[Expr, ...]:
        at, conds = _window_starts(inputs, indices, fields, operand.shape, size, scatter_dims, n)
        for d in size:
            at[d] = Binary("add", at[d], LoopIndex(window_dims[window.index(d)]), "index")
        if conds:  # XLA skips a window that is not wholly in bounds
            at[0] = Select(all_of(conds), at[0], Const(-1, "index"), "index")
        return tuple(at)

    inputs = Inputs()
    update = inputs.load(updates, AffineExpr.identity(n))
    combined = lower_region(fn, op.regions[0].block, [Acc(0, operand.dtype), update], inputs,
                            where)[0]
    return emit_at_computed_places(fn, inputs, combined, operand,
                                   fn.result_value(op.results[0], where), updates.shape,
                                   scatter_dims, place, where, op.name)
