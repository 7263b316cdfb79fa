"""linalg structured ops (generic, named, transpose, broadcast, reduce) -> one Generic each.

Every op is first described as a ``_Structured``: operands, indexing maps, iterator kinds and a
scalar body. Loops are renumbered parallel-first; each indexing map becomes an affine index
over the new loops. The body's ``outs`` arguments read the outs tensor (parallel ops: an extra
input) or the accumulator (reductions, whose starting value is ``Result.init``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyree.compiler.errors import CompileError
from pyree.compiler.input import sub_pixel
from pyree.compiler.input.body import convert, lower_block
from pyree.compiler.input.complex_body import ComplexExpr
from pyree.compiler.input.complex_pairs import ComplexPair, real_type
from pyree.compiler.input.dialects.linalg import ElementwiseOp, MapOp
from pyree.compiler.input.function import Empty, FunctionLowering, fold
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.types import is_tensor, tensor_type_of
from pyree.compiler.kernel import Acc, AffineExpr, Const, Expr, Result
from pyree.compiler.sizes import Size
from pyree.compiler.tensor_program import Constant, Generic, Op, Value
from xdsl.dialects.builtin import ComplexType, MemRefType
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation, NamedOperation
from xdsl.dialects.linalg.ops import BroadcastOp, FillOp, ReduceOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineDimExpr,
    AffineMap,
    AffineSymExpr,
)
from xdsl.utils.exceptions import VerifyException

_LINEAR = (AffineBinaryOpKind.Add, AffineBinaryOpKind.Mul)


@dataclass
class _Structured:
    inputs: list[SSAValue]
    outputs: list[SSAValue]
    results: list[SSAValue]
    maps: list[AffineMap]
    reduction: list[bool]  # per loop
    body: Block
    cast_yield: bool  # named ops convert the yielded value to the output's element type


def is_structured(op: Operation) -> bool:
    return isinstance(op, (LinalgStructuredOperation, BroadcastOp, ReduceOp, MapOp,
                           ElementwiseOp))


def lower_structured(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    if isinstance(op, FillOp) and isinstance(fn.env.get(op.inputs[0]), Const):
        # A fill with a constant is a splat: the runtime fills it, and reductions fold it
        # into their init.
        dtype = tensor_type_of(op.res[0].type, where, dynamic=True)[0]
        result = fn.result_value(op.res[0], where)
        splat = fold(convert(fn.env[op.inputs[0]], dtype)).value
        fn.emit(Constant(result, splat=splat, location=where))
        return
    s = _describe(op, where)
    num_loops = len(s.reduction)
    order = [d for d in range(num_loops) if not s.reduction[d]]
    num_parallel = len(order)
    order += [d for d in range(num_loops) if s.reduction[d]]
    loop_of = [order.index(d) for d in range(num_loops)]

    operands = s.inputs + s.outputs
    indices = [_index(m, loop_of, where) for m in s.maps]
    loop_ranges = _loop_ranges(fn, operands, s.maps, num_loops, where)
    ranges = tuple(loop_ranges[d] for d in order)

    inputs = Inputs()
    args: dict[SSAValue, Expr | ComplexExpr] = {}
    for operand, index, arg in zip(s.inputs, indices, s.body.args):
        if not arg.uses:  # e.g. pooling's window: only its shape matters
            continue
        entry = fn.env.get(operand)
        if isinstance(entry, ComplexPair):  # its parts, read at the same place (an empty: zeros)
            re, im = (fn.value_of(part, where) for part in (entry.re, entry.im))
            args[arg] = ComplexExpr(inputs.load(re, index), inputs.load(im, index))
        elif is_tensor(operand.type):
            args[arg] = inputs.load(fn.tensor(operand, where), index)
        else:
            args[arg] = fn.scalar(operand, inputs, where)
    out_args = s.body.args[len(s.inputs):]
    out_indices = indices[len(s.inputs):]
    complex_outs = [isinstance(o.type.element_type, ComplexType) for o in s.outputs]
    dtypes = [tensor_type_of(real_type(o.type, where) if c else o.type, where, dynamic=True)[0]
              for o, c in zip(s.outputs, complex_outs)]
    reduces = num_parallel < num_loops
    if any(c and (reduces or arg.uses) for c, arg in zip(complex_outs, out_args)):
        raise CompileError(f"{op.name} that reads or reduces into a complex output (pyree "
                           "computes complex values elementwise only)", where)
    for k, (operand, index, arg) in enumerate(zip(s.outputs, out_indices, out_args)):
        if reduces:
            args[arg] = Acc(k, dtypes[k])
        elif arg.uses:  # an elementwise op that reads its outs: an ordinary input
            args[arg] = fn.splat_of(operand) or inputs.load(fn.tensor(operand, where), index)

    values = lower_block(fn, s.body, args, inputs, loop_of, where, ranges)
    outputs, results = [], []
    for k, (value, index) in enumerate(zip(values, out_indices)):
        if complex_outs[k] != isinstance(value, ComplexExpr):
            raise CompileError(f"body yields {'a complex' if complex_outs[k] else 'a real'} "
                               f"value for a{' real' if complex_outs[k] else ' complex'} output",
                               where)
        if complex_outs[k]:  # two outputs, the parts
            shape = tensor_type_of(real_type(s.results[k].type, where), where)[1]
            parts = [fn.new_value(dtypes[k], shape, name) for name in ("complex_re", "complex_im")]
            for part, v in zip(parts, (value.re, value.im)):
                outputs.append(Result(len(results), index, v))
                results.append(part)
            fn.env[s.results[k]] = ComplexPair(*parts)
            continue
        if s.cast_yield:
            value = convert(value, dtypes[k])
        elif value.dtype != dtypes[k]:
            raise CompileError(f"body yields {value.dtype} for an output of {dtypes[k]}", where)
        init = None
        if reduces:
            init = fn.splat_of(s.outputs[k]) or inputs.load(fn.tensor(s.outputs[k], where), index)
        outputs.append(Result(len(results), index, value, init))
        results.append(fn.result_value(s.results[k], where))
    generic = Generic(inputs.values, results, tuple(outputs), ranges, num_parallel, where, op.name)
    for g in (None if any(complex_outs) else _sub_pixel(fn, s, inputs, generic)) or [generic]:
        fn.emit(g)


def _sub_pixel(fn: FunctionLowering, s: _Structured, inputs: Inputs, generic: Generic) -> list[Op] | None:
    """A convolution over a zero-dilated image (a transposed convolution) in sub-pixel form."""
    for operand in s.inputs:
        d = sub_pixel.dilated(fn, operand) if is_tensor(operand.type) else None
        value = fn.env.get(operand)
        if d is not None and any(v is value for v in inputs.values):
            return sub_pixel.split(fn, generic, inputs.binding(value), d)
    return None


def _describe(op: Operation, where: str) -> _Structured:
    if isinstance(op, BroadcastOp):
        rank = len(op.init.type.get_shape())
        added = set(op.dimensions.get_values())
        kept = [d for d in range(rank) if d not in added]
        maps = [AffineMap(rank, 0, tuple(AffineDimExpr(d) for d in kept)), AffineMap.identity(rank)]
        return _Structured([op.input], [op.init], list(op.result), maps, [False] * rank,
                           op.hidden_region.block, True)
    if isinstance(op, ReduceOp):
        rank = len(op.input.type.get_shape())
        reduced = set(op.dimensions.get_values())
        kept = [d for d in range(rank) if d not in reduced]
        maps = [AffineMap.identity(rank), AffineMap(rank, 0, tuple(AffineDimExpr(d) for d in kept))]
        return _Structured([op.input], [op.init], list(op.result), maps,
                           [d in reduced for d in range(rank)], op.region.block, False)
    if isinstance(op, MapOp):  # every operand at the same place; the body reads the inputs
        rank = len(op.operands[-1].type.get_shape())
        return _Structured(list(op.operands[:-1]), [op.operands[-1]], list(op.results),
                           [AffineMap.identity(rank)] * len(op.operands), [False] * rank,
                           op.regions[0].block, False)
    if isinstance(op, ElementwiseOp):
        num_ins = op.properties["num_ins"].value.data
        rank = len(op.operands[-1].type.get_shape())
        maps = op.properties.get("indexing_maps")
        try:
            body = op.body()
        except VerifyException as err:
            raise CompileError(str(err), where) from None
        return _Structured(list(op.operands[:num_ins]), list(op.operands[num_ins:]),
                           list(op.results), [m.data for m in maps.data] if maps else
                           [AffineMap.identity(rank)] * len(op.operands), [False] * rank,
                           body.block, True)
    if any(isinstance(operand.type, MemRefType) for operand in op.operands):
        raise CompileError(f"'{op.name}' on buffers is not supported (tensors only)", where)
    return _Structured(
        list(op.inputs), list(op.outputs), list(op.res),
        [m.data for m in op.get_indexing_maps()],
        [str(t.data) == "reduction" for t in op.get_iterator_types()],
        op.body.block, isinstance(op, NamedOperation))


def _index(m: AffineMap, loop_of: list[int], where: str) -> tuple[AffineExpr, ...]:
    """Each result of ``m`` as an affine index over the normalized loops: any sum of
    ``coefficient * dim`` terms and a constant (permutations, broadcasts, and the
    ``stride * d + dilation * k`` windows of convolutions and pooling)."""
    out = []
    for expr in m.results:
        if any(isinstance(e, AffineBinaryOpExpr) and e.kind not in _LINEAR for e in expr.dfs()) \
                or any(isinstance(e, AffineSymExpr) for e in expr.dfs()):
            raise CompileError(f"indexing map {m} has a result that is not linear in the loops "
                               f"({expr}); mod, floordiv, ceildiv and symbols are not supported",
                               where)
        const = expr.eval([0] * m.num_dims, [])
        coeffs = [0] * len(loop_of)
        for d in range(m.num_dims):
            coeffs[loop_of[d]] = expr.eval([int(k == d) for k in range(m.num_dims)], []) - const
        out.append(AffineExpr(tuple(coeffs), const))
    return tuple(out)


def _loop_ranges(fn: FunctionLowering, operands: list[SSAValue], maps: list[AffineMap],
                 num_loops: int, where: str) -> list:
    """Each loop's range: the dim of the first operand it indexes directly; a static dim wins
    over a run-time size (a ``?`` the types leave open may be known elsewhere)."""
    ranges: list = [None] * num_loops
    for operand, m in zip(operands, maps):
        if not is_tensor(operand.type):
            continue
        shape = _shape(fn, operand, where)
        for dim, expr in zip(shape, m.results):
            if not isinstance(expr, AffineDimExpr):
                continue
            known = ranges[expr.position]
            if known is None:
                ranges[expr.position] = dim
            elif isinstance(known, Size) or isinstance(dim, Size):
                ranges[expr.position] = fn.unify(known, dim, where)
    if None in ranges:
        raise CompileError(f"loop d{ranges.index(None)} does not index any operand", where)
    return ranges


def _shape(fn: FunctionLowering, operand: SSAValue, where: str) -> tuple:
    """An operand's shape as lowered (run-time sizes included), else its type's."""
    entry = fn.entry(operand, where)
    if isinstance(entry, ComplexPair):
        entry = entry.re
    if isinstance(entry, (Value, Empty)):
        return entry.shape
    return tensor_type_of(operand.type, where)[1]
