"""JAX's linear-algebra custom calls: on the CPU LAPACK's (``lapack_?{potrf,getrf,trsm,geqrf,
orgqr,syevd,gesdd}_ffi``), for CUDA cuSOLVER's (``cusolver_{potrf,getrf,geqrf,orgqr,syevd}_ffi``,
``cu_lu_pivots_to_permutation``, with ``stablehlo.triangular_solve``), for TPU XLA's
``LuDecomposition``, ``Qr`` and ``Eigh``. ``jnp.linalg.cholesky``, ``qr``, ``eigh``, ``svd``
(and ``pinv``, ``lstsq``, ``matrix_rank``, ``cond``), ``lu``, ``solve``, ``inv``, ``det``,
``slogdet`` and ``jax.scipy.linalg.solve_triangular`` /
``cho_solve`` / ``lu_solve`` lower to them, with the rest of the algorithm (pivots to a
permutation, the solves' order, the determinant's sign) in plain StableHLO around them.

Each is unrolled by column as ``stablehlo.cholesky`` is (cholesky.py), over any batch dims, up
to ``MAX_N`` rows:

- potrf: that Cholesky factor (the other triangle zeros: JAX masks it); info the first
  leading minor not positive definite (JAX NaN-fills that factor), as OpenBLAS finds it.
- getrf: per column j, partial pivoting as LAPACK's: the pivot is the first row at or below j
  of the largest magnitude; rows j and p are exchanged across the whole matrix (the multipliers
  already computed too), the column below is divided by the pivot and the trailing block
  updated. The pivots come out 1-based, as LAPACK's; info is the first zero pivot's column
  (1-based), or 0.
- geqrf: LAPACK's Householder QR, dlarfg's reflectors (orgqr is householder.py's product).
- gesdd: one-sided Jacobi on the columns of A (of A^T when it is wide), the singular values
  descending, U's columns the rotated columns over their norms (a zero singular value leaves a
  zero column, where LAPACK completes the basis); a full U of a non-square matrix completes
  its columns with the rest of their Householder QR's Q.
- syevd (and XLA's Eigh): cyclic Jacobi, each sweep n-1 rounds of n/2 disjoint rotations (the
  round-robin pairing), a fixed count of sweeps; the eigenvalues ascending, the eigenvectors'
  signs as the rotations leave them (LAPACK's are as arbitrary).
- trsm: ``op(A) X = B`` (side L) or ``X op(A) = B`` (side R), A lower or upper, op the identity
  or the transpose (conjugate: the same for real types), unit or stored diagonal: rows solved
  one at a time, each then taken out of the rows still to solve.
"""

from __future__ import annotations

import numpy as np
from pyree.compiler.errors import CompileError
from pyree.compiler.input.body import convert
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.stablehlo.cholesky import MAX_N, emit_cholesky
from pyree.compiler.input.stablehlo.common import prop
from pyree.compiler.input.stablehlo.householder import householder_product, lower_householder_product
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
    is_float,
)
from pyree.compiler.tensor_program import Constant, Generic, Value
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr
from xdsl.ir import Operation


def lapack_call(name: str) -> str | None:
    """``potrf``, ``getrf``, ``trsm``, ``permutation`` or ``lu`` for the calls JAX makes of
    them: ``lapack_{s,d}<kind>_ffi`` (CPU), ``cusolver_<kind>_ffi`` and
    ``cu_lu_pivots_to_permutation`` (CUDA), XLA's ``LuDecomposition`` (TPU); else None."""
    if name == "cu_lu_pivots_to_permutation":
        return "permutation"
    if name == "LuDecomposition":
        return "lu"
    if name == "Qr":
        return "geqrf"
    if name == "Eigh":
        return "syevd"
    if name.startswith("cusolver_") and name.endswith("_ffi"):
        kind = name[len("cusolver_"):-len("_ffi")]
        return kind if kind in ("potrf", "getrf", "geqrf", "orgqr", "syevd") else None
    if not (name.startswith("lapack_") and name.endswith("_ffi")) or len(name) < 12:
        return None
    kind = name[len("lapack_") + 1:-len("_ffi")]
    known = ("potrf", "getrf", "trsm", "geqrf", "orgqr", "syevd", "gesdd")
    return kind if name[len("lapack_")] in "sd" and kind in known else None


def lower_lapack(fn: FunctionLowering, op: Operation, kind: str) -> None:
    {"potrf": _potrf, "getrf": _getrf, "trsm": _trsm, "permutation": _permutation,
     "lu": lambda fn, op: _getrf(fn, op, base=0), "geqrf": _geqrf,
     "orgqr": lower_householder_product, "syevd": _syevd, "gesdd": _gesdd}[kind](fn, op)


def _config(op: Operation) -> dict[str, str]:
    """``mhlo.backend_config = {uplo = 76 : ui8, ...}`` as letters: {"uplo": "L", ...};
    cuSOLVER's ``{lower = true}`` as {"uplo": "L" or "U"}."""
    attr = prop(op, "mhlo.backend_config")
    if not isinstance(attr, DictionaryAttr):
        return {}
    config = {}
    for key, value in attr.data.items():
        if key == "lower" and isinstance(value, IntegerAttr):
            config["uplo"] = "L" if value.value.data else "U"
        elif isinstance(value, IntegerAttr):
            config[key] = chr(int(value.value.data))
    return config


def _square(fn: FunctionLowering, op: Operation, index: int, where: str,
            square: bool = True) -> Value:
    a = fn.tensor(op.operands[index], where)
    if len(a.shape) < 2 or not is_float(a.dtype) or (square and a.shape[-1] != a.shape[-2]):
        raise CompileError(f"{_name(op)} of {a.dtype}{list(a.shape)}: a float tensor of "
                           f"{'square ' if square else ''}matrices is needed", where)
    if max(a.shape[-2:]) > MAX_N:
        raise CompileError(f"{_name(op)} of {a.shape[-2]}x{a.shape[-1]} matrices is not "
                           f"supported (at most {MAX_N} rows and columns: the columns are "
                           "unrolled)", where)
    return a


def _name(op: Operation) -> str:
    if op.name != "stablehlo.custom_call":
        return op.name
    target = op.properties.get("call_target_name") or op.attributes.get("call_target_name")
    return f"stablehlo.custom_call @{getattr(target, 'data', '?')}"


