"""CHLO's lgamma, digamma, erf_inv, bessel_i1e, zeta and polygamma as kernel-IR expressions: the formulas of
``pyree.compiler.special_functions`` over kernel-IR arithmetic in the operand's float type."""

from __future__ import annotations

from pyree.compiler import special_functions
from pyree.compiler.kernel import Binary, Compare, Const, Expr, Select, Unary


class _Ops:
    """Arithmetic on expressions of one float dtype (``special_functions.Ops``)."""

    def __init__(self, dtype: str):
        self.dtype = dtype

    def c(self, v: float) -> Const:
        return Const(v, self.dtype)

    def bin(self, op: str, a: Expr, b: Expr | float) -> Expr:
        return Binary(op, a, b if not isinstance(b, float) else self.c(b), self.dtype)

    def un(self, op: str, a: Expr) -> Expr:
        return Unary(op, a, self.dtype)

    def cmp(self, op: str, a: Expr, b: Expr) -> Expr:
        return Compare(op, a, b)

    def both(self, a: Expr, b: Expr) -> Expr:
        return Binary("and", a, b, "i1")

    def pick(self, cond: Expr, a: Expr, b: Expr) -> Expr:
        return Select(cond, a, b, self.dtype)


def lgamma(x: Expr) -> Expr:
    return special_functions.lgamma(_Ops(x.dtype), x)


def digamma(x: Expr) -> Expr:
    return special_functions.digamma(_Ops(x.dtype), x)


def erf_inv(x: Expr) -> Expr:
    return special_functions.erf_inv(_Ops(x.dtype), x)


def bessel_i1e(x: Expr) -> Expr:
    return special_functions.bessel_i1e(_Ops(x.dtype), x)


def zeta(x: Expr, q: Expr) -> Expr:
    return special_functions.zeta(_Ops(x.dtype), x, q)


def polygamma(n: Expr, x: Expr) -> Expr:
    return special_functions.polygamma(_Ops(x.dtype), n, x)
