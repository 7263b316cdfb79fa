"""Float arithmetic over one float type (f32 or f64, scalar or vector), for the inline math
functions; the integer type of the same width views the bits.

Every helper works lane-wise on ``float`` or ``<N x float>`` alike, with no branches and no
calls other than LLVM intrinsics that lower to plain instructions, so loops that use the math
functions still vectorize. ``fma`` is ``llvm.fmuladd``: fused where the target has FMA and a
multiply plus an add elsewhere; the algorithms are accurate either way.
"""

from __future__ import annotations

import struct

from llvmlite import ir

F64 = ir.DoubleType()


def f32_bits(value: float) -> int:
    return struct.unpack("<i", struct.pack("<f", value))[0]


class MathBuilder:
    def __init__(self, builder: ir.IRBuilder, ty: ir.Type):
        self.b = builder
        self.ty = ty
        self.width = ty.count if isinstance(ty, ir.VectorType) else 0
        self.scalar = ty.element if self.width else ty
        double = isinstance(self.scalar, ir.DoubleType)
        self.mantissa_bits, self.exponent_bias = (52, 1023) if double else (23, 127)
        # 1.5 * 2^mantissa_bits: adding it rounds |x| < 2^(mantissa_bits - 1) to an integer
        self.round_magic = 1.5 * 2.0 ** self.mantissa_bits
        iscalar = ir.IntType(64 if double else 32)
        self.ity = ir.VectorType(iscalar, self.width) if self.width else iscalar

    def of(self, scalar: ir.Type) -> MathBuilder:
        """A builder for ``scalar`` (f32 or f64) at this width, emitting at the same place."""
        return MathBuilder(self.b, ir.VectorType(scalar, self.width) if self.width else scalar)

    # ---- constants and bit views ----

    def f(self, value: float) -> ir.Constant:
        c = ir.Constant(self.scalar, value)
        return ir.Constant(self.ty, [c] * self.width) if self.width else c

    def i(self, value: int) -> ir.Constant:
        c = ir.Constant(self.ity.element if self.width else self.ity, value)
        return ir.Constant(self.ity, [c] * self.width) if self.width else c

    def bits(self, x: ir.Value) -> ir.Value:
        return self.b.bitcast(x, self.ity)

    def from_bits(self, i: ir.Value) -> ir.Value:
        return self.b.bitcast(i, self.ty)

    # ---- arithmetic ----

    def add(self, a, c):
        return self.b.fadd(a, c)

    def sub(self, a, c):
        return self.b.fsub(a, c)

    def mul(self, a, c):
        return self.b.fmul(a, c)

    def div(self, a, c):
        return self.b.fdiv(a, c)

    def fma(self, a, c, d):
        """a * c + d."""
        return self.b.call(self._intrinsic("fmuladd", 3), [a, c, d])

    def poly(self, x, coeffs: tuple[float, ...]) -> ir.Value:
        """sum(coeffs[k] * x**k), by Horner's rule."""
        acc = self.f(coeffs[-1])
        for c in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.f(c))
        return acc

    def abs(self, x):
        return self.b.call(self._intrinsic("fabs", 1), [x])

    def copysign(self, magnitude, sign):
        return self.b.call(self._intrinsic("copysign", 2), [magnitude, sign])

    def trunc(self, x):
        return self.b.call(self._intrinsic("trunc", 1), [x])

    # ---- comparisons (ordered: false when either side is NaN) ----

    def lt(self, a, c):
        return self.b.fcmp_ordered("<", a, c)

    def gt(self, a, c):
        return self.b.fcmp_ordered(">", a, c)

    def eq(self, a, c):
        return self.b.fcmp_ordered("==", a, c)

    def select(self, cond, a, c):
        return self.b.select(cond, a, c)

    def clamp(self, x, lo: float, hi: float):
        """x limited to [lo, hi]; NaN stays NaN."""
        x = self.select(self.gt(x, self.f(hi)), self.f(hi), x)
        return self.select(self.lt(x, self.f(lo)), self.f(lo), x)

    # ---- exponent manipulation ----

    def round_to_int(self, t):
        """For ``t = x + round_magic`` (already rounded): the integer n = round(x) as a float and
        as an integer, read from the low mantissa bits (no float-to-int conversion, which is
        poison on NaN)."""
        n = self.sub(t, self.f(self.round_magic))
        k = self.b.sub(self.bits(t), self.bits(self.f(self.round_magic)))
        return n, k

    def pow2(self, k):
        """2**k for an integer k in the normal exponent range ([-126, 127] for f32)."""
        k = self.b.add(k, self.i(self.exponent_bias))
        return self.from_bits(self.b.shl(k, self.i(self.mantissa_bits)))

    def scale(self, p, k):
        """p * 2**k for k up to twice the exponent range with one rounding: two exact steps of
        half each, so that results that overflow or are subnormal come out right."""
        half = self.b.ashr(k, self.i(1))
        return self.mul(self.mul(p, self.pow2(half)), self.pow2(self.b.sub(k, half)))

    def _intrinsic(self, name: str, arity: int) -> ir.Function:
        bits = 64 if isinstance(self.scalar, ir.DoubleType) else 32
        suffix = f"v{self.width}f{bits}" if self.width else f"f{bits}"
        full = f"llvm.{name}.{suffix}"
        module = self.b.module
        fn = module.globals.get(full)
        return fn if fn is not None else ir.Function(
            module, ir.FunctionType(self.ty, [self.ty] * arity), full)
