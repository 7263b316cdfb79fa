"""``stablehlo.custom_call @ProductOfElementaryHouseholderReflectors(%a, %taus)`` (JAX's QR):
``Q = H_0 H_1 ... H_{k-1}`` restricted to ``a``'s n columns (LAPACK's orgqr), where
``H_i = I - tau_i v_i v_i^T`` and ``v_i`` is column i of ``a`` below the diagonal with a 1 on it.

Applied right to left to the first n columns of the identity: per reflector one reduction
Generic (``w = v_i^T Q``) and one parallel Generic (``Q - tau_i v_i w^T``), unrolled, so ``k`` is
limited to ``MAX_K``.
"""

from __future__ import annotations

from pyree.compiler.errors import CompileError
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
    Select,
    is_float,
)
from pyree.compiler.tensor_program import Generic, Value
from xdsl.ir import Operation

MAX_K = 64


def lower_householder_product(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    if len(op.operands) != 2 or len(op.results) != 1:
        raise CompileError("ProductOfElementaryHouseholderReflectors takes (a, taus) and gives "
                           "one result", where)
    a, taus = (fn.tensor(v, where) for v in op.operands)
    dtype, shape = a.dtype, a.shape
    if len(shape) < 2 or not is_float(dtype) or taus.shape[:-1] != shape[:-2] \
            or taus.dtype != dtype or taus.shape[-1] > min(shape[-2:]):
        raise CompileError(f"ProductOfElementaryHouseholderReflectors of {dtype}{list(shape)} "
                           f"and {taus.dtype}{list(taus.shape)} is not supported", where)
    k = taus.shape[-1]
    if k > MAX_K:
        raise CompileError(f"ProductOfElementaryHouseholderReflectors with {k} reflectors is not "
                           f"supported (at most {MAX_K}: they are unrolled)", where)
    householder_product(fn, a, taus, where, op.name, op.results[0])


def householder_product(fn: FunctionLowering, a: Value, taus: Value, where: str, origin: str,
                        result=None) -> Value:
    """Q's first n columns (a's shape) into ``result`` (an SSA value) or a new Value."""
    dtype, shape = a.dtype, a.shape
    nb, (m, n), k = len(shape) - 2, shape[-2:], taus.shape[-1]
    batch = shape[:-2]
    zero, one = Const(0.0, dtype), Const(1.0, dtype)
    q: Value | None = None  # None: the identity's first n columns

    def v_at(inputs: Inputs, i: int, b_ix, row: AffineExpr, row_loop: int) -> Expr:
        """Element ``row`` of v_i: 0 above the diagonal, 1 on it, a[row, i] below."""
        below = inputs.load(a, b_ix + (row, AffineExpr.loop(len(row.coeffs), None, const=i)))
        at = LoopIndex(row_loop)
        return Select(Compare("gt", at, Const(i, "index")), below,
                      Select(Compare("eq", at, Const(i, "index")), one, zero, dtype), dtype)

    def q_at(inputs: Inputs, b_ix, row: AffineExpr, col: AffineExpr, row_loop: int,
             col_loop: int) -> Expr:
        if q is not None:
            return inputs.load(q, b_ix + (row, col))
        return Select(Compare("eq", LoopIndex(row_loop), LoopIndex(col_loop)), one, zero, dtype)

    for i in range(k - 1, -1, -1):
        # w (batch..., n) = v_i^T Q: loops (batch..., c, r)
        loops = nb + 2
        b_ix = tuple(AffineExpr.loop(loops, d) for d in range(nb))
        c, r = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1)
        inputs = Inputs()
        term = Binary("mul", v_at(inputs, i, b_ix, r, nb + 1),
                      q_at(inputs, b_ix, r, c, nb + 1, nb), dtype)
        w = fn.new_value(dtype, batch + (n,), "householder_w")
        fn.emit(Generic(inputs.values, [w], (Result(0, b_ix + (c,), Binary("add", Acc(0, dtype),
                                                                          term, dtype), zero),),
                        batch + (n, m), nb + 1, where, origin))
        # Q' = Q - tau_i v_i w^T: loops (batch..., r, c)
        b_ix = tuple(AffineExpr.loop(loops, d) for d in range(nb))
        r, c = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1)
        inputs = Inputs()
        tau = inputs.load(taus, b_ix + (AffineExpr.loop(loops, None, const=i),))
        update = Binary("mul", Binary("mul", tau, v_at(inputs, i, b_ix, r, nb), dtype),
                        inputs.load(w, b_ix + (c,)), dtype)
        value = Binary("sub", q_at(inputs, b_ix, r, c, nb, nb + 1), update, dtype)
        out = fn.result_value(result, where) if i == 0 and result is not None else \
            fn.new_value(dtype, shape, "householder_q")
        fn.emit(Generic(inputs.values, [out], (Result(0, b_ix + (r, c), value),), shape, loops,
                        where, origin))
        q = out
    if k == 0:  # no reflectors: the identity's columns
        loops = nb + 2
        out = fn.result_value(result, where) if result is not None else \
            fn.new_value(dtype, shape, "householder_q")
        value = Select(Compare("eq", LoopIndex(nb), LoopIndex(nb + 1)), one, zero, dtype)
        fn.emit(Generic([], [out], (Result(0, AffineExpr.identity(loops), value),), shape, loops,
                        where, origin))
        q = out
    return q
