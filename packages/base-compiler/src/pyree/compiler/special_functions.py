"""Special functions written once over any arithmetic (an ``Ops``): the kernel IR's, where
StableHLO's CHLO ops name them (input/stablehlo/special.py), and PyTorch's tensors, where
torch-mlir refuses ``aten.lgamma``, ``digamma`` and ``erfinv`` (importers/torch_missing_ops.py).

- ``lgamma`` and ``digamma``: the Lanczos approximation (g = 7, 9 terms) with the reflection
  formula below 0.5, as CHLO's own decomposition (and so JAX on CPU) computes them, in the
  operand's float type; at the poles lgamma is inf and digamma NaN (CHLO's answers; PyTorch's
  differ at 0, which its caller settles).
- ``erf_inv``: Giles' single-precision polynomials (XLA's f32 lowering), ±inf at ±1, NaN outside.
- ``bessel_i0e`` and ``bessel_i1e`` (``exp(-|x|) I0(x)``, ``I1``): the power series up to
  |x| = 15 (34 terms, all of one sign), the asymptotic expansion (10 terms) past it.
- ``zeta`` (Hurwitz's, ``sum_k (q + k)^-x``): 9 terms, then the Euler-Maclaurin tail with 12
  Bernoulli terms (computed exactly here), CHLO's domain answers (inf at x = 1 and at
  non-positive integer q, NaN below x = 1 and at negative q with a fractional x), 0 at q = inf
  and NaN at q = -inf;
  ``polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x)``, digamma at n = 0, NaN at a fractional or
  negative n.
"""

from __future__ import annotations

import math
from typing import Protocol

_GAMMA = 7.0
_BASE = 0.99999999999980993227684700473478
_COEFFS = (676.520368121885098567009190444019, -1259.13921672240287047156078755283,
           771.3234287776530788486528258894, -176.61502916214059906584551354,
           12.507343278686904814458936853, -0.13857109526572011689554707,
           9.984369578019570859563e-6, 1.50563273514931155834e-7)
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                   0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _bernoulli_terms(count: int) -> list[float]:
    """B_2j / (2j)! for j = 1 .. count, from the Bernoulli numbers' recurrence in fractions."""
    from fractions import Fraction
    b = [Fraction(1)]
    for m in range(1, 2 * count + 1):
        b.append(-sum(math.comb(m + 1, k) * b[k] for k in range(m)) / (m + 1))
    return [float(b[2 * j] / math.factorial(2 * j)) for j in range(1, count + 1)]


_ZETA_TERMS = 9
_ZETA_TAIL = _bernoulli_terms(12)
_I1E_SERIES_TERMS = 34
_I1E_SERIES_UP_TO = 15.0
_I1E_ASYMPTOTIC_TERMS = 10


class Ops(Protocol):
    """Elementwise arithmetic on one float type; ``b`` may be a Python float."""

    def c(self, v: float): ...
    def bin(self, op: str, a, b): ...  # add, sub, mul, div, pow
    def un(self, op: str, a): ...  # neg, abs, floor, log, log1p, sin, cos, sqrt, exp
    def cmp(self, op: str, a, b): ...  # lt, le, gt, eq (ordered)
    def both(self, a, b): ...  # logical and
    def pick(self, cond, a, b): ...


def _lanczos(o: Ops, x):
    """(reflect?, z, t = z + g + 1/2, log t) shared by both functions."""
    reflect = o.cmp("lt", x, o.c(0.5))
    z = o.pick(reflect, o.un("neg", x), o.bin("sub", x, 1.0))
    half = _GAMMA + 0.5
    t = o.bin("add", z, half)
    log_t = o.bin("add", o.un("log1p", o.bin("div", z, half)), math.log(half))
    return reflect, z, t, log_t


def lgamma(o: Ops, x):
    reflect, z, t, log_t = _lanczos(o, x)
    series = o.c(_BASE)
    for i, coeff in enumerate(_COEFFS):
        series = o.bin("add", series, o.bin("div", o.c(coeff), o.bin("add", z, float(i + 1))))
    log_y = o.bin("add", o.bin("add", o.c(math.log(math.sqrt(2 * math.pi))), o.bin(
        "mul", o.bin("sub", o.bin("add", z, 0.5), o.bin("div", t, log_t)), log_t)),
        o.un("log", series))
    frac = o.bin("sub", o.un("abs", x), o.un("floor", o.un("abs", x)))
    frac = o.pick(o.cmp("gt", frac, o.c(0.5)), o.bin("sub", o.c(1.0), frac), frac)
    denom = o.un("log", o.un("sin", o.bin("mul", frac, math.pi)))
    finite = o.cmp("lt", o.un("abs", denom), o.c(math.inf))
    reflection = o.pick(finite, o.bin("sub", o.bin("sub", o.c(math.log(math.pi)), denom), log_y),
                        o.un("neg", denom))
    result = o.pick(reflect, reflection, log_y)
    return o.pick(o.cmp("eq", o.un("abs", x), o.c(math.inf)), o.c(math.inf), result)


def digamma(o: Ops, x):
    reflect, z, t, log_t = _lanczos(o, x)
    num = o.c(0.0)
    denom = o.c(_BASE)
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
    pole = o.both(o.cmp("le", x, o.c(0.0)), o.cmp("eq", x, o.un("floor", x)))
    return o.pick(pole, o.c(math.nan), result)


