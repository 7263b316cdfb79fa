"""StableHLO/CHLO elementwise ops -> kernel IR scalar expressions, on tensors and in regions.

``scalar_expr`` is the one table: the tensor rule loads each operand (rank-0 operands of
``select``/``clamp`` and CHLO's implicit broadcasts included) and applies it per element; region
bodies (reduce, scatter, sort comparators) apply it to their block arguments. Semantics follow
the StableHLO spec where C's would differ: over-wide shifts give 0 (or the sign), ``convert``
to i1 is ``!= 0``, ``compare`` honours its compare type (TOTALORDER on the bits).
"""

from __future__ import annotations

import re

from pyree.compiler.errors import CompileError
from pyree.compiler.input.constants import dense_array, dense_contents, python_scalar
from pyree.compiler.input.dialects.stablehlo import HloAttr
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.scalar import leading_zeros
from pyree.compiler.input.stablehlo import special
from pyree.compiler.input.stablehlo.common import convert, emit_map, ints, prop, width
from pyree.compiler.input.stablehlo.dynamic import result_shape
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import (
    AffineExpr,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Select,
    Unary,
    is_float,
    is_unsigned,
)
from pyree.compiler.tensor_program import Constant, View
from xdsl.dialects.builtin import FloatAttr, StringAttr
from xdsl.ir import Block, Operation, SSAValue

_BINARY = {"add": "add", "subtract": "sub", "multiply": "mul", "divide": "div",
           "remainder": "rem", "maximum": "max", "minimum": "min", "atan2": "atan2",
           "and": "and", "or": "or", "xor": "xor"}
_UNARY = {"abs": "abs", "negate": "neg", "exponential": "exp", "exponential_minus_one": "expm1",
          "log": "log", "log_plus_one": "log1p", "sqrt": "sqrt", "rsqrt": "rsqrt",
          "cbrt": "cbrt", "tanh": "tanh", "sine": "sin", "cosine": "cos", "tan": "tan",
          "floor": "floor", "ceil": "ceil", "round_nearest_afz": "round",
          "round_nearest_even": "roundeven", "sign": "sign", "not": "not", "erf": "erf",
          "erfc": "erfc", "acos": "acos", "asin": "asin", "atan": "atan", "sinh": "sinh",
          "cosh": "cosh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh"}
# On booleans the spec's add/multiply/maximum/minimum are or/and.
_BOOLEAN = {"add": "or", "multiply": "and", "maximum": "or", "minimum": "and"}
_DIRECTIONS = {"EQ": "eq", "NE": "ne", "LT": "lt", "LE": "le", "GT": "gt", "GE": "ge"}


def short_name(name: str) -> str:
    """``stablehlo.add``, ``chlo.broadcast_add`` -> ``add``."""
    return name.split(".", 1)[1].removeprefix("broadcast_")


def is_elementwise(name: str) -> bool:
    return short_name(name) in _BINARY or short_name(name) in _UNARY or short_name(name) in _SPECIAL


def scalar_expr(op: Operation, args: list[Expr], dtype: str, where: str) -> Expr:
    """What ``op`` computes per element from its operands' expressions; ``dtype``: result's."""
    name = short_name(op.name)
    if dtype == "i1" and name in _BOOLEAN:
        return Binary(_BOOLEAN[name], args[0], args[1], dtype)
    if name in ("divide", "remainder") and not is_float(dtype):
        return _integer_division(name, args[0], args[1], dtype)
    if name in _BINARY:
        return Binary(_BINARY[name], args[0], args[1], dtype)
    if name in _UNARY:
        if not is_float(dtype) and name not in ("abs", "negate", "not", "sign"):
            raise CompileError(f"'{op.name}' on {dtype} (floats only)", where)
        return Unary(_UNARY[name], args[0], dtype)
    if name in _SPECIAL:
        return _SPECIAL[name](op, args, dtype, where)
    raise CompileError(f"unsupported op '{op.name}'", where)


def _unsigned(dtype: str) -> str:
    return dtype if is_unsigned(dtype) else "u" + dtype


def _as(x: Expr, dtype: str) -> Expr:
    return x if x.dtype == dtype else Cast("bitcast", x, dtype)


