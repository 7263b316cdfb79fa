"""log, log2 and log1p for f32: x = 2^e * m with m in [sqrt(1/2), sqrt(2)), then log1p(m - 1).

m - 1 is exact, and log1p(f) = f - f^2/2 + f^3 * P(f) keeps the leading terms separate so
that results near x = 1 have full relative accuracy. Special inputs (0, negatives, inf, NaN)
are chosen by selects at the end. Coefficients: ``tests/codegen/llvm_cpu/fit_math_polynomials.py``.
"""

from __future__ import annotations

from llvmlite import ir
from pyree.compiler.codegen.common.vecmath.builder import MathBuilder, f32_bits
from pyree.compiler.codegen.common.vecmath.exponential import LN2_HI, LN2_LO, LOG2E

# log1p(f) = f - f^2/2 + f^3 * LOG1P_P(f) on [-0.294, 0.415]: relative error 6.0e-9
LOG1P_P = (0.3333333134651184, -0.25000837445259094, 0.20001284778118134, -0.16622774302959442,
           0.1419983208179474, -0.13164229691028595, 0.12778355181217194, -0.07645140588283539)
FLT_MIN = 1.1754943508222875e-38
SQRT_HALF_BITS = f32_bits(0.70710677)


def split_exponent(m: MathBuilder, x):
    """(e as i32, e as float, f = m - 1) for a positive finite x; the i32 leaves out the
    scaling of subnormals, which only ``log`` and ``log2`` meet."""
    b = m.b
    tiny = m.lt(x, m.f(FLT_MIN))
    x = m.select(tiny, m.mul(x, m.f(2.0 ** 23)), x)
    e = b.ashr(b.sub(m.bits(x), m.i(SQRT_HALF_BITS)), m.i(23))
    mant = m.from_bits(b.sub(m.bits(x), b.shl(e, m.i(23))))
    ef = m.sub(b.sitofp(e, m.ty), m.select(tiny, m.f(23.0), m.f(0.0)))
    return e, ef, m.sub(mant, m.f(1.0))


def _log1p_tail(m: MathBuilder, f):
    """log1p(f) - f."""
    f2 = m.mul(f, f)
    return m.fma(m.mul(f2, f), m.poly(f, LOG1P_P), m.mul(f2, m.f(-0.5)))


def _ln(m: MathBuilder, e, f):
    """e*ln2 + log1p(f), adding the small parts first."""
    small = m.add(f, m.fma(e, m.f(LN2_LO), _log1p_tail(m, f)))
    return m.fma(e, m.f(LN2_HI), small)


def _specials(m: MathBuilder, x, y, at: float):
    """y where x is in (at, inf); at ``at`` -inf, below it NaN; +inf and NaN pass through."""
    ok = m.b.and_(m.gt(x, m.f(at)), m.lt(x, m.f(float("inf"))))
    special = m.select(m.eq(x, m.f(at)), m.f(float("-inf")),
                       m.select(m.lt(x, m.f(at)), m.f(float("nan")), x))
    return m.select(ok, y, special)


def log(m: MathBuilder, x) -> ir.Value:
    _, e, f = split_exponent(m, x)
    return _specials(m, x, _ln(m, e, f), 0.0)


def log2(m: MathBuilder, x) -> ir.Value:
    _, e, f = split_exponent(m, x)
    y = m.fma(f, m.f(LOG2E), m.mul(_log1p_tail(m, f), m.f(LOG2E)))
    return _specials(m, x, m.add(e, y), 0.0)


def log1p(m: MathBuilder, x) -> ir.Value:
    """log(u) for u = 1 + x rounded, plus the rounding error c of that sum (exact, by Fast2Sum)
    added to f as c / 2^e."""
    b = m.b
    one = m.f(1.0)
    u = m.add(one, x)
    ei, e, f = split_exponent(m, u)
    c = m.select(m.gt(x, one), m.sub(one, m.sub(u, x)), m.sub(x, m.sub(u, one)))
    # 2^-e, kept normal: where e > 126, c / 2^e is far below f's last bit anyway
    ei = m.select(b.icmp_signed(">", ei, m.i(126)), m.i(126), ei)
    inv_scale = m.pow2(b.sub(m.i(0), ei))
    y = _ln(m, e, m.fma(c, inv_scale, f))
    y = m.select(m.eq(x, m.f(0.0)), x, y)  # keeps the sign of -0
    return _specials(m, x, y, -1.0)
