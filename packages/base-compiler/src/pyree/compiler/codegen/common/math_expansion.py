"""Math functions written as other kernel-IR ops: one formula shared by every backend.

``expand(e)`` rewrites a float ``Unary``/``Binary`` whose op a backend lists into arithmetic, bit
operations, selects and simpler math ops, computed in f32 (f16 and bf16 round once at the end;
f64 is narrowed, as the GPU targets did with their native functions; llvm-cpu keeps libm for
f64). ``EXPANDED``, the ops new to the kernel IR, are built from exp, expm1, log, log1p, sqrt,
erf and atan2, which llvm-cpu lowers accurately itself. The GPU targets expand ``GPU_EXPANDED``
too: their native transcendentals are approximations (PTX ``ex2/lg2/sin.approx``; Vulkan lets
exp/log be off by 3 + 2|x| ulp or 2^-21 absolute, and Mesa's lavapipe measured millions of ulp,
flushes subnormal results and gets sin of large arguments wrong), so they get the llvm-cpu
algorithms of ``common/vecmath``, which are written against a builder that ``_Ops`` provides
for kernel IR. Each formula stays within a few ulp of the correctly rounded result with IEEE
special values; the measured errors per backend are in ``tests/e2e/test_math_ops.py``. Nothing
here relies on what Vulkan leaves loose (tests/e2e/test_math_expansion_extremes.py models
NVIDIA's driver): no division by a value beyond [2^-126, 2^126] or by a subnormal, divisions
refined on Vulkan (``_Ops.div``), no min/max of subnormals, and sqrt/rsqrt by ``exact_root``.
"""

from __future__ import annotations

import dataclasses
import functools
import math

from pyree.compiler.codegen.common.vecmath import BINARY as VECMATH_BINARY
from pyree.compiler.codegen.common.vecmath import UNARY as VECMATH_UNARY
from pyree.compiler.codegen.common.vecmath.builder import MathBuilder
from pyree.compiler.codegen.common.vecmath.exponential import EXP2_P, LOG2E
from pyree.compiler.codegen.common.vecmath.logarithm import split_exponent
from pyree.compiler.codegen.common.vecmath.power import ATANH_P, with_sign
from pyree.compiler.kernel import Binary, Cast, Compare, Const, Expr, Select, Unary

EXPANDED = frozenset({"acos", "asin", "sinh", "cosh", "asinh", "acosh", "atanh", "cbrt", "erfc"})
GPU_EXPANDED = EXPANDED | frozenset({"atan", "atan2", "sin", "cos", "tan", *VECMATH_UNARY,
                                     *VECMATH_BINARY})
# llvm-cpu expands these on f32, f16 and bf16 too: LLVM lowers a vector llvm.sin (cos, tan, atan,
# atan2) to one scalar libm call a lane, ~10x the time of the expansion vectorized (BENCHMARKS.md,
# forty-eighth session); f64 keeps libm.
CPU_EXPANDED = EXPANDED | frozenset({"atan", "atan2", "sin", "cos", "tan"})
EXACT = frozenset({"round", "sign"})  # for a target whose native ones get -0, NaN or 1/2 wrong

# erfc(x) = e^{-x^2} Q(t - c) / (x + 1), t = 1/(x + 1): a weighted minimax fit (as in
# tests/codegen/llvm_cpu/fit_math_polynomials.py) for relative error on two pieces: x in [0.5, 2] with
# c = 0.5 (error 2.1e-9) and x in [2, 10.5] with c = 0.21 (6.6e-10). Above 10.5 erfc is 0 in f32.
ERFC_NEAR = (0.8551671504974365, 0.47536182403564453, -0.382223904132843, -0.11127432435750961,
             0.4060131311416626, -0.30531078577041626, -0.06054338812828064, 0.47414886951446533,
             -0.8934172987937927)
ERFC_FAR = (0.691223680973053, 0.62226402759552, -0.04379011690616608, -0.6250922679901123,
            0.12812884151935577, 1.0646624565124512, -0.9014860987663269, -1.8820961713790894,
            3.8296570777893066)
# atan(s) = s + s^3 P(s^2) on [0, tan(pi/8)]: relative error 7e-10.
ATAN_P = (-0.33333316445350647, 0.19998528063297272, -0.14244388043880463, 0.10599120706319809,
          -0.06089867651462555)
TAN_PI_8 = 0.41421356237309503
# sin(r) = r + r^3 P(r^2), cos(r) = 1 - r^2/2 + r^4 Q(r^2) on [-pi/4, pi/4]: relative error
# 1.6e-10 and 7.3e-12.
SIN_P = (-0.1666666716337204, 0.008333379402756691, -0.0001985306735150516, 2.832593509083381e-06)
COS_P = (0.0416666679084301, -0.0013888980029150844, 2.48220021603629e-05, -2.887742596158205e-07)
# pi/2 in six 8-bit parts and an f32 rest (exact to 2^-82): n * part is exact for |n| < 2^16.
PIO2_PARTS = (1.5703125, 0.0004825592041015625, 1.2665987014770508e-06, 9.89530235528946e-10,
              2.5579538487363607e-12, 5.384581669432009e-15, 5.721188916458728e-18)
