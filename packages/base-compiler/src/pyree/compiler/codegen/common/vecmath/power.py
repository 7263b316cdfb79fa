"""pow for f32: exp2(y * log2|x|) computed in f64, then x's sign and the C99 special cases.

Through f32 log2 and exp2, pow would lose up to |y log2 x| ulps (about 150 near the overflow
limit); in f64 the product keeps ~2^-45 relative error, so the only visible rounding is the last
one, to f32. log1p(f) = 2 atanh(s) with s = f / (2 + f), |s| < 0.172: 2s + s^3 * P(s^2) with
the Taylor coefficients; 2^r on [-1/2, 1/2]: the Taylor polynomial of e^{r ln2}. Both have
truncation error below 1e-11, far under f32's 6e-8.
"""

from __future__ import annotations

import math

from llvmlite import ir
from pyree.compiler.codegen.common.vecmath.builder import F64, MathBuilder
from pyree.compiler.codegen.common.vecmath.exponential import LOG2E

ATANH_P = tuple(2 / (2 * k + 3) for k in range(7))
EXP2_TAYLOR = tuple(math.log(2) ** k / math.factorial(k) for k in range(10))
SQRT_HALF = 0.7071067811865476


def _log2(d: MathBuilder, a):
    """log2(a) for an f64 a >= 0 (0 -> -inf, inf -> inf, NaN -> NaN)."""
    b = d.b
    e = b.ashr(b.sub(d.bits(a), d.bits(d.f(SQRT_HALF))), d.i(d.mantissa_bits))
    f = d.sub(d.from_bits(b.sub(d.bits(a), b.shl(e, d.i(d.mantissa_bits)))), d.f(1.0))
    s = d.div(f, d.add(f, d.f(2.0)))
    s2 = d.mul(s, s)
    ln = d.fma(d.mul(s, s2), d.poly(s2, ATANH_P), d.add(s, s))
    y = d.fma(ln, d.f(LOG2E), b.sitofp(e, d.ty))
    ok = b.and_(d.gt(a, d.f(0.0)), d.lt(a, d.f(math.inf)))
    return d.select(ok, y, d.select(d.eq(a, d.f(0.0)), d.f(-math.inf), a))


def _exp2(d: MathBuilder, z):
    """2^z in f64 for every z whose result matters to f32 (z is clamped to [-160, 130])."""
    z = d.clamp(z, -160.0, 130.0)
    n, k = d.round_to_int(d.add(z, d.f(d.round_magic)))
    return d.mul(d.poly(d.sub(z, n), EXP2_TAYLOR), d.pow2(k))


def power(m: MathBuilder, x, y) -> ir.Value:
    b = m.b
    d = m.of(F64)
    xd, yd = b.fpext(x, d.ty), b.fpext(y, d.ty)
    return with_sign(m, x, y, b.fptrunc(_exp2(d, d.mul(yd, _log2(d, d.abs(xd)))), m.ty))


def with_sign(m: MathBuilder, x, y, magnitude) -> ir.Value:
    """pow from |x|**y (``magnitude``, right at 0, inf and NaN): x's sign for an odd integer y,
    NaN for x < 0 and y not an integer, and C99's special cases that give 1. y/2 is exact and an
    integer for every |y| >= 2^24, so the parity test holds in f32."""
    b = m.b
    is_int = m.eq(m.trunc(y), y)  # inf counts as an even integer, as in C99
    half = m.mul(y, m.f(0.5))
    odd = b.and_(is_int, b.not_(m.eq(m.trunc(half), half)))
    negative = b.icmp_signed("<", m.bits(x), m.i(0))    # -0 included: pow(-0, 3) = -0
    r = m.select(b.and_(odd, negative), m.sub(m.f(-0.0), magnitude), magnitude)
    finite_negative = b.and_(m.lt(x, m.f(0.0)), m.gt(x, m.f(-math.inf)))
    r = m.select(b.and_(finite_negative, b.not_(is_int)), m.f(math.nan), r)
    one = b.or_(b.or_(m.eq(y, m.f(0.0)), m.eq(x, m.f(1.0))),
                b.and_(m.eq(x, m.f(-1.0)), m.eq(m.abs(y), m.f(math.inf))))
    return m.select(one, m.f(1.0), r)
