"""arith/math ops -> kernel IR scalar expressions (``pyree.compiler.kernel``).

One table per op shape (binary, unary, compare, cast). The same lowering serves linalg bodies,
elementwise ops on tensors and ops on scalars: the caller supplies the operand expressions.
Unsigned integer ops on MLIR's signless integers compute on a bitcast to the ``ui`` dtype.
"""

from __future__ import annotations

import math as pymath

from pyree.compiler.errors import CompileError
from pyree.compiler.input.types import dtype_of
from pyree.compiler.kernel import (
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Select,
    Unary,
    is_float,
    is_unsigned,
    itemsize,
)
from xdsl.dialects import arith
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation

_BINARY = {
    "arith.addf": "add", "arith.addi": "add", "arith.subf": "sub", "arith.subi": "sub",
    "arith.mulf": "mul", "arith.muli": "mul", "arith.divf": "div", "arith.divsi": "div",
    "arith.remf": "rem", "arith.remsi": "rem", "arith.maximumf": "max", "arith.minimumf": "min",
    "arith.maxsi": "max", "arith.minsi": "min", "arith.andi": "and", "arith.ori": "or",
    "arith.xori": "xor", "arith.shli": "shl", "arith.shrsi": "shr",
    "math.atan2": "atan2", "math.copysign": "copysign",
}
_UNSIGNED_BINARY = {
    "arith.divui": "div", "arith.remui": "rem", "arith.maxui": "max", "arith.minui": "min",
    "arith.shrui": "shr",
}
_UNARY = {
    "arith.negf": "neg", "math.absf": "abs", "math.absi": "abs", "math.exp": "exp",
    "math.exp2": "exp2", "math.expm1": "expm1", "math.log": "log", "math.log2": "log2",
    "math.log1p": "log1p", "math.sqrt": "sqrt", "math.rsqrt": "rsqrt", "math.tanh": "tanh",
    "math.sin": "sin", "math.cos": "cos", "math.tan": "tan", "math.atan": "atan",
    "math.erf": "erf", "math.floor": "floor", "math.ceil": "ceil", "math.round": "round",
    "math.roundeven": "roundeven", "math.trunc": "trunc", "math.asin": "asin", "math.acos": "acos",
    "math.sinh": "sinh", "math.cosh": "cosh", "math.asinh": "asinh", "math.acosh": "acosh",
    "math.atanh": "atanh", "math.cbrt": "cbrt", "math.erfc": "erfc",
}
_CAST = {
    "arith.extf": "fpext", "arith.truncf": "fptrunc", "arith.sitofp": "sitofp",
    "arith.fptosi": "fptosi", "arith.extsi": "extsi", "arith.trunci": "trunci",
    "arith.bitcast": "bitcast",
}
# Casts that read (or write) their integer side as unsigned: done on a bitcast ``ui`` dtype.
_UNSIGNED_CAST = {"arith.uitofp": "uitofp", "arith.extui": "extui", "arith.fptoui": "fptoui"}
# arith's predicate enums, in order, as kernel IR predicates (None: constant false/true).
_CMPF = [None, "eq", "gt", "ge", "lt", "le", "ne", "ord", "ueq", "ugt", "uge", "ult", "ule",
         "une", "uno", None]
_CMPI = ["eq", "ne", "lt", "le", "gt", "ge", "ult", "ule", "ugt", "uge"]


def element_dtype(op: Operation, where: str) -> str:
    """The dtype of ``op``'s (first) result's elements."""
    t = op.results[0].type
    return dtype_of(t.get_element_type() if isinstance(t, TensorType) else t, where)


def is_scalar_op(name: str) -> bool:
    return any(name in table for table in (
        _BINARY, _UNSIGNED_BINARY, _UNARY, _CAST, _UNSIGNED_CAST, _SPECIAL, _MULTI))


def lower_scalar_op(op: Operation, args: list[Expr], where: str) -> list[Expr]:
    """The expressions of ``op``'s results, from operand expressions ``args`` (one per
    operand); most ops have one result, ``arith.mulsi_extended`` or ``math.sincos`` two."""
    if op.name in _MULTI:
        return _MULTI[op.name](op, args, where)
    return [_lower_one(op, args, where)]