# Payne-Hanek: 2/pi's bits (after 0.), in 32-bit windows stepping by 8 bits (ARM's
# optimized-routines sinf): entry j ends 8 (j + 1) bits in, behind 24 zero bits.
TWO_OVER_PI_WINDOWS = (
    0xa2, 0xa2f9, 0xa2f983, 0xa2f9836e, 0xf9836e4e, 0x836e4e44, 0x6e4e4415, 0x4e441529,
    0x441529fc, 0x1529fc27, 0x29fc2757, 0xfc2757d1, 0x2757d1f5, 0x57d1f534, 0xd1f534dd, 0xf534ddc0,
    0x34ddc0db, 0xddc0db62, 0xc0db6295, 0xdb629599, 0x6295993c, 0x95993c43, 0x993c4390, 0x3c439041)
CODY_WAITE_LIMIT = 65536.0  # below, n < 2^16: the parts of PIO2_PARTS stay exact
LOG2E_HI = 1.4426950216293335  # LOG2E rounded to f32
LN2_HI = 0.693145751953125
LN2_LO = math.log(2) - LN2_HI


class _Ops(MathBuilder):
    """Expression constructors over f32 (or f64, for pow's insides) and the int of its width;
    also the builder that the vecmath algorithms are written against (``b`` does their integer
    and conversion instructions)."""

    def __init__(self, dtype: str, refine_division: bool = False):
        self.dt = self.ty = dtype
        self.refine_division = refine_division and dtype == "f32"
        self.it = self.ity = "i64" if dtype == "f64" else "i32"
        self.width = 0
        self.mantissa_bits, self.exponent_bias = (52, 1023) if dtype == "f64" else (23, 127)
        self.round_magic = 1.5 * 2.0 ** self.mantissa_bits
        self.b = _IntOps()

    def of(self, scalar) -> _Ops:  # pow's extra precision
        return _Ops("f64")

    def f(self, v: float) -> Const:
        return Const(v, self.dt)

    def i(self, v: int) -> Const:
        return Const(v, self.it)

    def fma(self, a, b, c):
        return self.add(self.mul(a, b), c)

    def abs(self, x):
        return self.un("abs", x)

    def copysign(self, magnitude, sign):
        return self.bin("copysign", magnitude, sign)

    def gt(self, a, b):
        return Compare("gt", a, b)

    def eq(self, a, b):
        return Compare("eq", a, b)

    def select(self, cond, a, b):
        return Select(cond, a, b, a.dtype)

    def trunc(self, x):
        return self.un("trunc", x)

    def un(self, op: str, x: Expr) -> Expr:
        return Unary(op, x, self.dt)

    def bin(self, op: str, a: Expr, b: Expr) -> Expr:
        return Binary(op, a, b, self.dt)

    def add(self, a, b):
        return self.bin("add", a, b)

    def sub(self, a, b):
        return self.bin("sub", a, b)

    def mul(self, a, b):
        return self.bin("mul", a, b)

    def div(self, a, b):
        """a / b; with ``refine_division`` (Vulkan, whose OpFDiv may be 2.5 ulp off: NVIDIA's
        a * rcp(b)) one Newton step on the exact residual a - q b (``_two_product``: Vulkan keeps
        products unfused) brings it to ~0.5 ulp. b must lie in [2^-126, 2^126] (callers scale
        or select around that); a NaN correction (b = inf) is dropped."""
        q = self.bin("div", a, b)
        if not self.refine_division:
            return q
        p, e = _two_product(self, q, b)
        c = self.bin("div", self.sub(self.sub(a, p), e), b)
        return self.add(q, self.select(Compare("ord", c, c), c, self.f(0.0)))

    def half(self, a):
        return self.mul(a, self.f(0.5))

    def lt(self, a, b):
        return Compare("lt", a, b)

    def poly(self, x, coeffs):
        """sum(coeffs[k] x^k) by Horner's rule; a coefficient is a number or an expression."""
        lift = [self.f(k) if isinstance(k, float) else k for k in coeffs]
        acc = lift[-1]
        for k in reversed(lift[:-1]):
            acc = self.add(self.mul(acc, x), k)
        return acc

    def bits(self, x):
        return Cast("bitcast", x, self.it)

    def from_bits(self, i):
        return Cast("bitcast", i, self.dt)


class _IntOps:
    """The llvmlite ``IRBuilder`` instructions that vecmath uses, as kernel-IR expressions."""

    def _int(self, op, a, b):
        return Binary(op, a, b, a.dtype)

    def add(self, a, b):
        return self._int("add", a, b)

    def sub(self, a, b):
        return self._int("sub", a, b)

    def shl(self, a, b):
        return self._int("shl", a, b)

    def ashr(self, a, b):
        return self._int("shr", a, b)

    def and_(self, a, b):
        return self._int("and", a, b)

    def or_(self, a, b):
        return self._int("or", a, b)

    def not_(self, a):
        return Unary("not", a, a.dtype)

    def icmp_signed(self, predicate, a, b):
        return Compare({">": "gt", "<": "lt", "==": "eq"}[predicate], a, b)

    def sitofp(self, a, dtype):
        return Cast("sitofp", a, dtype)

    def trunc(self, a, _type):  # vecmath truncates only to i1
        return Cast("trunci", a, "i1")

    def fpext(self, a, dtype):
        return Cast("fpext", a, dtype)

    def fptrunc(self, a, dtype):
        return Cast("fptrunc", a, dtype)