def _potrf(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    _square(fn, op, 0, where)
    emit_cholesky(fn, op, _config(op).get("uplo", "L") == "L", keep_failed_pivots=True)
    if len(op.results) > 1:
        _potrf_info(fn, op, where)


def _potrf_info(fn: FunctionLowering, op: Operation, where: str) -> None:
    """LAPACK's info: the order (1-based) of the first leading minor that is not positive
    definite, the first pivot ``<= 0`` kept on the diagonal (a NaN is none, as in OpenBLAS,
    whose potrf JAX calls), else 0. JAX NaN-fills each factor whose info is not 0."""
    from pyree.compiler.input.types import tensor_type_of
    factor = fn.env[op.results[0]]
    dtype, shape = tensor_type_of(op.results[1].type, where)
    nb, n = len(factor.shape) - 2, factor.shape[-1]
    loops = nb + 1
    b_ix = tuple(AffineExpr.loop(loops, d) for d in range(nb))
    j = AffineExpr.loop(loops, nb)
    inputs, none = Inputs(), Const(n + 1, dtype)
    failed = Compare("le", inputs.load(factor, b_ix + (j, j)), Const(0.0, factor.dtype))
    order = Binary("add", convert(LoopIndex(nb), dtype), Const(1, dtype), dtype)
    first = Binary("min", Acc(0, dtype), Select(failed, order, none, dtype), dtype)
    info = Select(Compare("eq", Acc(0, dtype), none), Const(0, dtype), Acc(0, dtype), dtype)
    out = fn.result_value(op.results[1], where)
    fn.emit(Generic(inputs.values, [out], (Result(0, b_ix, first, init=none, epilogue=info),),
                    factor.shape[:-1], nb, where, _name(op)))


def _zeros_like_result(fn: FunctionLowering, op: Operation, index: int, where: str):
    """An all-zero info result (a rank-0 one as a constant)."""
    from pyree.compiler.input.types import tensor_type_of
    dtype, shape = tensor_type_of(op.results[index].type, where)
    if shape == ():
        return Const(0, dtype)
    out = fn.result_value(op.results[index], where)
    rank = len(shape)
    fn.emit(Generic([], [out], (Result(0, AffineExpr.identity(rank), Const(0, dtype)),), shape,
                    rank, where, _name(op)))
    return out


# ---- getrf ---------------------------------------------------------------------------------

def _getrf(fn: FunctionLowering, op: Operation, base: int = 1) -> None:
    """LAPACK's and cuSOLVER's getrf (pivots ``base``d: 1; results lu, pivots, info), or
    XLA's ``LuDecomposition`` (base 0; results lu, pivots, permutation)."""
    where = location_of(op)
    a = _square(fn, op, 0, where, square=False)
    shape = a.shape
    batch, (m, n) = shape[:-2], shape[-2:]
    steps = min(m, n)
    origin = _name(op)
    pivots = None
    for j in range(steps):
        p = _pivot_row(fn, a, j, where, origin)
        a = _eliminate(fn, a, p, j, where, origin,
                       op.results[0] if j == steps - 1 else None)
        pivots = _with_entry(fn, pivots, p, j, batch, steps, where, origin,
                             op.results[1] if j == steps - 1 else None, "lu_pivots", add=base)
    if steps == 0:
        raise CompileError(f"{origin} of an empty matrix ({shape})", where)
    fn.env[op.results[1]] = pivots
    if base == 0:
        _permutation_of(fn, op, pivots, op.results[2])
    else:
        fn.env[op.results[2]] = _first_zero_pivot(fn, a, op, steps, where, origin)


def _batch_ix(loops: int, nb: int) -> tuple[AffineExpr, ...]:
    return tuple(AffineExpr.loop(loops, d) for d in range(nb))


def _pivot_row(fn: FunctionLowering, a: Value, j: int, where: str, origin: str) -> Value:
    """(batch...) i32: the first row i >= j of the largest |a[i, j]| (j where all are NaN)."""
    nb, m = len(a.shape) - 2, a.shape[-2]
    batch, dtype = a.shape[:-2], a.dtype
    loops = nb + 1
    b_ix = _batch_ix(loops, nb)
    row = AffineExpr.loop(loops, nb, 1, j)
    col = AffineExpr.loop(loops, None, const=j)
    inputs = Inputs()
    magnitude = Unary("abs", inputs.load(a, b_ix + (row, col)), dtype)
    largest = fn.new_value(dtype, batch, "lu_pivot_magnitude")
    fn.emit(Generic(inputs.values, [largest], (Result(0, b_ix, Binary(
        "max", Acc(0, dtype), magnitude, dtype), Const(float("-inf"), dtype)),),
        batch + (m - j,), nb, where, origin))
    inputs = Inputs()
    magnitude = Unary("abs", inputs.load(a, b_ix + (row, col)), dtype)
    at = convert(Binary("add", LoopIndex(nb), Const(j, "index"), "index"), "i32")
    hit = Compare("eq", magnitude, inputs.load(largest, b_ix))
    first = Select(hit, at, Const(m, "i32"), "i32")
    found = fn.new_value("i32", batch, "lu_pivot_first")
    fn.emit(Generic(inputs.values, [found], (Result(0, b_ix, Binary(
        "min", Acc(0, "i32"), first, "i32"), Const(m, "i32")),), batch + (m - j,), nb, where,
        origin))
    inputs = Inputs()
    loops = nb
    b_ix = _batch_ix(loops, nb)
    f = inputs.load(found, b_ix)
    pick = Select(Compare("eq", f, Const(m, "i32")), Const(j, "i32"), f, "i32")
    p = fn.new_value("i32", batch, "lu_pivot")
    fn.emit(Generic(inputs.values, [p], (Result(0, b_ix, pick),), batch, nb, where, origin))
    return p


def _eliminate(fn: FunctionLowering, a: Value, p: Value, j: int, where: str, origin: str,
               result) -> Value:
    """Rows j and p exchanged, column j below divided by the pivot, the trailing block updated."""
    nb = len(a.shape) - 2
    dtype, shape = a.dtype, a.shape
    loops = nb + 2
    b_ix = _batch_ix(loops, nb)
    i, k = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1)
    jc = AffineExpr.loop(loops, None, const=j)
    inputs = Inputs()
    pivot_row = convert(inputs.load(p, b_ix), "index")
    batch_index = tuple(LoopIndex(d) for d in range(nb))

    def at_pivot_row(column: Expr) -> Expr:
        return inputs.gather(a, batch_index + (pivot_row, column), where)

    i_is_p = Compare("eq", LoopIndex(nb), pivot_row)
    swapped = Select(i_is_p, inputs.load(a, b_ix + (jc, k)), inputs.load(a, b_ix + (i, k)), dtype)
    swapped_j = Select(i_is_p, inputs.load(a, b_ix + (jc, jc)), inputs.load(a, b_ix + (i, jc)), dtype)
    pivot = at_pivot_row(Const(j, "index"))
    multiplier = Binary("div", swapped_j, pivot, dtype)
    updated = Binary("sub", swapped, Binary("mul", multiplier, at_pivot_row(LoopIndex(nb + 1)),
                                            dtype), dtype)
    row, col = LoopIndex(nb), LoopIndex(nb + 1)
    below = Select(Compare("eq", col, Const(j, "index")), multiplier,
                   Select(Compare("gt", col, Const(j, "index")), updated, swapped, dtype), dtype)
    value = Select(Compare("eq", row, Const(j, "index")), at_pivot_row(col),
                   Select(Compare("gt", row, Const(j, "index")), below,
                          inputs.load(a, b_ix + (i, k)), dtype), dtype)
    out = fn.result_value(result, where) if result is not None else \
        fn.new_value(dtype, shape, "lu")
    fn.emit(Generic(inputs.values, [out], (Result(0, b_ix + (i, k), value),), shape, loops,
                    where, origin))
    return out