def _lower_one(op: Operation, args: list[Expr], where: str) -> Expr:
    name = op.name
    dtype = element_dtype(op, where)
    if name in _BINARY:
        return Binary(_BINARY[name], args[0], args[1], dtype)
    if name in _UNSIGNED_BINARY:
        udt = _unsigned(dtype)
        result = Binary(_UNSIGNED_BINARY[name], _bitcast(args[0], udt), _bitcast(args[1], udt), udt)
        return _bitcast(result, dtype)
    if name in _UNARY:
        return Unary(_UNARY[name], args[0], dtype)
    if name in _CAST:
        if (args[0].dtype, dtype) == ("f16", "bf16"):  # neither is wider: exactly through f32
            return Cast("fptrunc", Cast("fpext", args[0], "f32"), dtype)
        return Cast(_CAST[name], args[0], dtype)
    if name in _UNSIGNED_CAST:
        if name == "arith.fptoui":
            return _bitcast(Cast("fptoui", args[0], _unsigned(dtype)), dtype)
        return Cast(_UNSIGNED_CAST[name], _bitcast(args[0], _unsigned(args[0].dtype)), dtype)
    if name in _SPECIAL:
        return _SPECIAL[name](op, args, dtype)
    raise CompileError(f"unsupported op '{name}'", where)


def _unsigned(dtype: str) -> str:
    if dtype == "i1":  # already 0 or 1
        return dtype
    return "ui64" if dtype == "index" else "u" + dtype


def _bitcast(x: Expr, dtype: str) -> Expr:
    return x if x.dtype == dtype else Cast("bitcast", x, dtype)


def _cmpf(op: arith.CmpfOp, args: list[Expr], dtype: str) -> Expr:
    predicate = _CMPF[op.predicate.value.data]
    if predicate is None:
        return Const(op.predicate.value.data != 0, "i1")
    return Compare(predicate, args[0], args[1])


def _cmpi(op: arith.CmpiOp, args: list[Expr], dtype: str) -> Expr:
    predicate = _CMPI[op.predicate.value.data]
    if predicate.startswith("u"):
        udt = _unsigned(args[0].dtype)
        return Compare(predicate[1:], _bitcast(args[0], udt), _bitcast(args[1], udt))
    return Compare(predicate, args[0], args[1])


def _nan_skipping(kernel_op: str):
    """maxnumf/minnumf: like max/min, but a NaN operand yields the other operand."""
    def lower(op: Operation, args: list[Expr], dtype: str) -> Expr:
        a, b = args
        both = Binary(kernel_op, a, b, dtype)
        return Select(Compare("uno", a, a), b, Select(Compare("uno", b, b), a, both, dtype), dtype)
    return lower


def _index_cast(op: Operation, args: list[Expr], dtype: str) -> Expr:
    """index_cast sign-extends a narrower integer, index_castui zero-extends it."""
    x = args[0]
    src_bits, dst_bits = bits(x.dtype), bits(dtype)
    if src_bits == dst_bits:
        return Cast("bitcast", x, dtype)
    if dst_bits < src_bits:
        return Cast("trunci", x, dtype)
    if op.name == "arith.index_castui":
        return Cast("extui", _bitcast(x, _unsigned(x.dtype)), dtype)
    return Cast("extsi", x, dtype)


def bits(dtype: str) -> int:
    """The width of a dtype's values (``index`` is 64-bit here, ``i1`` one bit)."""
    return 64 if dtype == "index" else 1 if dtype == "i1" else int(dtype.lstrip("uif"))


def _select(op: Operation, args: list[Expr], dtype: str) -> Expr:
    return Select(args[0], args[1], args[2], dtype)


def _fma(op: Operation, args: list[Expr], dtype: str) -> Expr:
    return Binary("add", Binary("mul", args[0], args[1], dtype), args[2], dtype)


def _log10(op: Operation, args: list[Expr], dtype: str) -> Expr:
    """log(x) / ln 10, in f32 for f16 and bf16 so that the result is rounded to them once."""
    wide = "f32" if dtype in ("f16", "bf16") else dtype
    x = args[0] if wide == dtype else Cast("fpext", args[0], wide)
    y = Binary("mul", Unary("log", x, wide), Const(1 / pymath.log(10), wide), wide)
    return y if wide == dtype else Cast("fptrunc", y, dtype)


MAX_UNROLLED_POWER = 16  # |n| up to which x ** n of a constant integer n is multiplications


