"""Scalar expressions of the kernel IR -> SPIR-V instructions, value-numbered per scope.

Every kernel dtype maps to a compute type (``Shader.compute_type``); integers have no signedness
in their type, so each op picks the signed or unsigned instruction from the kernel dtype. Where
GLSL.std.450 is undefined or loose (NaN in min/max, pow of negatives) the lowering spells out the
numpy semantics; transcendental functions, round and sign come from ``codegen/common/math_expansion``,
and so do sqrt and rsqrt (``exact_root``: GLSL's are ~3 ulp and may flush subnormal inputs).
A Select whose arm holds a load that may be out of range becomes a branch, so only the chosen arm
is evaluated.
"""

from __future__ import annotations

import math

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.math_expansion import (
    EXACT,
    EXACT_FMOD,
    GPU_EXPANDED,
    exact_fmod,
    exact_root,
    expand,
)
from pyree.compiler.codegen.spirv import assembler as S
from pyree.compiler.codegen.spirv.shader import Shader
from pyree.compiler.errors import CompileError

# GLSL.std.450 instruction numbers.
G_ROUND_EVEN, G_TRUNC, G_FABS, G_SABS, G_SSIGN, G_FLOOR, G_CEIL = 2, 3, 4, 5, 7, 8, 9
G_FMIN, G_UMIN, G_SMIN, G_FMAX, G_UMAX, G_SMAX = 37, 38, 39, 40, 41, 42
_TRANSCENDENTAL = {"sqrt": 31, "rsqrt": 32}  # GLSL.std.450's, 64-bit forms too

NO_CONTRACTION = 42  # SPIR-V decoration: no fusing into an FMA
_FLOAT_BINARY = {"add": 129, "sub": 131, "mul": 133, "div": 136, "rem": 140}
_INT_BINARY = {"add": 128, "sub": 130, "mul": 132, "and": 199, "or": 197, "xor": 198}
OP_SHIFT_RIGHT_LOGICAL, OP_SHIFT_RIGHT_ARITHMETIC, OP_SHIFT_LEFT_LOGICAL = 194, 195, 196
OP_UGREATER_THAN_EQUAL, OP_IEQUAL = 174, 170
_BOOL_BINARY = {"and": 167, "or": 166, "xor": 165, "max": 166, "min": 167}
_FLOAT_COMPARE = {"eq": 180, "ueq": 181, "ne": 182, "une": 183, "lt": 184, "ult": 185,
                  "gt": 186, "ugt": 187, "le": 188, "ule": 189, "ge": 190, "uge": 191}
_SIGNED_COMPARE = {"eq": 170, "ne": 171, "gt": 173, "ge": 175, "lt": 177, "le": 179}
_UNSIGNED_COMPARE = {"eq": 170, "ne": 171, "gt": 172, "ge": 174, "lt": 176, "le": 178}
OpIsNan, OpLogicalOr, OpLogicalNot, OpLogicalNotEqual, OpLogicalEqual = 156, 166, 168, 165, 164
OpIsInf, OpFOrdEqual = 157, 180
OpFNegate, OpSNegate, OpNot, OpBitcast, OpFConvert = 127, 126, 200, 124, 115
OpConvertFToU, OpConvertFToS, OpConvertSToF, OpConvertUToF = 109, 110, 111, 112
OpINotEqual, OpBitwiseAnd, OpBitwiseOr = 171, 199, 197


def _compute(dtype: str) -> str:
    """The dtype whose instructions compute ``dtype``: bf16's are f32's."""
    return "f32" if dtype == "bf16" else dtype