def _with_entry(fn: FunctionLowering, so_far: Value | None, entry: Value, j: int, batch: tuple,
                steps: int, where: str, origin: str, result, name: str, add: int = 0) -> Value:
    """The per-column vector so far (batch..., steps) with column j's ``entry`` (plus ``add``):
    getrf's pivots, geqrf's taus."""
    nb, dtype = len(batch), entry.dtype
    loops = nb + 1
    b_ix = _batch_ix(loops, nb)
    inputs = Inputs()
    mine = inputs.load(entry, b_ix)
    if add:
        mine = Binary("add", mine, Const(add, dtype), dtype)
    before = inputs.load(so_far, b_ix + (AffineExpr.loop(loops, nb),)) if so_far is not None \
        else Const(0.0 if is_float(dtype) else 0, dtype)
    value = Select(Compare("eq", LoopIndex(nb), Const(j, "index")), mine, before, dtype)
    out = fn.result_value(result, where) if result is not None else \
        fn.new_value(dtype, batch + (steps,), name)
    fn.emit(Generic(inputs.values, [out], (Result(0, AffineExpr.identity(loops), value),),
                    batch + (steps,), loops, where, origin))
    return out


def _first_zero_pivot(fn: FunctionLowering, lu: Value, op: Operation, steps: int, where: str,
                      origin: str):
    """LAPACK's info: the first column (1-based) whose pivot is 0, else 0."""
    nb = len(lu.shape) - 2
    batch = lu.shape[:-2]
    loops = nb + 1
    b_ix = _batch_ix(loops, nb)
    j = AffineExpr.loop(loops, nb)
    inputs = Inputs()
    diagonal = inputs.load(lu, b_ix + (j, j))
    column = convert(Binary("add", LoopIndex(nb), Const(1, "index"), "index"), "i32")
    zero = Compare("eq", diagonal, Const(0.0, lu.dtype))
    candidate = Select(zero, column, Const(steps + 1, "i32"), "i32")
    first = fn.new_value("i32", batch, "lu_first_zero")
    fn.emit(Generic(inputs.values, [first], (Result(0, b_ix, Binary(
        "min", Acc(0, "i32"), candidate, "i32"), Const(steps + 1, "i32")),), batch + (steps,), nb,
        where, origin))
    inputs = Inputs()
    b_ix = _batch_ix(nb, nb)
    f = inputs.load(first, b_ix)
    info = Select(Compare("eq", f, Const(steps + 1, "i32")), Const(0, "i32"), f, "i32")
    out = fn.result_value(op.results[2], where)
    fn.emit(Generic(inputs.values, [out], (Result(0, b_ix, info),), batch, nb, where, origin))
    return out


# ---- trsm ----------------------------------------------------------------------------------

def _trsm(fn: FunctionLowering, op: Operation) -> None:
    config = _config(op)
    emit_triangular_solve(fn, op, left=config.get("side", "L") == "L",
                          lower=config.get("uplo", "L") == "L",
                          transposed=config.get("trans_x", "N") in ("T", "C"),
                          unit=config.get("diag", "N") == "U")


def lower_triangular_solve(fn: FunctionLowering, op: Operation) -> None:
    """``stablehlo.triangular_solve`` (what JAX's CUDA and TPU lowerings emit): trsm's steps."""
    def flag(name: str) -> bool:
        attr = prop(op, name)
        return bool(getattr(getattr(attr, "value", None), "data", False))
    transpose = prop(op, "transpose_a")
    emit_triangular_solve(fn, op, left=flag("left_side"), lower=flag("lower"),
                          transposed="NO_TRANSPOSE" not in str(getattr(transpose, "data", "")),
                          unit=flag("unit_diagonal"))


def emit_triangular_solve(fn: FunctionLowering, op: Operation, *, left: bool, lower: bool,
                          transposed: bool, unit: bool) -> None:
    where = location_of(op)
    a = _square(fn, op, 0, where)
    b = _square(fn, op, 1, where, square=False)
    n = b.shape[-2] if left else b.shape[-1]
    if a.shape[-1] != n:
        raise CompileError(f"{_name(op)}: a {a.shape[-1]}x{a.shape[-1]} triangle for "
                           f"{list(b.shape)} on the {'left' if left else 'right'}", where)
    # Solve T Y = C with the rows of Y being B's rows (left) or columns (right): T = op(A), or
    # op(A)^T on the right; T is lower where A is lower and not (effectively) transposed.
    across = transposed != (not left)  # T[q, i] is A[i, q]
    forward = lower != across  # T lower: solve the first row first
    order = range(n) if forward else range(n - 1, -1, -1)
    x = b
    origin = _name(op)
    for step, i in enumerate(order):
        last = step == n - 1
        x = _solve_row(fn, a, x, i, left, across, forward, unit, where, origin,
                       op.results[0] if last else None)
    if n == 0:
        fn.env[op.results[0]] = b