def _sinh(o: _Ops, x):
    """From expm1 below 9, where e^-|x| stops mattering (no cancellation: both terms have the
    same sign); above it e^|x| / 2."""
    a = o.un("abs", x)
    u = o.un("expm1", a)
    small = o.half(o.add(u, o.div(u, o.add(u, o.f(1.0)))))
    return o.copysign(o.select(o.lt(a, o.f(9.0)), small, _half_exp(o, a)), x)


def _cosh(o: _Ops, x):
    a = o.un("abs", x)
    h = o.un("exp", a)
    small = o.add(o.half(h), o.div(o.f(0.5), h))
    return o.select(o.lt(a, o.f(9.0)), small, _half_exp(o, a))


def _half_exp(o: _Ops, a):
    """e^a / 2 as e^{a - 2 LN2_HI} (2 e^{-2 LN2_LO}): a - 2 LN2_HI is exact for a >= 9 (LN2_HI
    has 16 bits), so only exp's own error shows, and nothing overflows before the result does."""
    return o.mul(o.un("exp", o.sub(a, o.f(2 * LN2_HI))), o.f(2 * math.exp(-2 * LN2_LO)))


def _log_2x(o: _Ops, a):
    """log(2a): asinh(a) and acosh(a) for a beyond 2^28, where 1/a^2 no longer shows."""
    return o.add(o.un("log", a), o.f(math.log(2)))


def _asinh(o: _Ops, x):
    """log1p(a + a^2 / (1 + sqrt(1 + a^2))) for a = |x|: log1p keeps small |x| exact."""
    a = o.un("abs", x)
    a2 = o.mul(a, a)
    small = o.un("log1p", o.add(a, o.div(a2, o.add(o.f(1.0), o.un("sqrt", o.add(o.f(1.0), a2))))))
    return o.copysign(o.select(o.lt(a, o.f(2.0 ** 28)), small, _log_2x(o, a)), x)


def _acosh(o: _Ops, x):
    """log1p(t + sqrt(t (t + 2))) for t = x - 1, exact near x = 1; NaN below 1."""
    t = o.sub(x, o.f(1.0))
    small = o.un("log1p", o.add(t, o.un("sqrt", o.mul(t, o.add(t, o.f(2.0))))))
    y = o.select(o.lt(x, o.f(2.0 ** 28)), small, _log_2x(o, x))
    return o.select(o.lt(x, o.f(1.0)), o.f(math.nan), y)


def _atanh(o: _Ops, x):
    """log1p(2a / (1 - a)) / 2 for a = |x|; below 1/2 as 2a + 2a a / (1 - a), which keeps the
    rounding of 1 - a out of the leading term."""
    a = o.un("abs", x)
    t = o.add(a, a)
    one_minus = o.sub(o.f(1.0), a)
    small = o.add(t, o.div(o.mul(t, a), one_minus))
    y = o.select(o.lt(a, o.f(0.5)), small, o.div(t, one_minus))
    y = o.copysign(o.half(o.un("log1p", y)), x)
    # selected, not divided: Vulkan leaves t / (1 - a) undefined for 1 - a = 0 or beyond 2^126
    # (NVIDIA's flushed 2a / (1 - a) to -0 for a = 1.2e38, and atanh to -0)
    y = o.select(o.eq(a, o.f(1.0)), o.copysign(o.f(math.inf), x), y)
    return o.select(o.gt(a, o.f(1.0)), o.f(math.nan), y)


def _asin(o: _Ops, x):
    """atan2(x, sqrt((1 - x)(1 + x))): 1 - x is exact near 1, where 1 - x^2 would cancel. Below
    2^-12, x itself (x^3/6 is under half an ulp), so no subnormal reaches a division."""
    y = o.bin("atan2", x, _cos_of_asin(o, x))
    return o.select(o.lt(o.un("abs", x), o.f(2.0 ** -12)), x, y)


def _acos(o: _Ops, x):
    return o.bin("atan2", _cos_of_asin(o, x), x)


def _cos_of_asin(o: _Ops, x):
    return o.un("sqrt", o.mul(o.sub(o.f(1.0), x), o.add(o.f(1.0), x)))


