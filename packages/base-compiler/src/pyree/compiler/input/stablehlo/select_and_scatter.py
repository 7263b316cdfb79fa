"""select_and_scatter (max pooling's gradient) -> two reduction Generics.

First, per window, the select region picks an element: a reduction over the window with three
results (the selected value, its flat position in the operand, whether any was seen yet;
padding is never selected). Then each operand element folds in, through the scatter region
and from the init value, the source value of every window that selected it (a reduction over
all windows: quadratic, like ``scatter``).
"""

from __future__ import annotations

import numpy as np
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.scalar import zero
from pyree.compiler.input.stablehlo.common import affine_expr, all_of, convert, in_range, ints
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
    Unary,
)
from pyree.compiler.tensor_program import Generic
from xdsl.ir import Operation


def _flat(index: list[Expr], shape: tuple[int, ...]) -> Expr:
    """The row-major position of ``index`` in ``shape``, as i64."""
    rows = np.cumprod((1,) + shape[:0:-1])[::-1]
    out: Expr = Const(0, "index")
    for ix, row in zip(index, rows):
        out = Binary("add", out, Binary("mul", ix, Const(int(row), "index"), "index"), "index")
    return convert(out, "i64")


def lower_select_and_scatter(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    operand, source = fn.tensor(op.operands[0], where), fn.tensor(op.operands[1], where)
    shape, rank = operand.shape, len(operand.shape)
    window = ints(op, "window_dimensions")
    strides = ints(op, "window_strides", [1] * rank)
    padding = ints(op, "padding", [0] * 2 * rank)
    n = 2 * rank

    # 1. per window (source element): the selected element's flat position.
    index = [AffineExpr(tuple(strides[d] if k == d else int(k == rank + d) for k in range(n)),
                        -padding[2 * d]) for d in range(rank)]
    at = [affine_expr(ix) for ix in index]
    inside = all_of([c for d in range(rank) for c in in_range(at[d], 0, shape[d])])
    inputs = Inputs()
    dtype = operand.dtype
    best, pos, seen = Acc(0, dtype), Acc(1, "i64"), Acc(2, "i1")
    x = Select(inside, inputs.load(operand, tuple(index)), best, dtype)
    keep = lower_region(fn, op.regions[0].block, [best, x], inputs, where)[0]
    take = Binary("and", inside, Binary("or", Unary("not", seen, "i1"), Unary("not", keep, "i1"),
                                        "i1"), "i1")
    out_index = tuple(AffineExpr.loop(n, d) for d in range(rank))
    selected = [fn.new_value(dtype, source.shape, "selected"),
                fn.new_value("i64", source.shape, "selected_at"),
                fn.new_value("i1", source.shape, "selected_any")]
    fn.emit(Generic(inputs.values, selected, (
        Result(0, out_index, Select(take, x, best, dtype), zero(dtype)),
        Result(1, out_index, Select(take, _flat(at, shape), pos, "i64"), Const(-1, "i64")),
        Result(2, out_index, Binary("or", seen, inside, "i1"), Const(False, "i1"))),
        source.shape + tuple(window), rank, where, op.name))

    # 2. per operand element: fold in the source of every window that selected it.
    inputs = Inputs()
    windows = tuple(AffineExpr.loop(n, rank + d) for d in range(rank))
    acc = Acc(0, dtype)
    combined = lower_region(fn, op.regions[1].block, [acc, inputs.load(source, windows)],
                            inputs, where)[0]
    hit = Compare("eq", inputs.load(selected[1], windows),
                  _flat([LoopIndex(d) for d in range(rank)], shape))
    init = fn.scalar(op.operands[2], inputs, where)
    result = fn.result_value(op.results[0], where)
    fn.emit(Generic(inputs.values, [result], (Result(0, out_index, Select(hit, combined, acc,
                                                                            dtype), init),),
                    shape + source.shape, rank, where, op.name))