def erf_inv(o: Ops, x):
    def horner(coeffs, w):
        p = o.c(coeffs[0])
        for k in coeffs[1:]:
            p = o.bin("add", o.c(k), o.bin("mul", p, w))
        return p

    w = o.un("neg", o.un("log", o.bin("mul", o.bin("sub", o.c(1.0), x), o.bin("add", o.c(1.0), x))))
    central = horner(_ERFINV_CENTRAL, o.bin("sub", w, o.c(2.5)))
    tail = horner(_ERFINV_TAIL, o.bin("sub", o.un("sqrt", w), o.c(3.0)))
    value = o.bin("mul", o.pick(o.cmp("lt", w, o.c(5.0)), central, tail), x)
    at_one = o.cmp("eq", o.un("abs", x), o.c(1.0))
    return o.pick(at_one, o.bin("mul", x, o.c(math.inf)), value)


def bessel_i0e(o: Ops, x):
    return _bessel_ie(o, x, 0)


def bessel_i1e(o: Ops, x):
    return _bessel_ie(o, x, 1)


def _bessel_ie(o: Ops, x, order: int):
    """``exp(-|x|) I_order(|x|)``, odd in x for order 1 (even for 0)."""
    z = o.un("abs", x)
    quarter = o.bin("mul", o.bin("mul", z, z), 0.25)
    term = o.bin("mul", z, 0.5) if order else o.c(1.0)
    series = term
    for k in range(1, _I1E_SERIES_TERMS):
        term = o.bin("mul", term, o.bin("div", quarter, float(k * (k + order))))
        series = o.bin("add", series, term)
    series = o.bin("mul", series, o.un("exp", o.un("neg", z)))
    inverse = o.bin("div", o.c(1.0), z)
    coeff, tail, terms = 1.0, o.c(0.0), []
    for k in range(1, _I1E_ASYMPTOTIC_TERMS):
        coeff *= -(4.0 * order * order - (2 * k - 1) ** 2) / (8.0 * k)
        terms.append(coeff)
    for c in reversed(terms):  # Horner in 1/z: 1 + c1/z + c2/z^2 + ...
        tail = o.bin("mul", o.bin("add", tail, c), inverse)
    asymptotic = o.bin("div", o.bin("add", tail, 1.0),
                       o.bin("mul", o.un("sqrt", z), math.sqrt(2 * math.pi)))
    value = o.pick(o.cmp("le", z, o.c(_I1E_SERIES_UP_TO)), series, asymptotic)
    if not order:
        return value
    value = o.pick(o.cmp("lt", x, o.c(0.0)), o.un("neg", value), value)
    return o.pick(o.cmp("eq", z, o.c(0.0)), x, value)  # odd: -0 for -0


def zeta(o: Ops, x, q):
    total = o.c(0.0)
    for k in range(_ZETA_TERMS):
        total = o.bin("add", total, o.bin("pow", o.bin("add", q, float(k)), o.un("neg", x)))
    w = o.bin("add", q, float(_ZETA_TERMS))
    w_x = o.bin("pow", w, o.un("neg", x))
    total = o.bin("add", total, o.bin("div", o.bin("mul", w, w_x), o.bin("sub", x, 1.0)))
    total = o.bin("add", total, o.bin("mul", w_x, 0.5))
    inverse_square = o.bin("div", o.c(1.0), o.bin("mul", w, w))
    factor = o.bin("div", o.bin("mul", x, w_x), w)  # x (x+1) ... (x+2j-2) w^(-x-2j+1), j = 1
    for j, b in enumerate(_ZETA_TAIL, start=1):
        if j > 1:
            rising = o.bin("mul", o.bin("add", x, float(2 * j - 3)), o.bin("add", x, float(2 * j - 2)))
            factor = o.bin("mul", factor, o.bin("mul", rising, inverse_square))
        total = o.bin("add", total, o.bin("mul", factor, b))
    integer_q = o.cmp("eq", q, o.un("floor", q))
    pole = o.both(o.cmp("le", q, o.c(0.0)), integer_q)
    fractional_x = o.cmp("lt", o.un("floor", x), x)
    nan = o.both(o.cmp("lt", q, o.c(0.0)), fractional_x)
    total = o.pick(o.cmp("eq", q, o.c(math.inf)), o.c(0.0), total)  # every term 0
    result = o.pick(o.cmp("eq", x, o.c(1.0)), o.c(math.inf), total)
    result = o.pick(o.cmp("lt", x, o.c(1.0)), o.c(math.nan), result)
    result = o.pick(pole, o.c(math.inf), result)
    result = o.pick(o.cmp("eq", q, o.c(-math.inf)), o.c(math.nan), result)  # no limit there
    return o.pick(nan, o.c(math.nan), result)


def polygamma(o: Ops, n, x):
    half = o.un("floor", o.bin("mul", n, 0.5))
    odd = o.cmp("eq", o.bin("sub", n, o.bin("mul", half, 2.0)), o.c(1.0))
    sign = o.pick(odd, o.c(1.0), o.c(-1.0))
    factorial = o.un("exp", lgamma(o, o.bin("add", n, 1.0)))
    value = o.bin("mul", o.bin("mul", sign, factorial), zeta(o, o.bin("add", n, 1.0), x))
    value = o.pick(o.cmp("eq", n, o.c(0.0)), digamma(o, x), value)
    valid = o.both(o.cmp("eq", n, o.un("floor", n)), o.cmp("ge", n, o.c(0.0)))
    return o.pick(valid, value, o.c(math.nan))