def _solve_row(fn: FunctionLowering, a: Value, c: Value, i: int, left: bool, across: bool,
               forward: bool, unit: bool, where: str, origin: str, result) -> Value:
    """Row i of Y (T[i, i] y_i = c_i) into ``c``, and T[q, i] y_i taken from the rows q solved
    after it; the other rows unchanged."""
    nb = len(c.shape) - 2
    dtype, shape = c.dtype, c.shape
    loops = nb + 2
    b_ix = _batch_ix(loops, nb)
    r, s = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1)
    ic = AffineExpr.loop(loops, None, const=i)
    q_loop, q = (r, nb) if left else (s, nb + 1)  # Y's row: B's row (left) or column (right)
    inputs = Inputs()

    def c_at(row: AffineExpr) -> Expr:  # C[row, this column]
        return inputs.load(c, b_ix + ((row, s) if left else (r, row)))

    def t_at(row: AffineExpr, col: AffineExpr) -> Expr:
        return inputs.load(a, b_ix + ((col, row) if across else (row, col)))

    y = c_at(ic) if unit else Binary("div", c_at(ic), t_at(ic, ic), dtype)
    here = LoopIndex(q)
    later = Compare("gt" if forward else "lt", here, Const(i, "index"))
    reduced = Binary("sub", c_at(q_loop), Binary("mul", t_at(q_loop, ic), y, dtype), dtype)
    value = Select(Compare("eq", here, Const(i, "index")), y,
                   Select(later, reduced, c_at(q_loop), dtype), dtype)
    out = fn.result_value(result, where) if result is not None else \
        fn.new_value(dtype, shape, "trsm")
    fn.emit(Generic(inputs.values, [out], (Result(0, b_ix + (r, s), value),), shape, loops,
                    where, origin))
    return out


# ---- pivots to a permutation ---------------------------------------------------------------

def _permutation(fn: FunctionLowering, op: Operation) -> None:
    """``cu_lu_pivots_to_permutation``."""
    _permutation_of(fn, op, fn.tensor(op.operands[0], location_of(op)), op.results[0])


def _permutation_of(fn: FunctionLowering, op: Operation, pivots: Value, result) -> None:
    """0-based pivots (row i was exchanged with row p_i, in order) to the permutation of the
    result's rows they make: the identity, then each exchange applied in turn."""
    from pyree.compiler.input.types import tensor_type_of
    where = location_of(op)
    dtype, shape = tensor_type_of(result.type, where)
    nb, steps, size = len(shape) - 1, pivots.shape[-1], shape[-1]
    if steps > MAX_N:
        raise CompileError(f"{_name(op)} of {steps} pivots is not supported (at most {MAX_N}: "
                           "the exchanges are unrolled)", where)
    loops = nb + 1
    b_ix = _batch_ix(loops, nb)
    batch_index = tuple(LoopIndex(d) for d in range(nb))
    perm = None
    for i in range(min(steps, size)):
        inputs = Inputs()
        p = convert(inputs.load(pivots, b_ix + (AffineExpr.loop(loops, None, const=i),)), "index")
        q = LoopIndex(nb)

        def at(row: Expr, inputs=inputs, perm=perm) -> Expr:
            if perm is None:
                return convert(row, dtype)
            return inputs.gather(perm, batch_index + (row,), where)

        value = Select(Compare("eq", q, Const(i, "index")), at(p),
                       Select(Compare("eq", q, p), at(Const(i, "index")), at(q), dtype), dtype)
        last = i == min(steps, size) - 1
        out = fn.result_value(result, where) if last else \
            fn.new_value(dtype, shape, "permutation")
        fn.emit(Generic(inputs.values, [out], (Result(0, AffineExpr.identity(loops), value),),
                        shape, loops, where, _name(op)))
        perm = out
    if perm is None:
        raise CompileError(f"{_name(op)} of no pivots", where)


# ---- geqrf ---------------------------------------------------------------------------------

def _geqrf(fn: FunctionLowering, op: Operation) -> None:
    """LAPACK's Householder QR (geqrf; cuSOLVER's and XLA's ``Qr`` alike): per column j the
    reflector of LAPACK's dlarfg (beta = -sign(alpha) |(alpha, x)|, tau = (beta - alpha) / beta,
    v = x / (alpha - beta); none where x is 0) applied to the columns right of it. R on and
    above the diagonal, the reflectors below it, and the taus."""
    where = location_of(op)
    a = _square(fn, op, 0, where, square=False)
    if min(a.shape[-2:]) == 0:
        raise CompileError(f"{_name(op)} of an empty matrix ({a.shape})", where)
    fn.env[op.results[0]], fn.env[op.results[1]] = _qr(fn, a, where, _name(op), op.results)


def _qr(fn: FunctionLowering, a: Value, where: str, origin: str, results=(None, None)):
    """(R with the reflectors below it, the taus) of ``a``, into ``results`` where given."""
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    steps = min(m, n)
    taus = None
    for j in range(steps):
        tau, scale, beta = _reflector(fn, a, j, where, origin)
        w = _reflected_columns(fn, a, j, scale, where, origin)
        a = _reflect(fn, a, j, tau, scale, beta, w, where, origin,
                     results[0] if j == steps - 1 else None)
        taus = _with_entry(fn, taus, tau, j, batch, steps, where, origin,
                           results[1] if j == steps - 1 else None, "qr_taus")
    return a, taus


def _batch_value(fn: FunctionLowering, batch: tuple, dtype: str, build, inputs: Inputs,
                 name: str, where: str, origin: str) -> Value:
    nb = len(batch)
    out = fn.new_value(dtype, batch, name)
    fn.emit(Generic(inputs.values, [out], (Result(0, _batch_ix(nb, nb), build),), batch, nb,
                    where, origin))
    return out


def _reflector(fn: FunctionLowering, a: Value, j: int, where: str, origin: str):
    """(tau, scale, beta) per matrix for column j: dlarfg's."""
    nb, m = len(a.shape) - 2, a.shape[-2]
    dtype, batch = a.dtype, a.shape[:-2]
    loops = nb + 1
    b_ix = _batch_ix(loops, nb)
    inputs = Inputs()
    below = inputs.load(a, b_ix + (AffineExpr.loop(loops, nb, 1, j + 1),
                                   AffineExpr.loop(loops, None, const=j)))
    squares = fn.new_value(dtype, batch, "qr_column_norm")
    fn.emit(Generic(inputs.values, [squares], (Result(0, b_ix, Binary(
        "add", Acc(0, dtype), Binary("mul", below, below, dtype), dtype), Const(0.0, dtype)),),
        batch + (m - j - 1,), nb, where, origin))
    b_ix = _batch_ix(nb, nb)
    jc = AffineExpr.loop(nb, None, const=j)

    def per_matrix(kind: str):
        inputs = Inputs()
        alpha = inputs.load(a, b_ix + (jc, jc))
        x2 = inputs.load(squares, b_ix)
        none = Compare("eq", x2, Const(0.0, dtype))
        norm = Unary("sqrt", Binary("add", Binary("mul", alpha, alpha, dtype), x2, dtype), dtype)
        negative = Compare("lt", alpha, Const(0.0, dtype))
        beta = Select(negative, norm, Unary("neg", norm, dtype), dtype)
        if kind == "tau":
            value = Select(none, Const(0.0, dtype),
                           Binary("div", Binary("sub", beta, alpha, dtype), beta, dtype), dtype)
        elif kind == "scale":
            value = Select(none, Const(1.0, dtype), Binary(
                "div", Const(1.0, dtype), Binary("sub", alpha, beta, dtype), dtype), dtype)
        else:
            value = Select(none, alpha, beta, dtype)
        return _batch_value(fn, batch, dtype, value, inputs, f"qr_{kind}", where, origin)

    return per_matrix("tau"), per_matrix("scale"), per_matrix("beta")


