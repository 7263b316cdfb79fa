"""CHLO's lgamma and digamma as expressions: the Lanczos approximation (g = 7, 9 terms) with
the reflection formula below 0.5, as CHLO's own decomposition (and so JAX on CPU) computes
them, in the operand's float type."""

from __future__ import annotations

import math

from pyree.compiler.kernel import Binary, Compare, Const, Expr, Select, Unary

_GAMMA = 7.0
_BASE = 0.99999999999980993227684700473478
_COEFFS = (676.520368121885098567009190444019, -1259.13921672240287047156078755283,
           771.3234287776530788486528258894, -176.61502916214059906584551354,
           12.507343278686904814458936853, -0.13857109526572011689554707,
           9.984369578019570859563e-6, 1.50563273514931155834e-7)


class _Ops:
    """Arithmetic on expressions of one float dtype, to keep the formulas readable."""

    def __init__(self, dtype: str):
        self.dtype = dtype

    def c(self, v: float) -> Const:
        return Const(v, self.dtype)

    def bin(self, op: str, a: Expr, b: Expr | float) -> Expr:
        return Binary(op, a, b if not isinstance(b, float) else self.c(b), self.dtype)

    def un(self, op: str, a: Expr) -> Expr:
        return Unary(op, a, self.dtype)

    def pick(self, cond: Expr, a: Expr, b: Expr) -> Expr:
        return Select(cond, a, b, self.dtype)


def _lanczos(o: _Ops, x: Expr):
    """(reflect?, z, t = z + g + 1/2, log t) shared by both functions."""
    reflect = Compare("lt", x, o.c(0.5))
    z = o.pick(reflect, o.un("neg", x), o.bin("sub", x, 1.0))
    half = _GAMMA + 0.5
    t = o.bin("add", z, half)
    log_t = o.bin("add", o.un("log1p", o.bin("div", z, half)), math.log(half))
    return reflect, z, t, log_t


def lgamma(x: Expr) -> Expr:
    o = _Ops(x.dtype)
    reflect, z, t, log_t = _lanczos(o, x)
    series: Expr = o.c(_BASE)
    for i, coeff in enumerate(_COEFFS):
        series = o.bin("add", series, o.bin("div", o.c(coeff), o.bin("add", z, float(i + 1))))
    log_y = o.bin("add", o.bin("add", o.c(math.log(math.sqrt(2 * math.pi))), o.bin(
        "mul", o.bin("sub", o.bin("add", z, 0.5), o.bin("div", t, log_t)), log_t)),
        o.un("log", series))
    frac = o.bin("sub", o.un("abs", x), o.un("floor", o.un("abs", x)))
    frac = o.pick(Compare("gt", frac, o.c(0.5)), o.bin("sub", o.c(1.0), frac), frac)
    denom = o.un("log", o.un("sin", o.bin("mul", frac, math.pi)))
    finite = Compare("lt", o.un("abs", denom), o.c(math.inf))
    reflection = o.pick(finite, o.bin("sub", o.bin("sub", o.c(math.log(math.pi)), denom), log_y),
                        o.un("neg", denom))
    result = o.pick(reflect, reflection, log_y)
    return o.pick(Compare("eq", o.un("abs", x), o.c(math.inf)), o.c(math.inf), result)


def digamma(x: Expr) -> Expr:
    o = _Ops(x.dtype)
    reflect, z, t, log_t = _lanczos(o, x)
    num: Expr = o.c(0.0)
    denom: Expr = o.c(_BASE)
    for i, coeff in enumerate(_COEFFS):
        shifted = o.bin("add", z, float(i + 1))
        num = o.bin("sub", num, o.bin("div", o.c(coeff), o.bin("mul", shifted, shifted)))
        denom = o.bin("add", denom, o.bin("div", o.c(coeff), shifted))
    y = o.bin("sub", o.bin("add", log_t, o.bin("div", num, denom)), o.bin("div", o.c(_GAMMA), t))
    reduced = o.bin("add", x, o.un("abs", o.un("floor", o.bin("add", x, 0.5))))
    angle = o.bin("mul", reduced, math.pi)
    reflection = o.bin("sub", y, o.bin("div", o.bin("mul", o.c(math.pi), o.un("cos", angle)),
                                       o.un("sin", angle)))
    result = o.pick(reflect, reflection, y)
    pole = Binary("and", Compare("le", x, o.c(0.0)), Compare("eq", x, o.un("floor", x)), "i1")
    return o.pick(pole, o.c(math.nan), result)