def _cbrt(o: _Ops, x):
    """Kahan's estimate (the exponent divided by 3 through the bits, ~3% off), then Halley's
    iteration y (r + 2) / (2r + 1) with r = y^3 / a, which triples the correct digits each step.
    |x| beyond 2^±60 is scaled by 2^∓120 first (exact), so subnormals become normal and y / s
    never divides by more than 2^60 (Vulkan bounds division only to 2^126: NVIDIA's rcp of a huge
    s flushed to 0, cbrt(3.4e38) came out 4x too big). 0, inf and NaN are their own cube roots.
    The odd functions here work on |x| and take x's sign last, which keeps -0 and NaN."""
    magic = 709958130
    a = o.un("abs", x)
    big, small = o.gt(a, o.f(2.0 ** 60)), o.lt(a, o.f(2.0 ** -60))
    s = o.select(big, o.mul(a, o.f(2.0 ** -120)), o.select(small, o.mul(a, o.f(2.0 ** 120)), a))
    third = Binary("div", o.bits(s), o.i(3), o.it)
    y = o.from_bits(Binary("add", third, o.i(magic), o.it))
    for _ in range(2):  # y^3 / s as (y / s) y y: no overflow, no underflow
        r = o.mul(o.mul(o.div(y, s), y), y)
        y = o.mul(y, o.div(o.add(r, o.f(2.0)), o.add(o.add(r, r), o.f(1.0))))
    y = o.select(big, o.mul(y, o.f(2.0 ** 40)), o.select(small, o.mul(y, o.f(2.0 ** -40)), y))
    special = Compare("uno", o.sub(a, a), o.f(0.0))  # inf or NaN
    y = o.select(Compare("eq", a, o.f(0.0)), a, y)
    return o.copysign(o.select(special, a, y), x)


def _erfc(o: _Ops, x):
    """1 - erf(x) below 1/2, where erf(x) < 0.53 leaves no cancellation; above, ERFC_NEAR/FAR.
    e^{-x^2} is e^{-h^2} e^{-(x-h)(x+h)} with h = x to half the mantissa bits, so h^2 is exact:
    x^2 rounded would cost up to 100 ulp near 10."""
    a = o.bin("min", x, o.f(10.5))  # NaN stays NaN
    h = o.from_bits(Binary("and", o.bits(a), o.i(-1 << 12), o.it))
    a1 = o.add(a, o.f(1.0))
    t = o.div(o.f(1.0), a1)
    near = o.lt(a, o.f(2.0))
    coeffs = [o.select(near, o.f(p), o.f(q)) for p, q in zip(ERFC_NEAR, ERFC_FAR)]
    q = o.poly(o.sub(t, o.select(near, o.f(0.5), o.f(0.21))), coeffs)
    r = o.mul(o.div(q, a1), o.un("exp", o.mul(o.sub(h, a), o.add(a, h))))
    tail = o.mul(r, o.un("exp", o.un("neg", o.mul(h, h))))
    return o.select(o.lt(x, o.f(0.5)), o.sub(o.f(1.0), o.un("erf", x)), tail)


def _atan_core(o: _Ops, q):
    """atan(q) for q in [0, 1] (or NaN): above tan(pi/8) as pi/4 + atan((q - 1) / (q + 1))."""
    reduced = Compare("gt", q, o.f(TAN_PI_8))
    s = o.select(reduced, o.div(o.sub(q, o.f(1.0)), o.add(q, o.f(1.0))), q)
    s2 = o.mul(s, s)
    p = o.add(s, o.mul(o.mul(s, s2), o.poly(s2, ATAN_P)))
    return o.select(reduced, o.add(o.f(math.pi / 4), p), p)


def _atan(o: _Ops, x):
    a = o.un("abs", x)
    inverted = Compare("gt", a, o.f(1.0))
    # 1/a within division's range: beyond 2^30, pi/2 - 1/a rounds to pi/2 anyway
    r = _atan_core(o, o.select(inverted, o.div(o.f(1.0), o.bin("min", a, o.f(2.0 ** 30))), a))
    return o.copysign(o.select(inverted, o.sub(o.f(math.pi / 2), r), r), x)


def _atan2(o: _Ops, y, x):
    """atan(min/max) of the magnitudes, then reflected into the quadrant; C99's special cases:
    both infinite gives an odd multiple of pi/4, both zero 0 or pi by the sign of x. Ordered by
    a compare, not min/max, which NVIDIA's Vulkan driver flushed for subnormals; the quotient by
    ``_safe_div``."""
    ax, ay = o.un("abs", x), o.un("abs", y)
    swap = Compare("gt", ay, ax)
    lo, hi = o.select(swap, ax, ay), o.select(swap, ay, ax)
    inf = o.f(math.inf)
    q = o.select(Compare("eq", hi, o.f(0.0)), o.f(0.0), _safe_div(o, lo, hi))
    q = o.select(Compare("eq", hi, inf), o.select(Compare("eq", lo, inf), o.f(1.0), o.f(0.0)), q)
    q = o.select(Compare("uno", lo, hi), o.add(lo, hi), q)  # not lo * 0: drivers fold that
    r = _atan_core(o, q)
    r = o.select(swap, o.sub(o.f(math.pi / 2), r), r)
    x_negative = Compare("lt", o.bits(x), o.i(0))  # -0 included
    r = o.select(x_negative, o.sub(o.f(math.pi), r), r)
    return o.copysign(r, y)