def _pow(op: Operation, args: list[Expr], dtype: str) -> Expr:
    """powf and fpowi. A constant integer exponent (torch's GELU(tanh) has x ** 3) is squarings
    and products, as MLIR expands fpowi, instead of exp(n log|x|) with its sign and special
    cases: the GPU targets computed that in f64 per element (gpt2's GELU(tanh) f16 kernel ran
    at half PyTorch's speed). x * x * x is what pow(x, 3) is for every x, NaN, ±inf and -0
    included; f16 and bf16 multiply in f32 and round once, as their pow does."""
    x, n = args
    if isinstance(n, Const) and float(n.value).is_integer() and abs(n.value) <= MAX_UNROLLED_POWER:
        wide = "f32" if dtype in ("f16", "bf16") else dtype
        base = x if wide == dtype else Cast("fpext", x, wide)
        result = _power(base, abs(int(n.value)), wide)
        if result is None:  # x ** 0 is 1, NaN's too
            result = Const(1.0, wide)
        elif n.value < 0:
            result = Binary("div", Const(1.0, wide), result, wide)
        return result if wide == dtype else Cast("fptrunc", result, dtype)
    if not is_float(n.dtype):  # fpowi
        n = Cast("sitofp", n, dtype)
    return Binary("pow", x, n, dtype)


def _power(base: Expr, k: int, dtype: str) -> Expr | None:
    """``base ** k`` for a constant ``k >= 0`` by squaring and multiplying (None for k = 0)."""
    result = None
    while k:
        if k & 1:
            result = base if result is None else Binary("mul", result, base, dtype)
        k >>= 1
        if k:
            base = Binary("mul", base, base, dtype)
    return result


def leading_zeros(x: Expr, dtype: str) -> Expr:
    """The leading zero bits of integer ``x`` (math.ctlz; stablehlo.count_leading_zeros):
    a binary search for the highest set bit, on the bits as unsigned."""
    nbits = itemsize(dtype) * 8
    u = dtype if is_unsigned(dtype) else "u" + dtype
    as_ = lambda e, t: e if e.dtype == t else Cast("bitcast", e, t)
    x, n = as_(x, u), Const(0, u)
    s = nbits // 2
    while s:
        zero = Compare("eq", Binary("shr", x, Const(nbits - s, u), u), Const(0, u))
        n = Select(zero, Binary("add", n, Const(s, u), u), n, u)
        x = Select(zero, Binary("shl", x, Const(s, u), u), x, u)
        s //= 2
    n = Select(Compare("eq", x, Const(0, u)), Binary("add", n, Const(1, u), u), n, u)
    return as_(n, dtype)


def _rounded_division(op: Operation, args: list[Expr], dtype: str) -> Expr:
    """floordivsi and ceildivsi: the truncating quotient, one less (floor) or one more (ceil)
    where the division is inexact and the exact quotient is negative (floor) or positive
    (ceil); an inexact remainder has the dividend's sign."""
    a, b = args
    quotient, remainder, zero_ = (Binary("div", a, b, dtype), Binary("rem", a, b, dtype),
                                  Const(0, dtype))
    negative = Compare("ne", Compare("lt", remainder, zero_), Compare("lt", b, zero_))
    floor = op.name == "arith.floordivsi"
    adjust = Select(Compare("eq", remainder, zero_), Const(False, "i1"),
                    negative if floor else Compare("eq", negative, Const(False, "i1")), "i1")
    step = Binary("sub" if floor else "add", quotient, Const(1, dtype), dtype)
    return Select(adjust, step, quotient, dtype)


def _ceildivui(op: Operation, args: list[Expr], dtype: str) -> Expr:
    """The unsigned quotient rounded up: one more where the unsigned remainder is not zero."""
    udt = _unsigned(dtype)
    a, b = (_bitcast(x, udt) for x in args)
    quotient = Binary("div", a, b, udt)
    exact = Compare("eq", Binary("rem", a, b, udt), Const(0, udt))
    return _bitcast(Select(exact, quotient, Binary("add", quotient, Const(1, udt), udt), udt), dtype)


def _ctlz(op, args, dtype):
    return leading_zeros(args[0], dtype)


def _ctpop(op: Operation, args: list[Expr], dtype: str) -> Expr:
    return popcount(args[0], dtype)