def _integer_division(name: str, a: Expr, b: Expr, dtype: str) -> Expr:
    """The spec's (XLA's) integer division: x / 0 = -1 (all ones), x % 0 = x, and
    MIN / -1 = MIN, MIN % -1 = 0. The divisor is made safe first: nothing ever traps."""
    zero = Compare("eq", b, Const(0, dtype))
    special = zero
    if not is_unsigned(dtype):
        special = Binary("or", zero, Binary(
            "and", Compare("eq", a, Const(-(2 ** (width(dtype) - 1)), dtype)),
            Compare("eq", b, Const(-1, dtype)), "i1"), "i1")
    safe = Select(special, Const(1, dtype), b, dtype)
    if name == "divide":
        on_zero = _as(Const(2 ** width(dtype) - 1, _unsigned(dtype)), dtype)
        value = Binary("div", a, safe, dtype)  # MIN / 1 = MIN
        return Select(zero, on_zero, value, dtype)
    value = Binary("rem", a, safe, dtype)  # x % 1 = 0
    return Select(zero, a, value, dtype)


def _shift(kind: str):
    """Shifts by >= the bit width give 0, or (arithmetic right) the sign bits."""
    def lower(op, args, dtype, where):
        x, n = args
        nbits = width(dtype)
        u = _unsigned(dtype)
        fits = Compare("lt", _as(n, u), Const(nbits, u))
        if kind == "arithmetic":
            signed = dtype.removeprefix("u")
            n = Select(fits, _as(n, signed), Const(nbits - 1, signed), signed)
            return _as(Binary("shr", _as(x, signed), n, signed), dtype)
        shifted = Binary("shl" if kind == "left" else "shr", _as(x, u), _as(n, u), u)
        return _as(Select(fits, shifted, Const(0, u), u), dtype)
    return lower


def _compare(op, args, dtype, where):
    a, b = args
    direction = _word(prop(op, "comparison_direction"))
    kind = _word(prop(op, "compare_type")) if prop(op, "compare_type") is not None else (
        "FLOAT" if is_float(a.dtype) else "UNSIGNED" if is_unsigned(a.dtype) or a.dtype == "i1"
        else "SIGNED")
    predicate = _DIRECTIONS[direction]
    if kind == "FLOAT":
        return Compare("une" if predicate == "ne" else predicate, a, b)
    if kind == "TOTALORDER":
        a, b = total_order_key(a), total_order_key(b)
    elif kind == "UNSIGNED" and a.dtype != "i1":
        a, b = _as(a, _unsigned(a.dtype)), _as(b, _unsigned(b.dtype))
    elif kind == "SIGNED":
        a, b = _as(a, a.dtype.removeprefix("u")), _as(b, b.dtype.removeprefix("u"))
    return Compare(predicate, a, b)


def _word(attr: HloAttr) -> str:
    """``#stablehlo<comparison_direction LT>`` -> ``LT``."""
    return attr.data.split()[-1]


def total_order_key(x: Expr) -> Expr:
    """A float's bits as a signed integer that orders like StableHLO's total order
    (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN): negatives get their magnitude flipped."""
    nbits = width(x.dtype)
    i = f"i{nbits}"
    ix = Cast("bitcast", x, i)
    sign = Binary("shr", ix, Const(nbits - 1, i), i)
    return Binary("xor", ix, Binary("and", sign, Const(2 ** (nbits - 1) - 1, i), i), i)


