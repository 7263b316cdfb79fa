"""exp, exp2 and expm1 for f32: range reduction to r in [-ln2/2, ln2/2] plus a polynomial.

x = n*ln2 + r with n = round(x / ln2); ln2 is split in a short head (n * head is exact) and a
tail, so r carries no cancellation error. The result is scaled by 2**n through the exponent
bits in two halves (``MathBuilder.scale``), which gives overflow to inf and subnormal results
with one rounding. Coefficients are minimax fits (relative error) with f32 coefficients, made
by ``tests/codegen/llvm_cpu/fit_math_polynomials.py``.
"""

from __future__ import annotations

from llvmlite import ir
from pyree.compiler.codegen.common.vecmath.builder import MathBuilder

LOG2E = 1.4426950408889634
LN2_HI = 0.693145751953125        # ln2 to 16 bits: n * LN2_HI is exact for |n| < 2^8
LN2_LO = 1.4286068203094173e-06   # ln2 - LN2_HI

# e^r = 1 + r + r^2 * EXP_P(r) on [-0.348, 0.348]: relative error 3.2e-9
EXP_P = (0.4999999403953552, 0.1666652113199234, 0.04166829213500023, 0.00836871936917305,
         0.0013818728039041162)
# 2^r = 1 + r * EXP2_P(r) on [-0.5, 0.5]: relative error 1.6e-10
EXP2_P = (0.6931471824645996, 0.24022650718688965, 0.055504050105810165, 0.009618086740374565,
          0.0013337972341105342, 0.0001545209379401058, 1.4320229638542514e-05)
# e^r - 1 = r + r^2 * EXPM1_P(r) on [-0.348, 0.348]: relative error 4.5e-10
EXPM1_P = (0.5, 0.1666666567325592, 0.04166649281978607, 0.008333543315529823,
           0.0013932385481894016, 0.00019764425815083086)


def _reduce(m: MathBuilder, x):
    """(r, k): x = k*ln2 + r, k an i32, |r| <= ln2/2 (slightly more at rounding ties)."""
    n, k = m.round_to_int(m.fma(x, m.f(LOG2E), m.f(m.round_magic)))
    r = m.fma(n, m.f(-LN2_HI), x)
    return m.fma(n, m.f(-LN2_LO), r), k


def _vanishing(m: MathBuilder, x, lo: float, hi: float):
    """(x limited to hi, and to 0 where it is below lo; the lanes below lo). Below lo the
    result rounds to 0, which the caller selects: scaling a result down to 0 would underflow,
    and an x86 core takes a microcode assist for every vector whose result underflows (a
    causal softmax, half its lanes -inf, ran 4.5x slower than unmasked)."""
    below = m.lt(x, m.f(lo))
    return m.select(below, m.f(0.0), m.select(m.gt(x, m.f(hi)), m.f(hi), x)), below


def exp(m: MathBuilder, x) -> ir.Value:
    # exp(x) rounds to 0 below -104 and overflows above 89; the limits keep k in scale()'s range.
    x, below = _vanishing(m, x, -104.0, 89.0)
    r, k = _reduce(m, x)
    p = m.add(m.fma(m.mul(r, r), m.poly(r, EXP_P), r), m.f(1.0))
    return m.select(below, m.f(0.0), m.scale(p, k))


def exp2(m: MathBuilder, x) -> ir.Value:
    x, below = _vanishing(m, x, -151.0, 129.0)
    n, k = m.round_to_int(m.add(x, m.f(m.round_magic)))
    r = m.sub(x, n)  # exact
    return m.select(below, m.f(0.0), m.scale(m.fma(r, m.poly(r, EXP2_P), m.f(1.0)), k))


def expm1(m: MathBuilder, x) -> ir.Value:
    """2^k * (e^r - 1) + (2^k - 1), written as 2 * (t*p + (t - 1/2)) with t = 2^(k-1) so that
    k = 128 does not overflow early; below -20 the result is -1."""
    r, k = _reduce(m, m.clamp(x, -20.0, 89.0))
    p = m.fma(m.mul(r, r), m.poly(r, EXPM1_P), r)
    t = m.pow2(m.b.sub(k, m.i(1)))
    y = m.mul(m.fma(t, p, m.sub(t, m.f(0.5))), m.f(2.0))
    # below 2^-24, expm1(x) rounds to x: also right for subnormals and -0
    return m.select(m.lt(m.abs(x), m.f(2.0 ** -24)), x, y)