def popcount(x: Expr, dtype: str) -> Expr:
    """The set bits of an integer: the SWAR sums of bit pairs, nibbles and bytes, then the
    bytes added by one multiplication (on the bits as unsigned, wrapping)."""
    if dtype == "i1":
        return x
    u = _unsigned(dtype)
    nbits = bits(dtype)
    x = _bitcast(x, u)
    mask = lambda byte: Const(int.from_bytes(bytes([byte]) * (nbits // 8), "little"), u)
    shr = lambda e, k: Binary("shr", e, Const(k, u), u)
    x = Binary("sub", x, Binary("and", shr(x, 1), mask(0x55), u), u)
    x = Binary("add", Binary("and", x, mask(0x33), u), Binary("and", shr(x, 2), mask(0x33), u), u)
    x = Binary("and", Binary("add", x, shr(x, 4), u), mask(0x0F), u)
    if nbits > 8:
        x = shr(Binary("mul", x, mask(0x01), u), nbits - 8)
    return _bitcast(x, dtype)


def _cttz(op: Operation, args: list[Expr], dtype: str) -> Expr:
    """The trailing zero bits: the set bits below the lowest set one, (x & -x) - 1 (all of
    them for 0, which has the type's width of trailing zeros, as math.cttz defines)."""
    if dtype == "i1":
        return Unary("not", args[0], dtype)
    u = _unsigned(dtype)
    x = _bitcast(args[0], u)
    lowest = Binary("and", x, Binary("sub", Const(0, u), x, u), u)
    return popcount(_bitcast(Binary("sub", lowest, Const(1, u), u), dtype), dtype)


def _ipowi(op: Operation, args: list[Expr], dtype: str) -> Expr:
    """Integer power, as MLIR expands math.ipowi: 1 for a zero exponent; for a negative one
    1 of base 1, +-1 of base -1, 1 / 0 of base 0 (the target's division by zero) and 0 of
    any other base; else square and multiply over the exponent's bits (wrapping)."""
    b, p = args
    one, zero_ = Const(1, dtype), Const(0, dtype)
    if isinstance(p, Const) and 0 <= int(p.value) <= MAX_UNROLLED_POWER:
        result = _power(b, int(p.value), dtype)
        return one if result is None else result
    factors, base = [], b  # b^(2^i) where bit i is set, else 1; the sign bit is not
    for i in range(bits(dtype) - 1):
        bit = Compare("ne", Binary("and", p, Const(1 << i, dtype), dtype), zero_)
        factors.append(Select(bit, base, one, dtype))
        base = Binary("mul", base, base, dtype)
    while len(factors) > 1:  # multiplied pairwise: the depth grows by log2, not by the width
        factors = [Binary("mul", x, y, dtype) for x, y in zip(factors[::2], factors[1::2])] \
            + factors[len(factors) - len(factors) % 2:]
    result = factors[0]
    odd = Compare("ne", Binary("and", p, one, dtype), zero_)
    minus_one = Const(-1, dtype)
    negative = Select(Compare("eq", b, one), one,
                      Select(Compare("eq", b, minus_one), Select(odd, minus_one, one, dtype),
                             Select(Compare("eq", b, zero_), Binary("div", one, b, dtype),
                                    zero_, dtype), dtype), dtype)
    return Select(Compare("lt", p, zero_), negative, result, dtype)


_SMALLEST_NORMAL = {"f16": 2.0 ** -14, "bf16": 2.0 ** -126, "f32": 2.0 ** -126,
                    "f64": 2.0 ** -1022}


def _classify(kind: str):
    """isnan, isinf, isfinite, isnormal as comparisons of x or |x| (ordered: false of NaN)."""
    def lower(op: Operation, args: list[Expr], dtype: str) -> Expr:
        x = args[0]
        if kind == "isnan":
            return Compare("uno", x, x)
        magnitude = Unary("abs", x, x.dtype)
        inf = Const(pymath.inf, x.dtype)
        if kind == "isinf":
            return Compare("eq", magnitude, inf)
        finite = Compare("lt", magnitude, inf)
        if kind == "isfinite":
            return finite
        normal = Compare("ge", magnitude, Const(_SMALLEST_NORMAL[x.dtype], x.dtype))
        return Select(finite, normal, Const(False, "i1"), "i1")
    return lower


def _clampf(op: Operation, args: list[Expr], dtype: str) -> Expr:
    """maximum(minimum(x, max), min), as MLIR lowers math.clampf: NaN in, NaN out."""
    x, low, high = args
    return Binary("max", Binary("min", x, high, dtype), low, dtype)


def _extended_product(op: Operation, args: list[Expr], where: str) -> list[Expr]:
    """mulsi_extended / mului_extended: the low and high halves of the double-width product.
    Up to 32 bits through the double-width type; 64 bits from 32-bit limbs (no i128 here)."""
    dtype = element_dtype(op, where)
    if dtype == "i1":
        raise CompileError(f"'{op.name}' of i1 is not supported", where)
    signed = op.name == "arith.mulsi_extended"
    a, b = args
    low = Binary("mul", a, b, dtype)
    nbits = bits(dtype)
    if nbits <= 32:  # signed: extsi and an arithmetic shift; unsigned: extui, logical
        narrow = dtype if signed else _unsigned(dtype)
        wide = f"i{2 * nbits}" if signed else f"ui{2 * nbits}"
        wa, wb = (Cast("extsi" if signed else "extui", _bitcast(x, narrow), wide) for x in (a, b))
        high = Binary("shr", Binary("mul", wa, wb, wide), Const(nbits, wide), wide)
        return [low, _bitcast(Cast("trunci", high, narrow), dtype)]
    u = "ui64"
    ua, ub = _bitcast(a, u), _bitcast(b, u)
    half = lambda x: (Binary("and", x, Const(0xFFFFFFFF, u), u), Binary("shr", x, Const(32, u), u))
    (a0, a1), (b0, b1) = half(ua), half(ub)
    p00, p01 = Binary("mul", a0, b0, u), Binary("mul", a0, b1, u)
    p10, p11 = Binary("mul", a1, b0, u), Binary("mul", a1, b1, u)
    mid = Binary("add", Binary("add", half(p00)[1], half(p01)[0], u), half(p10)[0], u)
    high = Binary("add", Binary("add", p11, half(p01)[1], u),
                  Binary("add", half(p10)[1], half(mid)[1], u), u)
    if signed:  # the unsigned high half less b where a < 0 and a where b < 0
        zero_ = Const(0, dtype)
        high = Binary("sub", high, _bitcast(Select(Compare("lt", a, zero_), b, zero_, dtype), u), u)
        high = Binary("sub", high, _bitcast(Select(Compare("lt", b, zero_), a, zero_, dtype), u), u)
    return [low, _bitcast(high, dtype)]


def _extended_sum(op: Operation, args: list[Expr], where: str) -> list[Expr]:
    """addui_extended: the wrapped sum and whether it overflowed (it is then below a)."""
    dtype = element_dtype(op, where)
    a, b = args
    total = Binary("add", a, b, dtype)
    if dtype == "i1":
        return [Binary("xor", a, b, dtype), Binary("and", a, b, dtype)]
    u = _unsigned(dtype)
    return [total, Compare("lt", _bitcast(total, u), _bitcast(a, u))]


def _sincos(op: Operation, args: list[Expr], where: str) -> list[Expr]:
    dtype = element_dtype(op, where)
    return [Unary("sin", args[0], dtype), Unary("cos", args[0], dtype)]


_MULTI = {
    "arith.mulsi_extended": _extended_product, "arith.mului_extended": _extended_product,
    "arith.addui_extended": _extended_sum, "math.sincos": _sincos,
}


_SPECIAL = {
    "arith.cmpf": _cmpf, "arith.cmpi": _cmpi, "arith.select": _select,
    "arith.maxnumf": _nan_skipping("max"), "arith.minnumf": _nan_skipping("min"),
    "arith.index_cast": _index_cast, "arith.index_castui": _index_cast,
    "math.fma": _fma, "math.log10": _log10, "math.fpowi": _pow, "math.powf": _pow,
    "math.ctlz": _ctlz, "math.ctpop": _ctpop, "math.cttz": _cttz, "math.ipowi": _ipowi,
    "math.isnan": _classify("isnan"), "math.isinf": _classify("isinf"),
    "math.isfinite": _classify("isfinite"), "math.isnormal": _classify("isnormal"),
    "math.clampf": _clampf, "arith.floordivsi": _rounded_division,
    "arith.ceildivsi": _rounded_division, "arith.ceildivui": _ceildivui,
}



def zero(dtype: str) -> Const:
    return Const(0.0 if is_float(dtype) else False if dtype == "i1" else 0, dtype)