def _safe_div(o: _Ops, a, b):
    """a / b for finite nonzero b and |a / b| < 2^63, as (a 2^(k+64)) / (b 2^k) 2^-64 with 2^k
    (exact, subnormal b first scaled by 2^64) bringing |b| into [1, 2): Vulkan bounds OpFDiv
    only for |b| in [2^-126, 2^126] (NVIDIA computes a * rcp(b), rcp flushing to 0 beyond), and
    the extra 2^64 keeps a subnormal numerator out of the division."""
    def exponent(v):
        return Binary("and", o.b.ashr(o.bits(v), o.i(23)), o.i(255), o.it)
    subnormal = Compare("eq", exponent(b), o.i(0))
    a, b = (o.select(subnormal, o.mul(v, o.f(2.0 ** 64)), v) for v in (a, b))
    k = o.b.sub(o.i(127), exponent(b))
    q = o.div(o.scale(a, o.b.add(k, o.i(64))), o.scale(b, k))
    return o.mul(q, o.f(2.0 ** -64))


def _quadrant(o: _Ops, x):
    """(r, q): x = (4m + q) pi/2 + r, |r| <= pi/4 (about), q an i32 in [0, 3]."""
    cw_r, cw_q = _cody_waite(o, x)
    ph_r, ph_q = _payne_hanek(o, o.un("abs", x))
    negative = o.lt(x, o.f(0.0))  # x = -(4m + q) pi/2 - r = (4m' + (-q mod 4)) pi/2 - r
    ph_r = o.select(negative, o.un("neg", ph_r), ph_r)
    ph_q = o.select(negative, Binary("and", Binary("sub", o.i(0), ph_q, o.it), o.i(3), o.it), ph_q)
    a = o.un("abs", x)  # NaN and inf take Cody-Waite's NaN
    large = Binary("and", Compare("ge", a, o.f(CODY_WAITE_LIMIT)), o.lt(a, o.f(math.inf)), "i1")
    # Payne-Hanek's 64-bit products cost more than the rest of sin: branched around (lazy)
    return (Select(large, ph_r, cw_r, ph_r.dtype, lazy=True),
            Select(large, ph_q, cw_q, ph_q.dtype, lazy=True))


def _cody_waite(o: _Ops, x):
    """Subtracts n pi/2 part by part, each product and difference exact while |n| < 2^16."""
    n, k = o.round_to_int(o.add(o.mul(x, o.f(2 / math.pi)), o.f(o.round_magic)))
    r = x
    for part in PIO2_PARTS:
        r = o.sub(r, o.mul(n, o.f(part)))
    return r, Binary("and", k, o.i(3), o.it)


def _payne_hanek(o: _Ops, a):
    """For a >= 2: a (2/pi) mod 4 in 2.62 fixed point from the 24-bit mantissa times the 96 bits
    of 2/pi that matter at a's exponent (as ARM's optimized-routines sinf), with 64-bit integers;
    the remainder becomes r in f32 with one rounding (and one for the scale)."""
    u32, u64 = "ui32", "ui64"
    bits = Cast("bitcast", a, u32)

    def int_op(op, p, q, dtype):
        return Binary(op, p, q if not isinstance(q, int) else Const(q, dtype), dtype)

    exponent = int_op("shr", bits, 23, u32)
    index = int_op("and", int_op("shr", exponent, 3, u32), 15, u32)
    mantissa = int_op("shl", int_op("or", int_op("and", bits, 0xFFFFFF, u32), 0x800000, u32),
                      int_op("and", exponent, 7, u32), u32)

    def window(first: int):  # TWO_OVER_PI_WINDOWS[index + first], by a tree of selects
        values = [Const(w, u32) for w in TWO_OVER_PI_WINDOWS[first:first + 16]]
        for bit in range(4):
            odd = Compare("ne", int_op("and", index, 1 << bit, u32), Const(0, u32))
            values = [Select(odd, hi, lo, u32) for lo, hi in zip(values[::2], values[1::2])]
        return values[0]

    def wide(v):
        return Cast("extui", v, u64)

    low = int_op("mul", mantissa, window(0), u32)  # only its low 32 bits matter (mod 4)
    mid = int_op("mul", wide(mantissa), wide(window(4)), u64)
    high = int_op("mul", wide(mantissa), wide(window(8)), u64)
    fixed = int_op("add", int_op("or", int_op("shr", high, 32, u64), int_op("shl", wide(low), 32, u64),
                                 u64), mid, u64)
    n = int_op("shr", int_op("add", fixed, 1 << 61, u64), 62, u64)
    rest = Cast("bitcast", int_op("sub", fixed, int_op("shl", n, 62, u64), u64), "i64")
    r = o.mul(Cast("sitofp", rest, o.dt), o.f(math.pi / 2 * 2.0 ** -62))
    return r, Cast("trunci", n, o.it)


def _sin_cos(o: _Ops, r):
    r2 = o.mul(r, r)
    sin = o.add(r, o.mul(o.mul(r, r2), o.poly(r2, SIN_P)))
    cos = o.add(o.sub(o.f(1.0), o.half(r2)), o.mul(o.mul(r2, r2), o.poly(r2, COS_P)))
    return sin, cos


def _sin_or_cos(shift: int):
    """sin (shift 0) or cos (shift 1): the quadrant picks +-sin(r) or +-cos(r)."""
    def lower(o: _Ops, x):
        r, q = _quadrant(o, x)
        q = Binary("and", Binary("add", q, o.i(shift), o.it), o.i(3), o.it)
        sin, cos = _sin_cos(o, r)
        y = o.select(Compare("eq", Binary("and", q, o.i(1), o.it), o.i(0)), sin, cos)
        y = o.select(Compare("gt", q, o.i(1)), o.un("neg", y), y)
        return y if shift else _keep_zero(o, x, y)
    return lower