def _reflected_columns(fn: FunctionLowering, a: Value, j: int, scale: Value, where: str,
                       origin: str) -> Value:
    """w[c] = v . a[j:, c] for every column c (v = (1, x scaled))."""
    nb, (m, n) = len(a.shape) - 2, a.shape[-2:]
    dtype, batch = a.dtype, a.shape[:-2]
    loops = nb + 2  # (batch..., c | i)
    b_ix = _batch_ix(loops, nb)
    c, i = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1, 1, j)
    jc = AffineExpr.loop(loops, None, const=j)
    inputs = Inputs()
    v = Select(Compare("eq", LoopIndex(nb + 1), Const(0, "index")), Const(1.0, dtype),
               Binary("mul", inputs.load(a, b_ix + (i, jc)), inputs.load(scale, b_ix), dtype),
               dtype)
    w = fn.new_value(dtype, batch + (n,), "qr_w")
    fn.emit(Generic(inputs.values, [w], (Result(0, b_ix + (c,), Binary(
        "add", Acc(0, dtype), Binary("mul", v, inputs.load(a, b_ix + (i, c)), dtype), dtype),
        Const(0.0, dtype)),), batch + (n, m - j), nb + 1, where, origin))
    return w


def _reflect(fn: FunctionLowering, a: Value, j: int, tau: Value, scale: Value, beta: Value,
             w: Value, where: str, origin: str, result) -> Value:
    nb = len(a.shape) - 2
    dtype, shape = a.dtype, a.shape
    loops = nb + 2
    b_ix = _batch_ix(loops, nb)
    i, c = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1)
    jc = AffineExpr.loop(loops, None, const=j)
    inputs = Inputs()
    row, col = LoopIndex(nb), LoopIndex(nb + 1)
    here = inputs.load(a, b_ix + (i, c))
    v = Select(Compare("eq", row, Const(j, "index")), Const(1.0, dtype),
               Binary("mul", inputs.load(a, b_ix + (i, jc)), inputs.load(scale, b_ix), dtype),
               dtype)
    updated = Binary("sub", here, Binary("mul", Binary("mul", inputs.load(tau, b_ix), v, dtype),
                                         inputs.load(w, b_ix + (c,)), dtype), dtype)
    column = Select(Compare("eq", row, Const(j, "index")), inputs.load(beta, b_ix),
                    Select(Compare("gt", row, Const(j, "index")),
                           Binary("mul", here, inputs.load(scale, b_ix), dtype), here, dtype), dtype)
    right = Select(Compare("ge", row, Const(j, "index")), updated, here, dtype)
    value = Select(Compare("eq", col, Const(j, "index")), column,
                   Select(Compare("gt", col, Const(j, "index")), right, here, dtype), dtype)
    out = fn.result_value(result, where) if result is not None else \
        fn.new_value(dtype, shape, "qr")
    fn.emit(Generic(inputs.values, [out], (Result(0, b_ix + (i, c), value),), shape, loops,
                    where, origin))
    return out


# ---- syevd: cyclic Jacobi ------------------------------------------------------------------

def _sweeps(dtype: str) -> int:
    """Sweeps enough for the rotations to converge (quadratically, after the first few) to the
    type's precision for matrices up to MAX_N."""
    return 14 if dtype == "f64" else 10