def _by_constant_zero(e: K.Binary) -> K.Expr | None:
    """``x * ±0.0`` or ``x / ±0.0`` with the zero a constant, as IEEE defines them (±0 for a
    finite x, NaN for inf or NaN; ±inf for a nonzero x, NaN for 0 or NaN), or None for any
    other product. Mesa's lavapipe (22.3) folded both to +0.0 whatever x was, though the shader
    declares SignedZeroInfNanPreserve (NaN * 0 gave 0, torch's softshrink(NaN) 0)."""
    def zero(v):
        return isinstance(v, K.Const) and float(v.value) == 0.0
    dtype = e.dtype
    if e.op == "mul" and zero(e.a) and not zero(e.b):
        x, c = e.b, e.a
    elif zero(e.b):
        x, c = e.a, e.b
    else:
        return None
    signed = K.Unary("neg", x, dtype) if math.copysign(1.0, float(c.value)) < 0 else x
    nan = K.Const(math.nan, dtype)
    if e.op == "mul":
        finite = K.Compare("lt", K.Unary("abs", x, dtype), K.Const(math.inf, dtype))  # ordered
        return K.Select(finite, K.Binary("copysign", K.Const(0.0, dtype), signed, dtype), nan, dtype)
    undefined = K.Compare("ueq", x, K.Const(0.0, dtype))  # 0 / 0, NaN / 0
    return K.Select(undefined, nan, K.Binary("copysign", K.Const(math.inf, dtype), signed, dtype),
                    dtype)