def _keep_zero(o: _Ops, x, y):
    """y, but ±0 for ±0: lavapipe loses the sign of -0 through the reduction's -0 - 0."""
    return o.select(Compare("eq", x, o.f(0.0)), x, y)


def _tan(o: _Ops, x):
    r, q = _quadrant(o, x)
    sin, cos = _sin_cos(o, r)
    odd = Compare("eq", Binary("and", q, o.i(1), o.it), o.i(1))
    return _keep_zero(o, x, o.select(odd, o.un("neg", o.div(cos, sin)), o.div(sin, cos)))


def _round(o: _Ops, x):
    """Half away from zero: trunc(x) plus one away from zero where |x - trunc(x)| >= 1/2 (exact);
    floor(|x| + 1/2) would round 0.49999997 up."""
    t = o.un("trunc", x)
    up = Compare("ge", o.un("abs", o.sub(x, t)), o.f(0.5))
    return o.add(t, o.copysign(o.select(up, o.f(1.0), o.f(0.0)), x))


def _sign(o: _Ops, x):
    """-1 or 1 by the sign bit; ±0 and NaN are their own sign."""
    return o.select(Compare("ueq", x, o.f(0.0)), x, o.copysign(o.f(1.0), x))


def _two_product(o: _Ops, a, b):
    """(p, e) with p + e = a * b exactly (Dekker, by Veltkamp's 12-bit halves: no FMA needed)."""
    def halves(v):
        c = o.mul(v, o.f(4097.0))
        hi = o.sub(c, o.sub(c, v))
        return hi, o.sub(v, hi)
    p = o.mul(a, b)
    (ah, al), (bh, bl) = halves(a), halves(b)
    e = o.add(o.add(o.add(o.sub(o.mul(ah, bh), p), o.mul(ah, bl)), o.mul(al, bh)), o.mul(al, bl))
    return p, e


def _log2_double(o: _Ops, a):
    """log2(a) for a >= 0 as an unevaluated sum hi + lo good to ~2^-40: ln(1 + f) = 2 atanh(s),
    s = f / (2 + f), with s itself carried as sh + sl (f - 2 sh and then - sh f are exact, by
    Sterbenz), and the conversion to base 2 and the exponent added as exact two-sums."""
    _, e, f = split_exponent(o, a)
    two = o.add(o.f(2.0), f)
    sh = o.div(f, two)
    p, pe = _two_product(o, sh, f)
    sl = o.div(o.sub(o.sub(o.sub(f, o.add(sh, sh)), p), pe), two)
    s2 = o.mul(sh, sh)
    ln_hi = o.add(sh, sh)  # ln(1 + f) = 2s + s^3 P(s^2)
    ln_lo = o.add(o.add(sl, sl), o.mul(o.mul(sh, s2), o.poly(s2, ATANH_P)))
    q, qe = _two_product(o, ln_hi, o.f(LOG2E_HI))
    lo = o.add(qe, o.add(o.mul(ln_hi, o.f(LOG2E - LOG2E_HI)), o.mul(ln_lo, o.f(LOG2E))))
    hi = o.add(e, q)  # |e| >= 1 > |q| or e = 0: the rounding error is q - (hi - e)
    lo = o.add(o.sub(q, o.sub(hi, e)), lo)
    ok = Binary("and", o.gt(a, o.f(0.0)), o.lt(a, o.f(math.inf)), "i1")
    special = o.select(o.eq(a, o.f(0.0)), o.f(-math.inf), a)
    return o.select(ok, hi, special), o.select(ok, lo, o.f(0.0))


def _pow_f32(o: _Ops, x, y):
    """pow for targets without f64: 2^(y log2|x|) with y log2|x| carried as a double-f32 sum,
    which keeps it within ~2^-31 relative (the product is exact by _two_product); then x's
    sign and C99's special cases as on llvm-cpu."""
    hi, lo = _log2_double(o, o.un("abs", x))
    zh, ze = _two_product(o, y, hi)
    # else 2^z over- or underflows anyway, or log2|x| = 0 exactly (and y * 4097 could overflow)
    finite = Binary("and", o.lt(o.un("abs", zh), o.f(150.0)), o.lt(o.un("abs", y), o.f(2.0 ** 100)),
                    "i1")
    zl = o.select(finite, o.add(ze, o.mul(y, lo)), o.f(0.0))
    z = o.clamp(zh, -160.0, 130.0)
    n, k = o.round_to_int(o.add(z, o.f(o.round_magic)))
    r = o.add(o.sub(z, n), zl)
    return with_sign(o, x, y, o.scale(o.add(o.f(1.0), o.mul(r, o.poly(r, EXP2_P))), k))


_UNARY = {"sinh": _sinh, "cosh": _cosh, "asinh": _asinh, "acosh": _acosh, "atanh": _atanh,
          "asin": _asin, "acos": _acos, "cbrt": _cbrt, "erfc": _erfc, "atan": _atan,
          "sin": _sin_or_cos(0), "cos": _sin_or_cos(1), "tan": _tan, "round": _round, "sign": _sign,
          **VECMATH_UNARY}
