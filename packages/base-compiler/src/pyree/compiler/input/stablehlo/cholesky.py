"""stablehlo.cholesky: the Cholesky-Banachiewicz columns, one column after another.

For column j of L (``A = L L^T``, over the batch dims): ``v_i = A[i, j] - sum_{m<j} L[i, m] L[j, m]``
(one reduction Generic), then ``L[j, j] = sqrt(v_j)``, ``L[i, j] = v_i / L[j, j]`` below it and 0
above (one parallel Generic that copies the other columns). ``lower = false`` reads the upper
triangle (``A[j, i]``) and writes ``U = L^T``; the other triangle of the input is never read, as
in XLA. A matrix that is not positive definite gives NaN (potrf: see ``emit_cholesky``). The
columns are unrolled: 2n Generics of O(n^2) elements each, so the size is limited to ``MAX_N``.
"""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.stablehlo.common import prop
from pyree.compiler.kernel import (
    Acc,
    AffineExpr,
    Binary,
    Compare,
    Const,
    LoopIndex,
    Result,
    Select,
    Unary,
    is_float,
)
from pyree.compiler.tensor_program import Generic
from xdsl.ir import Operation

MAX_N = 64


def lower_cholesky(fn: FunctionLowering, op: Operation) -> None:
    lower_attr = prop(op, "lower")
    lower = bool(getattr(getattr(lower_attr, "value", None), "data", False))
    emit_cholesky(fn, op, lower)


def emit_cholesky(fn: FunctionLowering, op: Operation, lower: bool,
                  keep_failed_pivots: bool = False) -> None:
    """The factor of ``op``'s operand 0 into its result 0 (also LAPACK's potrf: custom_call,
    ``keep_failed_pivots``: a pivot ``<= 0`` stays on the diagonal unrooted, as OpenBLAS leaves
    it, so that potrf's info can find it; a NaN pivot is no failure there)."""
    where = location_of(op)
    a = fn.tensor(op.operands[0], where)
    name = op.name if op.name != "stablehlo.custom_call" else "LAPACK's potrf"
    dtype, shape = a.dtype, a.shape
    if len(shape) < 2 or shape[-1] != shape[-2] or not is_float(dtype):
        raise CompileError(f"{name} of {dtype}{list(shape)}: a float tensor of "
                           "square matrices is needed", where)
    n, nb = shape[-1], len(shape) - 2
    if n > MAX_N:
        raise CompileError(f"{name} of {n}x{n} matrices is not supported (at most "
                           f"{MAX_N}x{MAX_N}: the columns are unrolled)", where)
    batch = shape[:-2]
    if n == 0:  # a 0x0 factor: no columns to unroll
        out, rank = fn.result_value(op.results[0], where), len(shape)
        fn.emit(Generic([], [out], (Result(0, AffineExpr.identity(rank), Const(0.0, dtype)),),
                        shape, rank, where, op.name))
        return
    previous = None
    for j in range(n):
        # v (batch..., n): loops (batch..., i[, m < j])
        loops = nb + 1 + (1 if j else 0)
        b_ix = tuple(AffineExpr.loop(loops, d) for d in range(nb))
        i, jc = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, None, const=j)
        inputs = Inputs()
        a_ij = inputs.load(a, b_ix + ((i, jc) if lower else (jc, i)))
        v = fn.new_value(dtype, batch + (n,), "cholesky_column")
        if j:
            m = AffineExpr.loop(loops, nb + 1)
            product = Binary("mul", inputs.load(previous, b_ix + (i, m)),
                             inputs.load(previous, b_ix + (jc, m)), dtype)
            result = Result(0, b_ix + (i,), Binary("sub", Acc(0, dtype), product, dtype), a_ij)
            ranges = batch + (n, j)
        else:
            result = Result(0, b_ix + (i,), a_ij)
            ranges = batch + (n,)
        fn.emit(Generic(inputs.values, [v], (result,), ranges, nb + 1, where, op.name))
        # L_j (batch..., n, n): loops (batch..., i, k)
        loops = nb + 2
        b_ix = tuple(AffineExpr.loop(loops, d) for d in range(nb))
        i, k = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1)
        jc = AffineExpr.loop(loops, None, const=j)
        inputs = Inputs()
        pivot = inputs.load(v, b_ix + (jc,))
        diagonal = Unary("sqrt", pivot, dtype)
        if keep_failed_pivots:
            diagonal = Select(Compare("le", pivot, Const(0.0, dtype)), pivot, diagonal, dtype)
        below = Binary("div", inputs.load(v, b_ix + (i,)), diagonal, dtype)
        zero = Const(0.0, dtype)
        column = Select(Compare("gt", LoopIndex(nb), Const(j, "index")), below,
                        Select(Compare("eq", LoopIndex(nb), Const(j, "index")), diagonal, zero,
                               dtype), dtype)
        rest = inputs.load(previous, b_ix + (i, k)) if previous is not None else zero
        value = Select(Compare("eq", LoopIndex(nb + 1), Const(j, "index")), column, rest, dtype)
        last = j == n - 1
        out = fn.result_value(op.results[0], where) if last else \
            fn.new_value(dtype, shape, "cholesky_l")
        index = b_ix + ((i, k) if lower or not last else (k, i))
        fn.emit(Generic(inputs.values, [out], (Result(0, index, value),), shape, loops, where,
                        op.name))
        previous = out