def _round_robin(n: int) -> list[list[int]]:
    """Per round, each index's partner (itself when it sits out): n - 1 rounds (n even) or n
    (odd) in which every pair meets once (the circle method)."""
    m = n + n % 2
    players = list(range(m))
    rounds = []
    for _ in range(m - 1):
        partner = list(range(n))
        for k in range(m // 2):
            a, b = players[k], players[m - 1 - k]
            if a < n and b < n:
                partner[a], partner[b] = b, a
        rounds.append(partner)
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def _identity(fn: FunctionLowering, batch: tuple, n: int, dtype: str, name: str, where: str,
              origin: str) -> Value:
    nb = len(batch)
    loops = nb + 2
    inputs = Inputs()
    out = fn.new_value(dtype, batch + (n, n), name)
    fn.emit(Generic(inputs.values, [out], (Result(0, AffineExpr.identity(loops), Select(
        Compare("eq", LoopIndex(nb), LoopIndex(nb + 1)), Const(1.0, dtype), Const(0.0, dtype),
        dtype)),), batch + (n, n), loops, where, origin))
    return out


def _partner_tables(fn: FunctionLowering, n: int, name: str, where: str) -> list[Value]:
    """``_round_robin(n)`` as i32 constants, one per round."""
    tables = []
    for partner in _round_robin(n):
        table = fn.new_value("i32", (n,), name)
        fn.emit(Constant(table, data=np.array(partner, np.int32), location=where))
        tables.append(table)
    return tables


def _jacobi(alpha: Expr, beta: Expr, gamma: Expr, is_p: Expr, alone: Expr, dtype: str):
    """(keep, mix) of the rotation that zeroes the off-diagonal ``gamma`` of the 2x2 block
    ((alpha, gamma), (gamma, beta)), for an index that is the pair's p (``is_p``) or q: its new
    column is keep * its own + mix * its partner's (keep = c; mix = -s for p, s for q). No
    rotation where ``gamma`` is 0 or the index sits this round out (``alone``)."""
    def b(kind, x, y):
        return Binary(kind, x, y, dtype)

    def c(v):
        return Const(v, dtype)

    theta = b("div", b("sub", beta, alpha), b("mul", c(2.0), gamma))
    sign = Select(Compare("lt", theta, c(0.0)), c(-1.0), c(1.0), dtype)
    t = b("div", sign, b("add", Unary("abs", theta, dtype),
                          Unary("sqrt", b("add", b("mul", theta, theta), c(1.0)), dtype)))
    # |theta| past ~1e19 (f32) squares to inf: t is then 1 / (2 |theta|), as the limit says
    t = Select(Compare("lt", Unary("abs", theta, dtype), c(1e18)), t,
               b("div", sign, b("mul", c(2.0), Unary("abs", theta, dtype))), dtype)
    cos = b("div", c(1.0), Unary("sqrt", b("add", b("mul", t, t), c(1.0)), dtype))
    sin = b("mul", t, cos)
    still = Binary("or", Compare("eq", gamma, c(0.0)), alone, "i1")
    keep = Select(still, c(1.0), cos, dtype)
    mix = Select(still, c(0.0), Select(is_p, Unary("neg", sin, dtype), sin, dtype), dtype)
    return keep, mix


def _coefficients(fn: FunctionLowering, build, partner: Value, batch: tuple, n: int, dtype: str,
                  where: str, origin: str) -> tuple[Value, Value]:
    """keep and mix (batch..., n): ``build(inputs, me, other, is_p)`` gives alpha, beta, gamma."""
    nb = len(batch)
    loops = nb + 1
    inputs = Inputs()
    me = LoopIndex(nb)
    other = convert(inputs.load(partner, (AffineExpr.loop(loops, nb),)), "index")
    is_p = Compare("lt", me, other)
    alpha, beta, gamma = build(inputs, me, other, is_p)
    keep, mix = _jacobi(alpha, beta, gamma, is_p, Compare("eq", me, other), dtype)
    keeps = fn.new_value(dtype, batch + (n,), "jacobi_keep")
    mixes = fn.new_value(dtype, batch + (n,), "jacobi_mix")
    ix = AffineExpr.identity(loops)
    fn.emit(Generic(inputs.values, [keeps, mixes], (Result(0, ix, keep), Result(1, ix, mix)),
                    batch + (n,), loops, where, origin))
    return keeps, mixes


def _syevd(fn: FunctionLowering, op: Operation) -> None:
    """Results (vectors, values[, info]) for LAPACK's and cuSOLVER's; XLA's Eigh gives
    (vectors, values) and says its triangle first in ``backend_config``."""
    where = location_of(op)
    a = _square(fn, op, 0, where)
    dtype, shape = a.dtype, a.shape
    nb, n = len(shape) - 2, shape[-1]
    origin = _name(op)
    config = _config(op)
    text = prop(op, "backend_config")
    if "Eigh" in origin and text is not None and hasattr(text, "data"):
        lower = str(text.data).split(",")[0].strip() not in ("0", "false")
    else:
        lower = config.get("uplo", "L") == "L"
    loops = nb + 2
    b_ix = _batch_ix(loops, nb)
    i, j = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1)
    inputs = Inputs()
    named = Compare("ge" if lower else "le", LoopIndex(nb), LoopIndex(nb + 1))
    sym = fn.new_value(dtype, shape, "eigh_a")
    fn.emit(Generic(inputs.values, [sym], (Result(0, b_ix + (i, j), Select(
        named, inputs.load(a, b_ix + (i, j)), inputs.load(a, b_ix + (j, i)), dtype)),),
        shape, loops, where, origin))
    vectors = _identity(fn, shape[:-2], n, dtype, "eigh_v", where, origin)
    batch_index = tuple(LoopIndex(d) for d in range(nb))

    def block(a):  # alpha, beta, gamma: A[p, p], A[q, q], A[p, q]
        def build(inputs, me, other, is_p):
            p, q = Select(is_p, me, other, "index"), Select(is_p, other, me, "index")
            return tuple(inputs.gather(a, batch_index + ix, where)
                         for ix in ((p, p), (q, q), (p, q)))
        return build

    tables = _partner_tables(fn, n, "eigh_partner", where)
    for _ in range(_sweeps(dtype) if n > 1 else 0):
        for table in tables:
            keep, mix = _coefficients(fn, block(sym), table, shape[:-2], n, dtype, where, origin)
            sym = _rotate(fn, sym, table, keep, mix, where, origin)
            vectors = _turn_columns(fn, vectors, table, keep, mix, where, origin)
    values, order = _sorted(fn, _diagonal(fn, sym, where, origin), where, origin)
    results = list(op.results)
    fn.env[results[1]] = _copy_into(fn, values, results[1], where, origin)
    fn.env[results[0]] = _sorted_columns(fn, vectors, order, None, where, origin, results[0])
    if len(results) > 2:
        fn.env[results[2]] = _zeros_like_result(fn, op, 2, where)


def _rotate(fn: FunctionLowering, a: Value, partner: Value, keep: Value, mix: Value,
            where: str, origin: str) -> Value:
    """A' = J^T A J for this round's rotations."""
    nb = len(a.shape) - 2
    dtype, shape = a.dtype, a.shape
    loops = nb + 2
    b_ix = _batch_ix(loops, nb)
    i, j = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1)
    batch_index = tuple(LoopIndex(d) for d in range(nb))

    def b(kind, x, y):
        return Binary(kind, x, y, dtype)

    inputs = Inputs()
    pi = convert(inputs.load(partner, (i,)), "index")
    pj = convert(inputs.load(partner, (j,)), "index")
    ki, mi = inputs.load(keep, b_ix + (i,)), inputs.load(mix, b_ix + (i,))
    kj, mj = inputs.load(keep, b_ix + (j,)), inputs.load(mix, b_ix + (j,))
    row, col = LoopIndex(nb), LoopIndex(nb + 1)

    def at(r, c):
        return inputs.gather(a, batch_index + (r, c), where)

    value = b("add", b("add", b("mul", b("mul", ki, kj), inputs.load(a, b_ix + (i, j))),
                           b("mul", b("mul", ki, mj), at(row, pj))),
              b("add", b("mul", b("mul", mi, kj), at(pi, col)),
                b("mul", b("mul", mi, mj), at(pi, pj))))
    rotated = fn.new_value(dtype, shape, "eigh_a")
    fn.emit(Generic(inputs.values, [rotated], (Result(0, b_ix + (i, j), value),), shape, loops,
                    where, origin))
    return rotated


def _diagonal(fn: FunctionLowering, a: Value, where: str, origin: str) -> Value:
    nb, n = len(a.shape) - 2, a.shape[-1]
    loops = nb + 1
    b_ix = _batch_ix(loops, nb)
    k = AffineExpr.loop(loops, nb)
    inputs = Inputs()
    out = fn.new_value(a.dtype, a.shape[:-2] + (n,), "diagonal")
    fn.emit(Generic(inputs.values, [out], (Result(0, b_ix + (k,), inputs.load(a, b_ix + (k, k))),),
                    a.shape[:-2] + (n,), loops, where, origin))
    return out