_BINARY = {"atan2": _atan2, **VECMATH_BINARY}


@functools.lru_cache(maxsize=4096)  # every lane of a kernel expands the same nodes
def expand(e: Unary | Binary, float64: bool = True, refine_division: bool = False) -> Expr:
    """``e``, a float op of EXPANDED, GPU_EXPANDED or EXACT, as other kernel-IR ops; those of
    EXACT compute in their own dtype (narrowing f64 would change them). ``float64``: whether
    the target has f64, which pow uses inside; ``refine_division``: see ``_Ops.div``."""
    compute = e.dtype if e.op in EXACT else "f32"
    args = [e.x] if isinstance(e, Unary) else [e.a, e.b]
    args = [a if a.dtype == compute else Cast("fpext" if a.dtype != "f64" else "fptrunc", a, compute)
            for a in args]
    fn = _UNARY[e.op] if isinstance(e, Unary) else _BINARY[e.op]
    if e.op == "pow" and not float64:
        fn = _pow_f32
    y = _shared(fn(_Ops(compute, refine_division), *args), args)
    if e.dtype == compute:
        return y
    return Cast("fpext" if e.dtype == "f64" else "fptrunc", y, e.dtype)


_HASHED: dict[type, type] = {}


def _hashed(cls: type) -> type:
    """``cls`` with its hash kept: a frozen dataclass rehashes its whole tree on every hash,
    and the expansions are DAGs whose trees are huge (a refined division repeats its operands
    ~20 times), which the backends' value-numbering dicts would walk again at every node."""
    if cls not in _HASHED:
        def __hash__(self, _base=cls.__hash__):
            h = self.__dict__.get("_hash")
            if h is None:
                h = _base(self)
                object.__setattr__(self, "_hash", h)
            return h
        _HASHED[cls] = type(cls.__name__, (cls,), {"__hash__": __hash__, "__module__": cls.__module__})
    return _HASHED[cls]


def _shared(root: Expr, inputs) -> Expr:
    """``root`` rebuilt from hash-keeping nodes, equal sub-expressions made one object (so
    equality stops at identity); the expansion's ``inputs`` are kept as they are."""
    done: dict[int, Expr] = {id(a): a for a in inputs}
    table: dict[tuple, Expr] = {}

    def go(n):
        if id(n) in done:
            return done[id(n)]
        if isinstance(n, (Unary, Binary, Compare, Select, Cast)):
            values = {f.name: go(getattr(n, f.name)) if f.name in ("x", "a", "b", "cond")
                      else getattr(n, f.name) for f in dataclasses.fields(n)}
            key = (type(n), *values.values())
            if key not in table:
                table[key] = _hashed(type(n))(**values)
            done[id(n)] = table[key]
        else:
            done[id(n)] = n
        return done[id(n)]
    return go(root)


def exact_root(e: Unary, native) -> Expr:
    """sqrt or rsqrt of ``e.x`` (any float dtype), correctly rounded (sqrt) or within an ulp
    (rsqrt), with ``native(m)`` (the driver's op, kernel IR) only ever applied to m in [1, 4):
    Vulkan lets GLSL Sqrt/InverseSqrt be ~3 ulp off and flush subnormal inputs (NVIDIA's
    sqrt(-1e-45) was -0, rsqrt -inf). x = m 4^k (subnormals scaled by 2^24 first); sqrt(m) is
    rounded by an integer test on its 24-bit mantissa S (Newton step, then S^2 - S < N <= S^2 + S
    with N = m 2^46), rsqrt(m) refined by a Newton step on the exact residual 1 - m y^2; special
    values are selected. f16 and bf16 compute in f32 and round once (for sqrt harmless:
    24 >= 2 * 11 + 2 bits); f64 is not for here (its range and bits are not f32's)."""
    o = _Ops("f32")
    x = e.x if e.x.dtype == "f32" else Cast("fptrunc" if e.x.dtype == "f64" else "fpext", e.x, "f32")
    subnormal = o.lt(o.un("abs", x), o.f(2.0 ** -126))
    bits = o.bits(o.select(subnormal, o.mul(x, o.f(2.0 ** 24)), x))
    k = o.b.ashr(o.b.sub(o.b.ashr(bits, o.i(23)), o.i(127)), o.i(1))  # floor(exponent / 2)
    m = o.from_bits(o.b.sub(bits, o.b.shl(k, o.i(24))))
    k = o.b.sub(k, o.select(subnormal, o.i(12), o.i(0)))
    r = native(m)
    if e.op == "sqrt":
        def wide(v):
            return Cast("fptosi", v, "i64")
        n = Binary("shl", wide(o.mul(m, o.f(2.0 ** 23))), Const(23, "i64"), "i64")
        s = wide(o.mul(r, o.f(2.0 ** 23)))
        residual = Cast("sitofp", Binary("sub", n, Binary("mul", s, s, "i64"), "i64"), "f32")
        s = Binary("add", s, wide(o.un("roundeven", o.div(o.mul(residual, o.f(2.0 ** -24)), r))),
                   "i64")
        s2 = Binary("mul", s, s, "i64")
        up = Compare("gt", n, Binary("add", s2, s, "i64"))
        down = Compare("le", n, Binary("sub", s2, s, "i64"))
        one, zero = Const(1, "i64"), Const(0, "i64")
        s = Binary("sub", Binary("add", s, Select(up, one, zero, "i64"), "i64"),
                   Select(down, one, zero, "i64"), "i64")
        y = o.mul(Cast("sitofp", s, "f32"), o.pow2(o.b.sub(k, o.i(23))))
        edge = o.select(o.lt(x, o.f(0.0)), o.f(math.nan), x)  # ±0, +inf, NaN: themselves
    else:
        p, pe = _two_product(o, r, r)
        q, qe = _two_product(o, m, p)
        h = o.sub(o.sub(o.sub(o.f(1.0), q), qe), o.mul(m, pe))
        y = o.mul(o.add(r, o.mul(r, o.half(h))), o.pow2(o.b.sub(o.i(0), k)))
        edge = o.select(o.eq(x, o.f(0.0)), o.copysign(o.f(math.inf), x),
                        o.select(o.eq(x, o.f(math.inf)), o.f(0.0), x))
        edge = o.select(o.lt(x, o.f(0.0)), o.f(math.nan), edge)
    y = _shared(o.select(Binary("and", o.gt(x, o.f(0.0)), o.lt(x, o.f(math.inf)), "i1"), y, edge),
                [x, r])
    if e.dtype == "f32":
        return y
    return Cast("fpext" if e.dtype == "f64" else "fptrunc", y, e.dtype)


