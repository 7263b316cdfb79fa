"""CHLO's lgamma, digamma, erf_inv, bessel_i1e, zeta and polygamma as kernel-IR expressions: the formulas of
``pyree.compiler.special_functions`` over kernel-IR arithmetic in the operand's float type, f16
and bf16 in f32 and rounded once (as CHLO's decompositions upcast them: in bf16 itself lgamma
was 10% off and digamma near its root took the wrong sign)."""

from __future__ import annotations

from pyree.compiler import special_functions
from pyree.compiler.kernel import Binary, Cast, Compare, Const, Expr, Select, Unary


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


def _in_f32(formula, *args: Expr) -> Expr:
    """``formula(ops, *args)`` in the first operand's type, or for f16/bf16 in f32."""
    dtype = args[0].dtype
    if dtype not in ("f16", "bf16"):
        return formula(_Ops(dtype), *args)
    wide = [Cast("fpext", a, "f32") if a.dtype == dtype else a for a in args]
    return Cast("fptrunc", formula(_Ops("f32"), *wide), dtype)


def lgamma(x: Expr) -> Expr:
    return _in_f32(special_functions.lgamma, x)


def digamma(x: Expr) -> Expr:
    return _in_f32(special_functions.digamma, x)


def erf_inv(x: Expr) -> Expr:
    return _in_f32(special_functions.erf_inv, x)


def bessel_i1e(x: Expr) -> Expr:
    return _in_f32(special_functions.bessel_i1e, x)


def zeta(x: Expr, q: Expr) -> Expr:
    return _in_f32(special_functions.zeta, x, q)


def polygamma(n: Expr, x: Expr) -> Expr:
    return _in_f32(lambda ops, x, n: special_functions.polygamma(ops, n, x), x, n)