def _sorted(fn: FunctionLowering, keys: Value, where: str, origin: str,
            descending: bool = False):
    """(``keys`` (batch..., n) sorted, the order: order[k] is the index of the k-th), ties in
    index order, by counting."""
    nb, n = len(keys.shape) - 1, keys.shape[-1]
    dtype, batch = keys.dtype, keys.shape[:-1]
    loops = nb + 2
    b_ix = _batch_ix(loops, nb)
    i, j = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1)
    inputs = Inputs()
    ki, kj = inputs.load(keys, b_ix + (i,)), inputs.load(keys, b_ix + (j,))
    before = Binary("or", Compare("gt" if descending else "lt", kj, ki), Binary(
        "and", Compare("eq", kj, ki), Compare("lt", LoopIndex(nb + 1), LoopIndex(nb)), "i1"), "i1")
    rank = fn.new_value("i32", batch + (n,), "rank")
    fn.emit(Generic(inputs.values, [rank], (Result(0, b_ix + (i,), Binary(
        "add", Acc(0, "i32"), Select(before, Const(1, "i32"), Const(0, "i32"), "i32"), "i32"),
        Const(0, "i32")),), batch + (n, n), nb + 1, where, origin))
    inputs = Inputs()  # order[k] = the i whose rank is k (loops: batch, k | i)
    k, ii = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1)
    hit = Compare("eq", inputs.load(rank, b_ix + (ii,)), convert(LoopIndex(nb), "i32"))
    order = fn.new_value("i32", batch + (n,), "order")
    fn.emit(Generic(inputs.values, [order], (Result(0, b_ix + (k,), Binary(
        "add", Acc(0, "i32"), Select(hit, convert(LoopIndex(nb + 1), "i32"), Const(0, "i32"),
                                     "i32"), "i32"), Const(0, "i32")),), batch + (n, n), nb + 1,
        where, origin))
    inputs = Inputs()
    loops = nb + 1
    b_ix = _batch_ix(loops, nb)
    at = convert(inputs.load(order, b_ix + (AffineExpr.loop(loops, nb),)), "index")
    batch_index = tuple(LoopIndex(d) for d in range(nb))
    values = fn.new_value(dtype, batch + (n,), "sorted")
    fn.emit(Generic(inputs.values, [values], (Result(0, AffineExpr.identity(loops), inputs.gather(
        keys, batch_index + (at,), where)),), batch + (n,), loops, where, origin))
    return values, order


def _copy_into(fn: FunctionLowering, value: Value, result, where: str, origin: str) -> Value:
    rank = len(value.shape)
    inputs = Inputs()
    out = fn.result_value(result, where)
    fn.emit(Generic(inputs.values, [out], (Result(0, AffineExpr.identity(rank), inputs.load(
        value, AffineExpr.identity(rank))),), value.shape, rank, where, origin))
    return out


# ---- gesdd: one-sided Jacobi ---------------------------------------------------------------

def _gesdd(fn: FunctionLowering, op: Operation) -> None:
    """Results (a, s, u, vt, info); mode 'N' values only, 'S' thin, 'A' full (square only)."""
    where = location_of(op)
    a = _square(fn, op, 0, where, square=False)
    dtype, shape = a.dtype, a.shape
    nb, (m, n) = len(shape) - 2, shape[-2:]
    batch = shape[:-2]
    origin = _name(op)
    mode = _config(op).get("mode", "A")
    wide = m < n
    k = min(m, n)
    loops = nb + 2
    b_ix = _batch_ix(loops, nb)
    r, c = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1)
    inputs = Inputs()  # W: the k columns to make orthogonal (A's, or A^T's when wide)
    w = fn.new_value(dtype, batch + (max(m, n), k), "svd_w")
    fn.emit(Generic(inputs.values, [w], (Result(0, b_ix + (r, c), inputs.load(
        a, b_ix + ((c, r) if wide else (r, c)))),), batch + (max(m, n), k), loops, where, origin))
    v = _identity(fn, batch, k, dtype, "svd_v", where, origin)
    tables = _partner_tables(fn, k, "svd_partner", where)
    for _ in range(_sweeps(dtype) if k > 1 else 0):
        for table in tables:
            keep, mix = _column_rotations(fn, w, table, where, origin)
            w = _turn_columns(fn, w, table, keep, mix, where, origin)
            v = _turn_columns(fn, v, table, keep, mix, where, origin)
    norms = _column_norms(fn, w, where, origin)
    values, order = _sorted(fn, norms, where, origin, descending=True)
    fn.env[op.results[1]] = _copy_into(fn, values, op.results[1], where, origin)
    fn.env[op.results[0]] = _copy_into(fn, a, op.results[0], where, origin)
    if mode == "N":
        fn.env[op.results[2]] = _zeros_like_result(fn, op, 2, where)
        fn.env[op.results[3]] = _zeros_like_result(fn, op, 3, where)
    else:
        left = _sorted_columns(fn, w, order, values, where, origin)  # W's columns / sigma
        right = _sorted_columns(fn, v, order, None, where, origin)
        if mode == "A" and m != n:  # full: left's k columns completed to a square basis
            left = _completed(fn, left, where, origin)
        # m >= n: u = left (m x k), vt = right^T; wide (A^T = U S V^T, so A = V S U^T):
        # u = right (m x m), vt = left^T
        fn.env[op.results[2]] = _placed(fn, right if wide else left, op.results[2], False,
                                        where, origin)
        fn.env[op.results[3]] = _placed(fn, left if wide else right, op.results[3], True,
                                        where, origin)
    fn.env[op.results[4]] = _zeros_like_result(fn, op, 4, where)


def _column_rotations(fn: FunctionLowering, w: Value, partner: Value, where: str, origin: str):
    """keep/mix per column from the columns' squared norms and dot product (the 2x2 block of
    W^T W that the rotation makes diagonal)."""
    nb, (rows, k) = len(w.shape) - 2, w.shape[-2:]
    dtype, batch = w.dtype, w.shape[:-2]
    loops = nb + 2  # (batch..., i | r)
    b_ix = _batch_ix(loops, nb)
    i, r = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1)
    batch_index = tuple(LoopIndex(d) for d in range(nb))
    inputs = Inputs()
    mine = inputs.load(w, b_ix + (r, i))
    theirs = inputs.gather(w, batch_index + (LoopIndex(nb + 1), convert(
        inputs.load(partner, (i,)), "index")), where)
    norm2 = fn.new_value(dtype, batch + (k,), "svd_norm2")
    dot = fn.new_value(dtype, batch + (k,), "svd_dot")
    zero = Const(0.0, dtype)
    fn.emit(Generic(inputs.values, [norm2, dot], (
        Result(0, b_ix + (i,), Binary("add", Acc(0, dtype), Binary("mul", mine, mine, dtype), dtype),
               zero),
        Result(1, b_ix + (i,), Binary("add", Acc(1, dtype), Binary("mul", mine, theirs, dtype),
                                      dtype), zero)), batch + (k, rows), nb + 1, where, origin))

    def build(inputs, me, other, is_p):
        here = _batch_ix(nb + 1, nb) + (AffineExpr.loop(nb + 1, nb),)
        own = inputs.load(norm2, here)
        partners = inputs.gather(norm2, batch_index + (other,), where)
        return (Select(is_p, own, partners, dtype), Select(is_p, partners, own, dtype),
                inputs.load(dot, here))

    return _coefficients(fn, build, partner, batch, k, dtype, where, origin)