class ScalarLowering:
    """Lowers expressions at one loop point; ``accs`` are Function variables holding Acc(k) or,
    for results of earlier phases, Final(k)."""

    def __init__(self, shader: Shader, point: list, accs: list | None = None,
                 unsafe: frozenset = frozenset()):
        self.sh, self.fn, self.asm = shader, shader.fn, shader.asm
        self.point, self.accs, self.unsafe = point, accs or [], unsafe
        self.memo: dict[K.Expr, int] = {}
        self._unsafe_memo: dict = {}
        self.native_roots: set[K.Unary] = set()  # exact_root's own GLSL Sqrt/InverseSqrt

    def __call__(self, e: K.Expr) -> int:
        if e not in self.memo:
            for node in K.lowering_order(e, self.memo):
                if node not in self.memo:  # lowered meanwhile as a Select's arm
                    self.memo[node] = self._lower(node)
        return self.memo[e]

    def scoped(self, e: K.Expr) -> int:
        """``e`` lowered in a nested block: nothing computed there is reused outside it."""
        saved = dict(self.memo)
        try:
            return self(e)
        finally:
            self.memo = saved

    # -- helpers ---------------------------------------------------------------------------------
    def t(self, dtype: str) -> int:
        return self.sh.compute_type(dtype)

    def const(self, value, dtype: str) -> int:
        if dtype == "i1":
            return self.asm.const_bool(bool(value))
        if dtype == "bf16":
            value = K.DTYPES[dtype].type(value)
        bits = self.sh.compute_bits(dtype)
        if K.is_float(dtype):
            return self.asm.const_float(bits, float(value))
        return self.asm.const_int(bits, int(value))

    def _glsl(self, number: int, dtype: str, *args) -> int:
        """A GLSL.std.450 float op (Sqrt and InverseSqrt have 64-bit forms, as GLSL 4's double
        sqrt: f64 through f32, as exact_root computes, made sqrt(1e300) inf)."""
        return self.fn.ext(self.t(dtype), number, *args)

    def _unsupported(self, what: str):
        return CompileError(f"the vulkan-spirv target does not support {what} in "
                            f"{self.sh.where}")

    # -- nodes -----------------------------------------------------------------------------------
    def _lower(self, e: K.Expr) -> int:
        if isinstance(e, K.Load):
            return self.sh.load(e.binding, self.sh.address(e.index[0], self.point))
        if isinstance(e, K.Gather):  # clamped again: the shader never trusts its index
            kernel = self.sh.kernel
            at = K.gather_offset(e.index, kernel.bindings[e.binding].shape, kernel.loop_ranges)
            if at.dtype != "i32":  # a run-time dim's index arithmetic; bindings stay below 2**31
                at = K.Cast("trunci", at, "i32")
            return self.sh.load(e.binding, self(at))  # i32: bindings are below 2**31 elements
        if isinstance(e, K.SizeValue) and self.sh.sizes is not None:  # a push constant's size
            bits = self.sh.compute_bits(e.dtype)
            if bits not in (32, 64):
                raise self._unsupported(f"a run-time size read as {e.dtype}")
            return self.sh.sizes.wide(e.size) if bits == 64 else self.sh.sizes(e.size)
        if isinstance(e, K.Const):
            return self.const(e.value, e.dtype)
        if isinstance(e, K.LoopIndex):
            i = self.point[e.dim]
            bits = self.sh.compute_bits(e.dtype)
            return i if bits == 32 else self.fn.op(S.OpUConvert, self.t(e.dtype), i)
        if isinstance(e, (K.Acc, K.Final)):  # a phase's accumulators, its earlier phases' finals
            return self.fn.op(S.OpLoad, self.t(e.dtype), self.accs[e.result])
        if isinstance(e, K.Select):
            return self._select(e)
        if isinstance(e, K.Compare):
            return self._compare(e.predicate, self(e.a), self(e.b), _compute(e.a.dtype))
        if isinstance(e, K.Binary) and e.op == "rem" and e.dtype in EXACT_FMOD \
                and self.sh.target.int64:
            return self(exact_fmod(e))
        if isinstance(e, K.Binary) and e.op in ("mul", "div") and K.is_float(e.dtype):
            by_zero = _by_constant_zero(e)
            if by_zero is not None:
                return self(by_zero)
        if isinstance(e, (K.Unary, K.Binary)) and K.is_float(e.dtype) and self._expanded(e.op):
            return self(expand(e, self.sh.target.float64, refine_division=True))
        if (isinstance(e, K.Unary) and e.op in _TRANSCENDENTAL and K.is_float(e.dtype)
                and e.dtype != "f64" and e not in self.native_roots):
            return self(exact_root(e, self._native_root(e.op)))
        if isinstance(e, K.Unary):
            value = self._unary(e.op, self(e.x), _compute(e.dtype))
        elif isinstance(e, K.Binary):
            value = self.binary(e.op, self(e.a), self(e.b), _compute(e.dtype))
        elif isinstance(e, K.Cast):
            value = self._cast(e.op, self(e.x), e.x.dtype, e.dtype)
        else:
            raise self._unsupported(f"expression {type(e).__name__}")
        if e.dtype == "bf16" and not (isinstance(e, K.Cast) and e.op == "bitcast"):
            value = self.sh.round_bf16(value)  # bf16 computes in f32: each result is rounded
        elif (e.dtype == "f16" and isinstance(e, K.Cast) and e.op in ("sitofp", "uitofp")
              and self.sh.compute_bits("f16") == 32):
            # so does f16 without the target's float16: a conversion to it rounds (the flow's
            # narrow-float widening leaves arithmetic unrounded until such a conversion)
            value = self.sh.round_f16(value)
        return value

    def _unsafe(self, e: K.Expr) -> bool:
        return isinstance(e, K.Load) and e in self.unsafe

    def _expanded(self, op: str) -> bool:
        """Math is ours (math_expansion), not GLSL.std.450's: Vulkan leaves its precision loose,
        and on lavapipe (f32, all magnitudes) GLSL's max errors were Asin 3809 ulp, Acos 3402,
        Atan 347, Sinh/Tanh/Asinh/Acosh ~1e9 and Exp/Log/Cosh ~1e7 (subnormal results flushed,
        tiny arguments lost), Atanh/Sin/Cos/Tan wrong at -0, NaN or large arguments."""
        return op in GPU_EXPANDED | EXACT

    def _native_root(self, op: str):
        """GLSL's sqrt or rsqrt for exact_root, which applies it only on [1, 4)."""
        def native(m: K.Expr) -> K.Unary:
            node = K.Unary(op, m, "f32")
            self.native_roots.add(node)
            return node
        return native

    def _select(self, e: K.Select) -> int:
        cond = self(e.cond)
        guarded = e.lazy or any(K.contains(arm, self._unsafe, self._unsafe_memo)
                                for arm in (e.a, e.b))
        if not guarded:
            return self.fn.op(S.OpSelect, self.t(e.dtype), cond, self(e.a), self(e.b))
        fn = self.fn
        var = fn.variable(self.t(e.dtype))
        fn.if_then(cond, lambda: fn.do(S.OpStore, var, self.scoped(e.a)),
                   lambda: fn.do(S.OpStore, var, self.scoped(e.b)))
        return fn.op(S.OpLoad, self.t(e.dtype), var)

    def _unary(self, op: str, x: int, dtype: str) -> int:
        fn, t = self.fn, self.t(dtype)
        if dtype == "i1":
            if op == "not":
                return fn.op(OpLogicalNot, t, x)
            raise self._unsupported(f"'{op}' on i1")
        if not K.is_float(dtype):
            unsigned = K.is_unsigned(dtype)
            if op == "neg":
                return fn.op(OpSNegate, t, x)
            if op == "abs":
                return x if unsigned else fn.ext(t, G_SABS, x)
            if op == "not":
                return fn.op(OpNot, t, x)
            if op == "sign":
                if unsigned:
                    nz = fn.op(OpINotEqual, self.sh.bool, x, self.const(0, dtype))
                    return fn.op(S.OpSelect, t, nz, self.const(1, dtype), self.const(0, dtype))
                return fn.ext(t, G_SSIGN, x)
            raise self._unsupported(f"'{op}' on {dtype}")
        simple = {"floor": G_FLOOR, "ceil": G_CEIL, "roundeven": G_ROUND_EVEN, "trunc": G_TRUNC,
                  "abs": G_FABS}
        if op == "neg":
            return fn.op(OpFNegate, t, x)
        if op in simple:
            return fn.ext(t, simple[op], x)
        if op in ("sqrt", "rsqrt"):
            return self._glsl(_TRANSCENDENTAL[op], dtype, x)
        raise self._unsupported(f"'{op}' on {dtype}")

    def binary(self, op: str, a: int, b: int, dtype: str) -> int:
        fn, t = self.fn, self.t(dtype)
        if dtype == "i1":
            if op in _BOOL_BINARY:
                return fn.op(_BOOL_BINARY[op], t, a, b)
            raise self._unsupported(f"'{op}' on i1")
        if K.is_float(dtype):
            if op in _FLOAT_BINARY:
                # Rounded on its own, as arith and llvm-cpu round it: a driver may otherwise fuse
                # a product and a sum into an FMA, which breaks math_expansion's exact products.
                # Vulkan bounds a division only for |b| in [2^-126, 2^126]; rescaling b
                # (math_expansion._safe_div) would add ~10 instructions to every division, and
                # the math expansions scale for themselves.
                result = fn.op(_FLOAT_BINARY[op], t, a, b)
                self.asm.decorate(result, NO_CONTRACTION)
                if op == "div" and self.sh.compute_bits(dtype) == 32:
                    return self._rounded_quotient(result, a, b, dtype)
                return self._fmod(result, a, b, dtype) if op == "rem" else result
            if op in ("max", "min"):  # NaN-propagating, like arith.maximumf / numpy
                m = self._signed_zeros(fn.ext(t, G_FMAX if op == "max" else G_FMIN, a, b),
                                       a, b, op, dtype)
                nan = fn.op(OpLogicalOr, self.sh.bool, fn.op(OpIsNan, self.sh.bool, a),
                            fn.op(OpIsNan, self.sh.bool, b))
                return fn.op(S.OpSelect, t, nan, fn.op(129, t, a, b), m)
            if op == "copysign":
                return self._copysign(a, b, dtype)
            raise self._unsupported(f"'{op}' on {dtype}")
        unsigned = K.is_unsigned(dtype)
        if op in _INT_BINARY:
            return fn.op(_INT_BINARY[op], t, a, b)
        if op in ("shl", "shr"):
            # SPIR-V leaves a shift by the width or more undefined (NVIDIA's takes the amount
            # mod 32: 1 << 40 was 256); it gives 0 or the sign fill, as on every other target
            width = K.int_bits(dtype)
            over = fn.op(OP_UGREATER_THAN_EQUAL, self.sh.bool, b, self.const(width, dtype))
            if op == "shr" and not unsigned:
                fill = fn.op(OP_SHIFT_RIGHT_ARITHMETIC, t, a, self.const(width - 1, dtype))
                return fn.op(S.OpSelect, t, over, fill,
                             fn.op(OP_SHIFT_RIGHT_ARITHMETIC, t, a, b))
            code = OP_SHIFT_LEFT_LOGICAL if op == "shl" else OP_SHIFT_RIGHT_LOGICAL
            return fn.op(S.OpSelect, t, over, self.const(0, dtype), fn.op(code, t, a, b))
        if op in ("div", "rem"):
            # By zero: 0, as every other target gives (Vulkan leaves it undefined).
            by_zero = fn.op(OP_IEQUAL, self.sh.bool, b, self.const(0, dtype))
            return fn.op(S.OpSelect, t, by_zero, self.const(0, dtype),
                         self._divide(op, a, b, dtype, unsigned))
        if op in ("max", "min"):
            number = {("max", True): G_UMAX, ("max", False): G_SMAX,
                      ("min", True): G_UMIN, ("min", False): G_SMIN}[(op, unsigned)]
            return fn.ext(t, number, a, b)
        raise self._unsupported(f"'{op}' on {dtype}")

    def _divide(self, op: str, a: int, b: int, dtype: str, unsigned: bool) -> int:
        fn, t = self.fn, self.t(dtype)
        if unsigned:
            return fn.op(134 if op == "div" else 137, t, a, b)  # OpUDiv / OpUMod
        # On the magnitudes, unsigned, with the sign put back: Vulkan leaves OpSRem undefined
        # for negative operands (NVIDIA's answered -5 rem 4 with 3), and NVIDIA's driver got
        # 64-bit OpSDiv wrong (0 / 3 read as odd: ONNX's Scatter gathered from the wrong
        # row). Truncating, as arith.divsi / remsi; |INT_MIN| wraps to itself, right as
        # unsigned (INT_MIN / -1 wraps to INT_MIN).
        below = lambda v: fn.op(177, self.sh.bool, v, self.const(0, dtype))  # OpSLessThan
        magnitude = lambda v, neg: fn.op(S.OpSelect, t, neg, fn.op(OpSNegate, t, v), v)
        a_neg, b_neg = below(a), below(b)
        r = fn.op(134 if op == "div" else 137, t, magnitude(a, a_neg), magnitude(b, b_neg))
        negative = fn.op(OpLogicalNotEqual, self.sh.bool, a_neg, b_neg) if op == "div" else a_neg
        return magnitude(r, negative)

    def _rounded_quotient(self, q: int, a: int, b: int, dtype: str) -> int:
        """An f32 OpFDiv ``q`` (2.5 ulp in Vulkan: NVIDIA's is a reciprocal and a product)
        corrected to the rounded quotient, as every other target divides: ``q + r / b`` with
        the residual ``r = a - q * b`` exact, ``q * b`` an exact sum of two floats by Dekker's
        split (Vulkan's Fma need not be fused: lavapipe's is not), so the sum rounds the true
        quotient. (A quotient of NVIDIA's 1 ulp off had moved ONNX's DynamicQuantizeLinear by
        one step.) Where ``q`` is 0, infinite or NaN, or the residual is not finite (a divisor
        of 0 or inf, or one past 2^116, whose split overflows), ``q`` stands."""
        fn, t, bool_ = self.fn, self.t(dtype), self.sh.bool

        def op(code: int, x: int, y: int) -> int:  # rounded on its own: no FMA contraction
            v = fn.op(code, t, x, y)
            self.asm.decorate(v, NO_CONTRACTION)
            return v

        add, sub, mul = 129, 131, 133

        def split(x: int) -> tuple[int, int]:  # x = hi + lo, 12 significant bits each
            c = op(mul, self.const(4097.0, dtype), x)
            hi = op(sub, c, op(sub, c, x))
            return hi, op(sub, x, hi)

        # q and a scaled alike by a power of two (exact) where q's split would overflow
        # (|q| past 2^116) or its low half fall below the normal range: the residual scales too
        magnitude = fn.ext(t, G_FABS, q)
        big = fn.op(_FLOAT_COMPARE["gt"], bool_, magnitude, self.const(2.0 ** 100, dtype))
        small = fn.op(_FLOAT_COMPARE["lt"], bool_, magnitude, self.const(2.0 ** -80, dtype))

        def by(k: int) -> int:  # 2^-k where q is big, 2^k where small, else 1
            return fn.op(S.OpSelect, t, big, self.const(2.0 ** -k, dtype),
                         fn.op(S.OpSelect, t, small, self.const(2.0 ** k, dtype),
                               self.const(1.0, dtype)))

        scale = by(40)
        qs, a_s = op(mul, q, scale), op(mul, a, scale)
        (qh, ql), (bh, bl) = split(qs), split(b)
        p = op(mul, qs, b)
        e = op(add, op(add, op(add, op(sub, op(mul, qh, bh), p), op(mul, qh, bl)),
                       op(mul, ql, bh)), op(mul, ql, bl))  # qs * b - p, exactly
        r = op(sub, op(sub, a_s, p), e)
        total = op(add, q, op(mul, op(136, r, b), by(-40)))  # OpFDiv
        odd = fn.op(OpLogicalOr, bool_, fn.op(OpIsNan, bool_, r), fn.op(OpIsInf, bool_, r))
        odd = fn.op(OpLogicalOr, bool_, odd, fn.op(OpFOrdEqual, bool_, q, self.const(0.0, dtype)))
        return fn.op(S.OpSelect, t, odd, q, total)

    def _int_type(self, dtype: str) -> int:
        bits = self.sh.compute_bits(dtype)
        if bits == 16:  # on the bits, not through f32: NVIDIA's f16 -> f32 drops a NaN's sign
            self.asm.require("Int16")  # every target with f16 arithmetic has 16-bit integers
        return self.asm.t_int(bits)

    def _signed_zeros(self, m: int, a: int, b: int, op: str, dtype: str) -> int:
        """FMax / FMin ``m`` with -0 below +0, as arith.maximumf / minimumf order them: SPIR-V
        leaves which of two equal zeros they return undefined (lavapipe's max(+0, -0) was -0).
        Equal operands have the same bits but for the zeros, so the max of equal ones is their
        bits' and, the min their bits' or."""
        fn, t, it = self.fn, self.t(dtype), self._int_type(dtype)
        joined = fn.op(OpBitwiseAnd if op == "max" else OpBitwiseOr, it,
                       fn.op(OpBitcast, it, a), fn.op(OpBitcast, it, b))
        equal = fn.op(OpFOrdEqual, self.sh.bool, a, b)
        return fn.op(S.OpSelect, t, equal, fn.op(OpBitcast, t, joined), m)

    def _fmod(self, r: int, a: int, b: int, dtype: str) -> int:
        """OpFRem ``r`` (``a - b * trunc(a / b)``) as C's fmod, which arith.remf is: a finite
        ``a`` over an infinite ``b`` is ``a`` (OpFRem's quotient makes it NaN), and a zero result
        keeps ``a``'s sign. For f64 (and a target without 64-bit integers) only: f32 and
        narrower take ``exact_fmod``; here a quotient past 2^53 stays inexact, and so does a
        divisor past 2^1022, where Vulkan bounds no division's error (NVIDIA's driver answered
        fmod(3e38, 3e38) with 3e38 in f32)."""
        fn, bool_ = self.fn, self.sh.bool
        finite = fn.op(OpLogicalNot, bool_, fn.op(OpLogicalOr, bool_, fn.op(OpIsNan, bool_, a),
                                                  fn.op(OpIsInf, bool_, a)))
        over_infinity = fn.op(167, bool_, finite, fn.op(OpIsInf, bool_, b))  # OpLogicalAnd
        return self._copysign(fn.op(S.OpSelect, self.t(dtype), over_infinity, a, r), a, dtype)

    def _copysign(self, a: int, b: int, dtype: str) -> int:
        fn = self.fn
        bits = self.sh.compute_bits(dtype)
        it, t = self._int_type(dtype), self.t(dtype)
        sign = 1 << (bits - 1)
        ia, ib = fn.op(OpBitcast, it, a), fn.op(OpBitcast, it, b)
        magnitude = fn.op(OpBitwiseAnd, it, ia, self.asm.const_int(bits, sign - 1))
        negative = fn.op(OpBitwiseAnd, it, ib, self.asm.const_int(bits, sign))
        return fn.op(OpBitcast, t, fn.op(OpBitwiseOr, it, magnitude, negative))

    def _compare(self, predicate: str, a: int, b: int, dtype: str) -> int:
        fn, bool_ = self.fn, self.sh.bool
        if dtype == "i1":
            if predicate in ("eq", "ne"):
                return fn.op(OpLogicalEqual if predicate == "eq" else OpLogicalNotEqual, bool_, a, b)
            raise self._unsupported(f"predicate '{predicate}' on i1")
        if K.is_float(dtype):
            if predicate in ("ord", "uno"):
                nan = fn.op(OpLogicalOr, bool_, fn.op(OpIsNan, bool_, a), fn.op(OpIsNan, bool_, b))
                return nan if predicate == "uno" else fn.op(OpLogicalNot, bool_, nan)
            return fn.op(_FLOAT_COMPARE[predicate], bool_, a, b)
        table = _UNSIGNED_COMPARE if K.is_unsigned(dtype) else _SIGNED_COMPARE
        base = predicate[1:] if predicate.startswith("u") and predicate[1:] in table else predicate
        if base not in table:
            raise self._unsupported(f"predicate '{predicate}' on {dtype}")
        return fn.op(table[base], bool_, a, b)

    def _cast(self, op: str, x: int, src: str, dst: str) -> int:
        fn, t = self.fn, self.t(dst)
        if src == "i1":  # i1 -> number: true is 1 (unsigned ops) or -1 (signed ops)
            one = -1 if op in ("sitofp", "extsi") else 1
            return fn.op(S.OpSelect, t, x, self.const(one, dst), self.const(0, dst))
        if dst == "i1":  # trunci / fpto*i to i1: the low bit, or non-zero
            if K.is_float(src):
                return fn.op(182, self.sh.bool, x, self.const(0.0, src))
            low = fn.op(OpBitwiseAnd, self.t(src), x, self.const(1, src))
            return fn.op(OpINotEqual, self.sh.bool, low, self.const(0, src))
        same_width = self.sh.compute_bits(src) == self.sh.compute_bits(dst)
        if op == "bitcast" and "bf16" in (src, dst):  # with the i16 compute type
            if src == "bf16":
                return self._cast("trunci", self.sh.to_bf16_bits(x), "ui32", dst)
            return self.sh.from_bf16_bits(self._cast("extui", x, src, "ui32"))
        if op == "bitcast" and "f16" in (src, dst) and self.sh.compute_bits("f16") == 32:
            # f16 computes in f32 here: its bits through GLSL's PackHalf2x16 (58) and
            # UnpackHalf2x16 (62), the low half of a u32 (16-bit floats only in storage)
            u32, f32 = self.sh.u32, self.asm.t_float(32)
            if src == "f16":
                pair = fn.op(S.OpCompositeConstruct, self.asm.t_vector(f32, 2), x, self.const(0.0, "f32"))
                return self._cast("trunci", fn.ext(u32, 58, pair), "ui32", dst)
            pair = fn.ext(self.asm.t_vector(f32, 2), 62, self._cast("extui", x, src, "ui32"))
            return fn.op(S.OpCompositeExtract, f32, pair, 0)
        if op == "bitcast":
            return fn.op(OpBitcast, t, x)
        if op in ("fpext", "fptrunc"):
            if op == "fptrunc" and dst == "f16" and src == "f32":
                # rounded here, not only by OpFConvert: f16 may compute in f32 (no float16 on
                # the target), and NVIDIA's driver folded an f32 -> f16 -> f32 pair to nothing
                x = self.sh.round_f16(x)
            return x if same_width else fn.op(OpFConvert, t, x)
        if op in ("extsi", "extui", "trunci"):
            if same_width:
                return x
            if op == "extsi":  # (zext(x) ^ m) - m, m the source's sign bit: not OpSConvert,
                # whose 64-bit results Mesa's lavapipe compared wrongly (x <= 1 false for x = 1)
                m = self.const(1 << (self.sh.compute_bits(src) - 1), dst)
                flipped = fn.op(_INT_BINARY["xor"], t, fn.op(S.OpUConvert, t, x), m)
                return fn.op(_INT_BINARY["sub"], t, flipped, m)
            return fn.op(S.OpUConvert, t, x)
        if op in ("fptosi", "fptoui") and self.sh.compute_bits(dst) < 32:
            # DESIGN.md, "Narrow conversions": SPIR-V leaves a value outside the narrow type
            # undefined, and NVIDIA's driver saturates it (ONNX's DynamicQuantizeLinear)
            return fn.op(S.OpUConvert, t, fn.op(OpConvertFToS, self.t("i32"), x))
        number = {"fptosi": OpConvertFToS, "fptoui": OpConvertFToU, "sitofp": OpConvertSToF,
                  "uitofp": OpConvertUToF}.get(op)
        if number is None:
            raise self._unsupported(f"cast '{op}'")
        return fn.op(number, t, x)
