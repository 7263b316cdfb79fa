"""reduce and reduce_window -> one reduction Generic with a result per operand.

The body region becomes each result's per-step value with ``Acc(k)`` for its accumulator
arguments, so multi-operand reductions (JAX's argmax: value and index) are one kernel whose
results read each other's accumulators. A window's padding reads the init value, as the spec
pads with it.
"""

from __future__ import annotations

from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.stablehlo.common import affine_expr, all_of, in_range, ints
from pyree.compiler.input.stablehlo.elementwise import lower_region
from pyree.compiler.input.stablehlo.shape_ops import emit_padded
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import Acc, AffineExpr, Expr, Result, Select
from pyree.compiler.tensor_program import Generic
from xdsl.ir import Operation


def _emit_reduction(fn: FunctionLowering, op: Operation, inputs: Inputs, elements: list[Expr],
                    inits: list[Expr], ranges: tuple[int, ...], num_parallel: int) -> None:
    where = location_of(op)
    n = len(ranges)
    index = tuple(AffineExpr.loop(n, d) for d in range(num_parallel))
    results = [fn.bind_value(r, tensor_type_of(r.type, where, dynamic=True)[0], ranges[:num_parallel])
               if None in tensor_type_of(r.type, where, dynamic=True)[1]  # the kept loops' sizes
               else fn.result_value(r, where) for r in op.results]
    reduces = num_parallel < n
    accs = [Acc(k, r.dtype) for k, r in enumerate(results)] if reduces else inits
    values = lower_region(fn, op.regions[0].block, [*accs, *elements], inputs, where)
    outputs = tuple(Result(k, index, v, inits[k] if reduces else None)
                    for k, v in enumerate(values))
    fn.emit(Generic(inputs.values, results, outputs, ranges, num_parallel, where, op.name))


def lower_reduce(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    half = len(op.operands) // 2
    xs = [fn.tensor(v, where) for v in op.operands[:half]]
    reduced = ints(op, "dimensions")
    shape = xs[0].shape
    kept = [d for d in range(len(shape)) if d not in reduced]
    order = kept + sorted(reduced)
    n = len(order)
    index = tuple(AffineExpr.loop(n, order.index(d)) for d in range(len(shape)))
    inputs = Inputs()
    elements = [inputs.load(x, index) for x in xs]
    inits = [fn.scalar(v, inputs, where) for v in op.operands[half:]]
    _emit_reduction(fn, op, inputs, elements, inits, tuple(shape[d] for d in order), len(kept))


def lower_reduce_window(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    half = len(op.operands) // 2
    xs = [fn.tensor(v, where) for v in op.operands[:half]]
    shape = xs[0].shape
    rank = len(shape)
    window = ints(op, "window_dimensions")
    strides = ints(op, "window_strides", [1] * rank)
    dilations = ints(op, "window_dilations", [1] * rank)
    padding = ints(op, "padding", [0] * 2 * rank)
    base = ints(op, "base_dilations", [1] * rank)
    if any(b != 1 for b in base):  # the spec's padded, dilated operand, made explicit
        xs = [emit_padded(fn, x, padding[::2], padding[1::2], [b - 1 for b in base], init,
                          where, op.name) for x, init in zip(xs, op.operands[half:])]
        shape, padding = xs[0].shape, [0] * 2 * rank
    out_shape = op.results[0].type.get_shape()
    n = 2 * rank  # output loops, then window loops
    index = []
    conds: list[Expr] = []
    for d in range(rank):
        coeffs = [0] * n
        coeffs[d], coeffs[rank + d] = strides[d], dilations[d]
        ix = AffineExpr(tuple(coeffs), -padding[2 * d])
        index.append(ix)
        if padding[2 * d] or padding[2 * d + 1]:
            conds += in_range(affine_expr(ix), 0, shape[d])
    inputs = Inputs()
    inits = [fn.scalar(v, inputs, where) for v in op.operands[half:]]
    elements = [inputs.load(x, tuple(index)) for x in xs]
    if conds:
        inside = all_of(conds)
        elements = [Select(inside, e, init, e.dtype) for e, init in zip(elements, inits)]
    _emit_reduction(fn, op, inputs, elements, inits, tuple(out_shape) + tuple(window), rank)

