"""linalg.softmax -> three Generics, computing what MLIR's decomposition computes.

MLIR decomposes softmax into: ``max = reduce(maxnumf, from -largest finite)``,
``e = exp(x - max)``, ``sum = reduce(addf, e, from 0)``, ``e / sum``. Here the sum reduction
computes ``exp(x - max)`` itself and the final division recomputes it, so ``e`` is never
stored (a materialized ``e`` would be a third full-size buffer with two readers). The results
are those of the decomposition, NaN and infinity included: a row holding NaN or +inf is all
NaN, a row of -inf is all NaN (0 / 0), and -inf beside finite values gives 0.
"""

from __future__ import annotations

import numpy as np
from pyree.compiler.errors import CompileError
from pyree.compiler.input.dialects.linalg import SoftmaxOp
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.kernel import (
    DTYPES,
    Acc,
    AffineExpr,
    Binary,
    Compare,
    Const,
    Expr,
    Result,
    Select,
    Unary,
    is_float,
)
from pyree.compiler.tensor_program import Generic
from xdsl.ir import SSAValue


def lower_softmax(fn: FunctionLowering, op: SoftmaxOp) -> None:
    where = location_of(op)
    if op.result is None:
        raise CompileError("linalg.softmax needs a result (-> type)", where)
    emit_softmax(fn, op.input, op.dimension.value.data, op.result, op.name, where)


def emit_softmax(fn: FunctionLowering, input: SSAValue, dim: int, output: SSAValue,
                 origin: str, where: str) -> None:
    """Binds ``output`` to the softmax of ``input`` along ``dim`` (linalg's and
    iree_linalg_ext's)."""
    x = fn.tensor(input, where)
    rank, dtype = len(x.shape), x.dtype
    if not 0 <= dim < rank:
        raise CompileError(f"softmax dimension {dim} is outside a rank-{rank} input", where)
    if not is_float(dtype):
        raise CompileError(f"softmax of {dtype} (floats only)", where)
    kept = [d for d in range(rank) if d != dim]
    reduced_shape = tuple(x.shape[d] for d in kept)
    # The reductions loop over the kept dims (parallel, in order), then over ``dim``.
    ranges = reduced_shape + (x.shape[dim],)
    x_in_reduction = tuple(_dim(rank, rank - 1 if d == dim else kept.index(d)) for d in range(rank))
    reduced_index = tuple(_dim(rank, p) for p in range(rank - 1))

    def reduction(name: str, init: float, step, reads) -> tuple:
        inputs = Inputs()
        value = step(Acc(0, dtype), reads(inputs))
        result = fn.new_value(dtype, reduced_shape, name)
        fn.emit(Generic(inputs.values, [result], (Result(0, reduced_index, value,
                                                         Const(init, dtype)),),
                        ranges, rank - 1, where, origin))
        return result

    lowest = -float(np.finfo(DTYPES[dtype]).max)
    row_max = reduction("softmax_max", lowest, _maxnumf, lambda inputs: inputs.load(x, x_in_reduction))

    def numerator(inputs: Inputs, x_index, max_index) -> Expr:
        difference = Binary("sub", inputs.load(x, x_index), inputs.load(row_max, max_index), dtype)
        return Unary("exp", difference, dtype)

    row_sum = reduction("softmax_sum", 0.0, lambda acc, e: Binary("add", acc, e, dtype),
                        lambda inputs: numerator(inputs, x_in_reduction, reduced_index))
    identity = tuple(_dim(rank, d) for d in range(rank))
    over_kept = tuple(_dim(rank, d) for d in kept)
    inputs = Inputs()
    value = Binary("div", numerator(inputs, identity, over_kept),
                   inputs.load(row_sum, over_kept), dtype)
    result = fn.bind_value(output, dtype, x.shape)  # the types match: the input's dims
    fn.emit(Generic(inputs.values, [result], (Result(0, identity, value),), x.shape, rank,
                    where, origin))


def _maxnumf(a: Expr, b: Expr) -> Expr:
    """arith.maxnumf: the larger, or the other operand where one is NaN."""
    return Select(Compare("uno", a, a), b,
                  Select(Compare("uno", b, b), a, Binary("max", a, b, a.dtype), a.dtype), a.dtype)


def _dim(num_loops: int, loop: int) -> AffineExpr:
    return AffineExpr(tuple(int(d == loop) for d in range(num_loops)))
