"""IREE's ``iree_linalg_ext`` ops beyond sort / scan / topk / scatter: ``topk_v2``,
``arg_compare``, ``gather``, ``softmax`` and ``reverse``, on the same machinery.

- topk_v2 is topk (input/sort_scan.py) whose index output may be left out; ``is_sorted`` or not,
  the values come out sorted (an unsorted top-k may be in any order).
- arg_compare is a top-1 along ``dimension`` with that dimension dropped: the first element the
  comparator keeps before all others and its index (plus ``index_base`` when given).
- gather: ``out[b..., s...] = body(source[i_0, ..., s...])`` where the index vector of batch
  position ``b`` (the indices' last dim, or one scalar index when the indices have only the
  batch dims) gives the source coordinates of the dims ``dimension_map`` names, in that order;
  indices are clamped into range (kernel ``Gather``).
- softmax: linalg.softmax's lowering (input/softmax.py).
- reverse: ``out[i] = in[n - 1 - i]`` along each listed dimension.
"""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.input.body import convert, lower_block
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.softmax import emit_softmax
from pyree.compiler.input.sort_scan import iota, region_comparator, sort_values
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import AffineExpr, Binary, Const, LoopIndex, Result
from pyree.compiler.tensor_program import Generic, Value
from xdsl.ir import Operation


def lower_topk_v2(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    num_ins = op.properties["num_ins"].value.data
    ins = [fn.tensor(v, where) for v in op.operands[:num_ins]]
    d = op.properties["dimension"].value.data
    index_type = (tensor_type_of(op.results[1].type, where, dynamic=True)[0] if len(op.results) > 1
                  else "i32")
    if num_ins == 1:
        ins.append(iota(fn, ins[0].shape, d, index_type, where))
    k = fn.entry(op.operands[num_ins], where).shape[d]  # the outs' length: a run-time size too
    comparator = region_comparator(fn, op, 1, len(ins[0].shape) + 1, where)
    top = sort_values(fn, ins, d, k, comparator, op.name, where)
    for result, value in zip(op.results, top):
        fn.env[result] = value


def lower_arg_compare(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    x = fn.tensor(op.operands[0], where)
    d = op.properties["dimension"].value.data
    index_type = tensor_type_of(op.results[1].type, where)[0]
    indices = iota(fn, x.shape, d, index_type, where)
    comparator = region_comparator(fn, op, 1, len(x.shape) + 1, where)
    best = sort_values(fn, [x, indices], d, 1, comparator, op.name, where)
    base = fn.entry(op.operands[3], where) if "has_index_base" in op.properties else None
    rank = len(x.shape)
    kept = AffineExpr.identity(rank - 1)
    at = tuple(AffineExpr((0,) * (rank - 1)) if k == d else kept[k - (k > d)] for k in range(rank))
    for n, (result, value) in enumerate(zip(op.results, best, strict=True)):
        inputs = Inputs()
        expr = inputs.load(value, at)
        if n == 1 and base is not None:
            offset = base if isinstance(base, Const) else inputs.load(base, ())
            expr = Binary("add", expr, convert(offset, index_type), index_type)
        out = fn.result_value(result, where)
        fn.emit(Generic(inputs.values, [out], (Result(0, kept, expr),), out.shape, rank - 1,
                        where, op.name))


def lower_gather(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    source, indices = (fn.tensor(v, where) for v in op.operands[:2])
    dims = list(op.properties["dimension_map"].get_values())
    out_type = tensor_type_of(op.results[0].type, where)
    batch = len(out_type[1]) - (len(source.shape) - len(dims))
    if batch < 0 or len(indices.shape) not in (batch, batch + 1):
        raise CompileError(f"{op.name}: indices {indices.shape} do not fit a source of rank "
                           f"{len(source.shape)} gathered into {out_type[1]}", where)
    if len(indices.shape) == batch + 1 and indices.shape[-1] != len(dims):
        raise CompileError(f"{op.name}: index vectors of length {indices.shape[-1]} for "
                           f"{len(dims)} mapped dims", where)
    rank = len(out_type[1])
    loops = AffineExpr.identity(rank)
    inputs = Inputs()

    def coordinate(k: int):
        at = loops[:batch] + ((AffineExpr((0,) * rank, k),) if len(indices.shape) > batch else ())
        return inputs.load(indices, at)

    slice_loops = iter(range(batch, rank))
    index = [coordinate(dims.index(s)) if s in dims else LoopIndex(next(slice_loops))
             for s in range(len(source.shape))]
    element = inputs.gather(source, tuple(index), where)
    block = op.regions[0].block
    body = lower_block(fn, block, {block.args[0]: element}, inputs, list(range(rank)), where)[0]
    out = fn.result_value(op.results[0], where)
    fn.emit(Generic(inputs.values, [out], (Result(0, loops, body),), out.shape, rank, where,
                    op.name))


def lower_softmax(fn: FunctionLowering, op: Operation) -> None:
    emit_softmax(fn, op.operands[0], op.properties["dimension"].value.data, op.results[0],
                 op.name, location_of(op))


def lower_reverse(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    x: Value = fn.tensor(op.operands[0], where)
    reversed_dims = {int(v) for v in op.properties["dimensions"].get_values()}
    rank = len(x.shape)
    at = tuple(AffineExpr(tuple(-int(k == d) if d in reversed_dims else int(k == d)
                                for k in range(rank)), x.shape[d] - 1 if d in reversed_dims else 0)
               for d in range(rank))
    inputs = Inputs()
    out = fn.result_value(op.results[0], where)
    fn.emit(Generic(inputs.values, [out], (Result(0, AffineExpr.identity(rank),
                                                  inputs.load(x, at)),), x.shape, rank, where,
                    op.name))


RULES = {f"iree_linalg_ext.{name}": rule for name, rule in (
    ("topk_v2", lower_topk_v2), ("arg_compare", lower_arg_compare), ("gather", lower_gather),
    ("softmax", lower_softmax), ("reverse", lower_reverse))}