EXACT_FMOD = frozenset({"f32", "f16", "bf16"})  # the dtypes exact_fmod takes (f64 keeps its own)
FMOD_SHIFT = 39  # bits a remainder below 2^24 can be shifted by and stay within 64


def exact_fmod(e: Binary) -> Expr:
    """C's fmod (arith.remf) of f32, f16 or bf16 ``e.a``, ``e.b``, exactly, computed in f32 with
    64-bit integers. The GPUs' own remainder is ``a - b * trunc(a / b)``, rounded: from a
    quotient of 2^24 on it loses the remainder (fmod(1e9, 1.5) gave 0, not 1), and a quotient
    rounded up to an integer makes it negative. fmod is exact in the operands' format: with
    |a| = ma 2^ea and |b| = mb 2^eb (24-bit integer mantissas), it is (ma 2^(ea - eb) mod mb)
    2^eb, the power taken in steps of at most FMOD_SHIFT bits (ea - eb <= 253: seven steps)."""
    a, b = (v if v.dtype == "f32" else Cast("fpext", v, "f32") for v in (e.a, e.b))
    o = _Ops("f32")
    i32, u64 = "i32", "ui64"

    def parts(v):
        """(bits of |v|, its 24-bit mantissa as u64, its exponent e with |v| = m 2^(e - 150))."""
        bits = o.b.and_(o.bits(v), o.i(0x7FFFFFFF))
        biased = o.b.ashr(bits, o.i(23))
        fraction = o.b.and_(bits, o.i(0x7FFFFF))
        normal = Compare("gt", biased, o.i(0))
        mantissa = o.select(normal, o.b.or_(fraction, o.i(0x800000)), fraction)
        return bits, Cast("extui", mantissa, u64), Binary("max", biased, o.i(1), i32)

    bits_a, ma, ea = parts(a)
    bits_b, mb, eb = parts(b)
    gap = Binary("max", o.b.sub(ea, eb), o.i(0), i32)
    r = Binary("rem", ma, mb, u64)
    for step in range(-(-253 // FMOD_SHIFT)):
        shift = Binary("min", Binary("max", o.b.sub(gap, o.i(step * FMOD_SHIFT)), o.i(0), i32),
                       o.i(FMOD_SHIFT), i32)
        r = Binary("rem", Binary("shl", r, Cast("extui", shift, u64), u64), mb, u64)
    # r 2^(eb - 150) as r 2^k1 2^k2: k1 >= -126 keeps the first power normal, k2 in [-23, 0]
    k = o.b.sub(eb, o.i(150))
    k1 = Binary("max", k, o.i(-126), i32)

    def power(n):
        return o.from_bits(o.b.shl(o.b.add(n, o.i(127)), o.i(23)))
    magnitude = o.mul(o.mul(Cast("uitofp", r, "f32"), power(k1)), power(o.b.sub(k, k1)))
    nan = Binary("or", Binary("or", Compare("uno", a, b), Compare("eq", b, o.f(0.0)), "i1"),
                 Compare("gt", bits_a, o.i(0x7F7FFFFF)), "i1")  # a NaN, b zero, a infinite
    smaller = Compare("lt", bits_a, bits_b)  # |a| < |b|, an infinite b too: a itself
    result = o.select(nan, o.f(math.nan),
                      o.select(smaller, a, o.copysign(magnitude, a)))
    result = _shared(result, [a, b])
    return result if e.dtype == "f32" else Cast("fptrunc", result, e.dtype)