def _popcnt(op, args, dtype, where):
    """SWAR bit counting on the unsigned bits."""
    nbits, u = width(dtype), _unsigned(dtype)
    x = _as(args[0], u)

    def rep(byte: int) -> Const:
        return Const(int.from_bytes(bytes([byte]) * (nbits // 8), "little"), u)

    def shr(v, n):
        return Binary("shr", v, Const(n, u), u)

    x = Binary("sub", x, Binary("and", shr(x, 1), rep(0x55), u), u)
    x = Binary("add", Binary("and", x, rep(0x33), u), Binary("and", shr(x, 2), rep(0x33), u), u)
    x = Binary("and", Binary("add", x, shr(x, 4), u), rep(0x0F), u)
    if nbits > 8:
        x = shr(Binary("mul", x, rep(0x01), u), nbits - 8)
    return _as(x, dtype)


def count_leading_zeros(op, args, dtype, where):
    return leading_zeros(args[0], dtype)


def _float_only(build):
    def lower(op, args, dtype, where):
        if not is_float(args[0].dtype):
            raise CompileError(f"'{op.name}' on {args[0].dtype} (floats only)", where)
        return build(args, dtype)
    return lower


def _power(op, args, dtype, where):
    if not is_float(dtype):
        raise CompileError(f"'{op.name}' on integers is not supported", where)
    return Binary("pow", args[0], args[1], dtype)


def _bitcast_convert(op, args, dtype, where):
    if width(args[0].dtype) != width(dtype) or "i1" in (dtype, args[0].dtype):
        raise CompileError(f"'{op.name}' from {args[0].dtype} to {dtype} (equal widths only)",
                           where)
    return _as(args[0], dtype)


def _erf_inv(op, args, dtype, where):
    if dtype not in ("f32", "f16", "bf16"):
        raise CompileError(f"'{op.name}' on {dtype} is not supported (f32, f16, bf16)", where)
    return special.erf_inv(args[0])


def _next_after(op, args, dtype, where):
    """The next float after x toward y, on the bits (CHLO's definition, subnormals included)."""
    x, y = args
    if not is_float(dtype):
        raise CompileError(f"'{op.name}' on {dtype} (floats only)", where)
    i = f"i{width(dtype)}"
    sign = Const(-(2 ** (width(dtype) - 1)), i)
    zero = Const(0.0, dtype)
    toward_zero = Binary("xor", Compare("lt", x, y), Compare("gt", x, zero), "i1")
    step = Binary("add", _as(x, i), Select(toward_zero, Const(-1, i), Const(1, i), i), i)
    from_zero = Binary("or", Binary("and", _as(y, i), sign, i), Const(1, i), i)
    value = _as(Select(Compare("eq", x, zero), from_zero, step, i), dtype)
    value = Select(Compare("eq", x, y), y, value, dtype)
    return Select(Compare("uno", x, y), Const(float("nan"), dtype), value, dtype)


_FORMATS = {"f16": (5, 10), "bf16": (8, 7), "f32": (8, 23), "f64": (11, 52)}


def _reduce_precision(op, args, dtype, where):
    """Rounded (to nearest even) to ``mantissa_bits``, then past the narrower exponent range
    to ±inf or ±0, on the bits, as XLA computes it (no subnormals in the narrow format); a NaN
    stays the NaN it was."""
    if dtype not in _FORMATS:
        raise CompileError(f"'{op.name}' on {dtype} (floats only)", where)
    fmt = prop(op, "format")
    if fmt is not None:
        match = re.fullmatch(r"e(\d+)m(\d+)", fmt.data) if isinstance(fmt, StringAttr) else None
        if match is None:
            raise CompileError(f"'{op.name}': format '{fmt}' is not eXmY", where)
        exponent_bits, mantissa_bits = int(match[1]), int(match[2])
    else:
        exponent_bits, mantissa_bits = ints(op, "exponent_bits")[0], ints(op, "mantissa_bits")[0]
    own_exponent, own_mantissa = _FORMATS[dtype]
    if exponent_bits < 1 or mantissa_bits < 0:
        raise CompileError(f"'{op.name}' to e{exponent_bits}m{mantissa_bits}", where)
    x = args[0]
    n = width(dtype)
    u = f"ui{n}"

    def c(v: int) -> Const:
        return Const(v, u)

    bits = _as(x, u)
    if mantissa_bits < own_mantissa:
        drop = own_mantissa - mantissa_bits
        last = Binary("and", Binary("shr", bits, c(drop), u), c(1), u)
        bias = Binary("add", last, c((1 << (drop - 1)) - 1), u)
        bits = Binary("and", Binary("add", bits, bias, u), c(~((1 << drop) - 1) % (1 << n)), u)
    if exponent_bits < own_exponent:
        sign, exponent = c(1 << (n - 1)), c(((1 << own_exponent) - 1) << own_mantissa)
        own_bias, narrow_bias = (1 << (own_exponent - 1)) - 1, (1 << (exponent_bits - 1)) - 1
        e = Binary("and", bits, exponent, u)
        signed_zero = Binary("and", bits, sign, u)
        signed_inf = Binary("or", signed_zero, exponent, u)
        over = Compare("gt", e, c((own_bias + narrow_bias) << own_mantissa))
        under = Compare("le", e, c((own_bias - narrow_bias) << own_mantissa))
        bits = Select(over, signed_inf, Select(under, signed_zero, bits, u), u)
    return Select(Compare("uno", x, x), x, _as(bits, dtype), dtype)


def _inf(x: Expr) -> Const:
    return Const(float("inf"), x.dtype)


_SPECIAL = {
    "shift_left": _shift("left"), "shift_right_logical": _shift("logical"),
    "shift_right_arithmetic": _shift("arithmetic"),
    "compare": _compare, "popcnt": _popcnt, "count_leading_zeros": count_leading_zeros, "power": _power,
    "bitcast_convert": _bitcast_convert, "erf_inv": _erf_inv,
    "next_after": _next_after, "reduce_precision": _reduce_precision,
    "square": lambda op, a, dt, w: Binary("mul", a[0], a[0], dt),
    "lgamma": _float_only(lambda a, dt: special.lgamma(a[0])),
    "digamma": _float_only(lambda a, dt: special.digamma(a[0])),
    "bessel_i1e": _float_only(lambda a, dt: special.bessel_i1e(a[0])),
    "zeta": _float_only(lambda a, dt: special.zeta(a[0], a[1])),
    "polygamma": _float_only(lambda a, dt: special.polygamma(a[0], a[1])),
    "convert": lambda op, a, dt, w: convert(a[0], dt),
    "select": lambda op, a, dt, w: Select(a[0], a[1], a[2], dt),
    "clamp": lambda op, a, dt, w: Binary("min", Binary("max", a[1], a[0], dt), a[2], dt),
    "logistic": _float_only(lambda a, dt: Binary("div", Const(1.0, dt), Binary(
        "add", Const(1.0, dt), Unary("exp", Unary("neg", a[0], dt), dt), dt), dt)),
    "is_finite": _float_only(lambda a, dt: Compare("lt", Unary("abs", a[0], a[0].dtype),
                                                   _inf(a[0]))),
    "is_inf": _float_only(lambda a, dt: Compare("eq", Unary("abs", a[0], a[0].dtype),
                                                _inf(a[0]))),
    "is_pos_inf": _float_only(lambda a, dt: Compare("eq", a[0], _inf(a[0]))),
    "is_neg_inf": _float_only(lambda a, dt: Compare("eq", a[0], Unary("neg", _inf(a[0]),
                                                                      a[0].dtype))),
}


# ---- rules --------------------------------------------------------------------------------

def lower_bitcast_convert(fn: FunctionLowering, op: Operation) -> None:
    """Equal widths: per element. Different widths (the spec's trailing dim of width ratio,
    little-endian: JAX's 2x2xui32 <-> 2xui64 keys): the same bytes, so a View."""
    where = location_of(op)
    dtype, shape = tensor_type_of(op.results[0].type, where)
    source = op.operands[0]
    src_dtype, src_shape = tensor_type_of(source.type, where)
    if width(src_dtype) == width(dtype) or "i1" in (dtype, src_dtype):
        lower_elementwise(fn, op)
        return
    value = fn.tensor(source, where)
    result = fn.new_value(dtype, shape, op.results[0].name_hint)
    if result.num_bytes != value.num_bytes:
        raise CompileError(f"'{op.name}' from {src_shape} x {src_dtype} to {shape} x {dtype}: "
                           "the sizes differ", where)
    fn.env[op.results[0]] = result
    fn.emit(View(result, value, location=where))


def lower_elementwise(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    dtype, shape = result_shape(fn, op, op.results[0], where)
    bdims = ints(op, "broadcast_dimensions", []) if op.name.startswith("chlo.") else []

    def build(inputs: Inputs) -> Expr:
        args = [broadcast_load(fn, inputs, v, shape, bdims, where) for v in op.operands]
        return scalar_expr(op, args, dtype, where)

    if shape == ():  # scalars: folded when constant (index arithmetic), else a rank-0 Generic
        inputs = Inputs()
        fn.define_scalar(op.results[0], build(inputs), inputs, where, op.name)
    else:
        emit_map(fn, op, build)


def broadcast_load(fn: FunctionLowering, inputs: Inputs, ssa: SSAValue, shape: tuple[int, ...],
                   bdims: list[int], where: str) -> Expr:
    """``ssa`` read at each element of ``shape``: equal shapes, rank 0 (a scalar), or a
    broadcast (``bdims`` or right-aligned, size-1 dims stretched)."""
    entry = fn.entry(ssa, where)
    if isinstance(entry, Const):
        return entry
    splat = fn.splat_of(ssa)
    if splat is not None:
        return splat
    value = fn.tensor(ssa, where)
    rank, r = len(shape), len(value.shape)
    # CHLO's broadcast_dimensions place the lower-rank operand; the other is right-aligned.
    to = bdims if len(bdims) == r < rank else list(range(rank - r, rank))
    index = []
    for i, n in enumerate(value.shape):
        if n == shape[to[i]]:
            index.append(AffineExpr(tuple(int(k == to[i]) for k in range(rank))))
        elif n == 1:
            index.append(AffineExpr((0,) * rank))
        else:
            raise CompileError(f"cannot broadcast {value.shape} to {shape}", where)
    return inputs.load(value, tuple(index))


def lower_constant(fn: FunctionLowering, op: Operation) -> None:
    """Rank-0 constants stay symbolic (they fold into their users); others are Constants."""
    where = location_of(op)
    result = op.results[0]
    dtype, shape = tensor_type_of(result.type, where)
    data, splat = dense_contents(op.properties["value"], dtype, shape, where)
    if shape == ():
        fn.env[result] = Const(python_scalar(data[()], dtype), dtype)
        return
    fn.emit(Constant(fn.result_value(result, where), data=data, splat=splat, location=where))


def lower_region(fn: FunctionLowering, block: Block, args: list[Expr], inputs: Inputs,
                 where: str) -> list[Expr]:
    """The scalar expressions a region (of rank-0 tensors) returns, given its arguments'; a
    ``func.call`` in it (JAX's ``jnp.where`` in a reduction's body) is inlined likewise."""
    env: dict[SSAValue, Expr] = dict(zip(block.args, args))

    def operand(v: SSAValue, at: str) -> Expr:
        return env[v] if v in env else fn.scalar(v, inputs, at)

    for inner in block.ops:
        at = location_of(inner) or where
        if inner.name in ("stablehlo.return", "func.return"):
            return [operand(v, at) for v in inner.operands]
        if inner.name == "func.call":
            env.update(zip(inner.results, _inline_call(fn, inner, [operand(v, at) for v in
                                                                   inner.operands], inputs, at)))
            continue
        if inner.results and tensor_type_of(inner.results[0].type, at)[1] != ():
            raise CompileError(f"'{inner.name}' on tensors in a region body", at)
        dtype = tensor_type_of(inner.results[0].type, at)[0] if inner.results else ""
        if inner.name == "stablehlo.constant":
            data = dense_array(inner.properties["value"], dtype, (), at)
            env[inner.results[0]] = Const(python_scalar(data[()], dtype), dtype)
        elif inner.name in ("stablehlo.broadcast_in_dim", "stablehlo.reshape"):
            env[inner.results[0]] = operand(inner.operands[0], at)
        elif is_elementwise(inner.name):
            env[inner.results[0]] = scalar_expr(
                inner, [operand(v, at) for v in inner.operands], dtype, at)
        else:
            raise CompileError(f"unsupported op '{inner.name}' in a region body", at)
    raise CompileError("region body has no stablehlo.return", where)


def _inline_call(fn: FunctionLowering, call: Operation, args: list[Expr], inputs: Inputs,
                 where: str) -> list[Expr]:
    with fn.callee(call.properties["callee"].root_reference.data, where, "call of") as callee:
        return lower_region(fn, callee.body.block, args, inputs, where)


def lower_map(fn: FunctionLowering, op: Operation) -> None:
    """The region applied to each element of the operands (``dimensions`` is all of them)."""
    where = location_of(op)
    shape = tensor_type_of(op.results[0].type, where)[1]

    def build(inputs: Inputs) -> Expr:
        args = [broadcast_load(fn, inputs, v, shape, [], where) for v in op.operands]
        return lower_region(fn, op.regions[0].block, args, inputs, where)[0]

    emit_map(fn, op, build)


def lower_batch_norm_inference(fn: FunctionLowering, op: Operation) -> None:
    """``scale * (x - mean) / sqrt(variance + epsilon) + offset`` along ``feature_index``."""
    where = location_of(op)
    dtype, shape = tensor_type_of(op.results[0].type, where)
    feature = ints(op, "feature_index")[0]
    attr = prop(op, "epsilon")
    if not isinstance(attr, FloatAttr):
        raise CompileError(f"'{op.name}' needs a float 'epsilon'", where)
    epsilon = Const(float(attr.value.data), dtype)

    def build(inputs: Inputs) -> Expr:
        x = broadcast_load(fn, inputs, op.operands[0], shape, [], where)
        scale, offset, mean, var = (broadcast_load(fn, inputs, v, shape, [feature], where)
                                    for v in op.operands[1:])
        centered = Binary("mul", scale, Binary("sub", x, mean, dtype), dtype)
        spread = Unary("sqrt", Binary("add", var, epsilon, dtype), dtype)
        return Binary("add", Binary("div", centered, spread, dtype), offset, dtype)

    emit_map(fn, op, build)