def _turn_columns(fn: FunctionLowering, x: Value, partner: Value, keep: Value, mix: Value,
                  where: str, origin: str) -> Value:
    """x J: column j becomes keep_j x[:, j] + mix_j x[:, partner_j]."""
    nb = len(x.shape) - 2
    dtype, shape = x.dtype, x.shape
    loops = nb + 2
    b_ix = _batch_ix(loops, nb)
    i, j = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1)
    inputs = Inputs()
    pj = convert(inputs.load(partner, (j,)), "index")
    kj, mj = inputs.load(keep, b_ix + (j,)), inputs.load(mix, b_ix + (j,))
    value = Binary("add", Binary("mul", kj, inputs.load(x, b_ix + (i, j)), dtype), Binary(
        "mul", mj, inputs.gather(x, tuple(LoopIndex(d) for d in range(nb)) + (LoopIndex(nb), pj),
                                 where), dtype), dtype)
    out = fn.new_value(dtype, shape, "turned")
    fn.emit(Generic(inputs.values, [out], (Result(0, b_ix + (i, j), value),), shape, loops,
                    where, origin))
    return out


def _column_norms(fn: FunctionLowering, w: Value, where: str, origin: str) -> Value:
    nb, (rows, k) = len(w.shape) - 2, w.shape[-2:]
    dtype, batch = w.dtype, w.shape[:-2]
    loops = nb + 2
    b_ix = _batch_ix(loops, nb)
    i, r = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1)
    inputs = Inputs()
    x = inputs.load(w, b_ix + (r, i))
    squares = fn.new_value(dtype, batch + (k,), "svd_squares")
    fn.emit(Generic(inputs.values, [squares], (Result(0, b_ix + (i,), Binary(
        "add", Acc(0, dtype), Binary("mul", x, x, dtype), dtype), Const(0.0, dtype)),),
        batch + (k, rows), nb + 1, where, origin))
    inputs = Inputs()
    ix = AffineExpr.identity(nb + 1)
    out = fn.new_value(dtype, batch + (k,), "svd_sigma")
    fn.emit(Generic(inputs.values, [out], (Result(0, ix, Unary("sqrt", inputs.load(squares, ix),
                                                                 dtype)),), batch + (k,), nb + 1,
                    where, origin))
    return out


def _sorted_columns(fn: FunctionLowering, x: Value, order: Value, sigma: Value | None,
                    where: str, origin: str, result=None) -> Value:
    """x's columns in ``order`` (each over its sigma where given; a zero sigma: zeros), into
    ``result`` where given."""
    nb = len(x.shape) - 2
    dtype, shape = x.dtype, x.shape
    loops = nb + 2
    b_ix = _batch_ix(loops, nb)
    i, j = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1)
    inputs = Inputs()
    column = convert(inputs.load(order, b_ix + (j,)), "index")
    value = inputs.gather(x, tuple(LoopIndex(d) for d in range(nb)) + (LoopIndex(nb), column),
                          where)
    if sigma is not None:
        s = inputs.load(sigma, b_ix + (j,))
        positive = Compare("gt", s, Const(0.0, dtype))
        value = Select(positive, Binary("div", value, Select(positive, s, Const(1.0, dtype), dtype),
                                        dtype), Const(0.0, dtype), dtype)
    out = fn.result_value(result, where) if result is not None else \
        fn.new_value(dtype, shape, "sorted_columns")
    fn.emit(Generic(inputs.values, [out], (Result(0, b_ix + (i, j), value),), shape, loops,
                    where, origin))
    return out


def _placed(fn: FunctionLowering, x: Value, result, transposed: bool, where: str,
            origin: str) -> Value:
    """x (or x^T) into ``result``."""
    nb = len(x.shape) - 2
    loops = nb + 2
    b_ix = _batch_ix(loops, nb)
    i, j = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1)
    inputs = Inputs()
    out = fn.result_value(result, where)
    fn.emit(Generic(inputs.values, [out], (Result(0, b_ix + (i, j), inputs.load(
        x, b_ix + ((j, i) if transposed else (i, j)))),), out.shape, loops, where, origin))
    return out


def _completed(fn: FunctionLowering, u: Value, where: str, origin: str) -> Value:
    """u (batch..., r, k) with orthonormal columns, then r - k more: the last columns of the
    full Q of u's Householder QR, which are orthogonal to u's span (LAPACK's full U alike)."""
    nb, (rows, k) = len(u.shape) - 2, u.shape[-2:]
    dtype, batch = u.dtype, u.shape[:-2]
    reflectors, taus = _qr(fn, u, where, origin)
    loops = nb + 2
    b_ix = _batch_ix(loops, nb)
    i, j = AffineExpr.loop(loops, nb), AffineExpr.loop(loops, nb + 1)
    inputs = Inputs()  # the reflectors in an r x r matrix (columns past k unread)
    square = fn.new_value(dtype, batch + (rows, rows), "svd_reflectors")
    fn.emit(Generic(inputs.values, [square], (Result(0, b_ix + (i, j), Select(
        Compare("lt", LoopIndex(nb + 1), Const(k, "index")),
        inputs.gather(reflectors, tuple(LoopIndex(d) for d in range(nb)) + (
            LoopIndex(nb), Binary("min", LoopIndex(nb + 1), Const(k - 1, "index"), "index")),
            where), Const(0.0, dtype), dtype)),), batch + (rows, rows), loops, where, origin))
    q = householder_product(fn, square, taus, where, origin)
    inputs = Inputs()
    full = fn.new_value(dtype, batch + (rows, rows), "svd_full")
    fn.emit(Generic(inputs.values, [full], (Result(0, b_ix + (i, j), Select(
        Compare("lt", LoopIndex(nb + 1), Const(k, "index")),
        inputs.gather(u, tuple(LoopIndex(d) for d in range(nb)) + (
            LoopIndex(nb), Binary("min", LoopIndex(nb + 1), Const(k - 1, "index"), "index")),
            where), inputs.load(q, b_ix + (i, j)), dtype)),), batch + (rows, rows), loops, where,
        origin))
    return full
