"""Complex numbers inside a function: ``stablehlo.complex`` / ``real`` / ``imag``, ``convert``
to and from them, ``add``, ``subtract``, ``negate``, ``multiply``, ``divide``, ``abs``, ``sine``,
``cosine`` and ``exponential`` of complex values, the ops that only move or pick elements
(broadcasts, reshape, transpose, slices, pad, concatenate, reverse, select: each part through
the real rule), and ``stablehlo.fft`` (FFT, IFFT, RFFT, IRFFT over the innermost dimensions:
one dimension at a time).

pyree's tensors are real, so a complex tensor is kept as a pair of real tensors of the same
shape (``ComplexPair``: real and imaginary parts) while the function is lowered; each rule above
reads and makes pairs. A complex value anywhere else -- an argument, a result, a constant, an op
not listed -- is refused by name.

The FFT is the DFT as two reductions over the input line (one Generic per output part):
``X[k] = sum_j x[j] (cos t - i sin t)``, ``t = 2 pi ((j k) mod n) / n``, cos and sin read from
tables of the n angles made at compile time (the sign flips for the
inverses, which also divide by ``n``; IRFFT rebuilds the missing half from the Hermitian symmetry,
weighting the bins it mirrors twice). The sum runs in float64 and rounds once: f32 parts then
agree with numpy's f64 FFT to half an ulp plus the input's own rounding. O(n^2) per line: right
for the short transforms models make, not for long signals.
"""

from __future__ import annotations

import math

import numpy as np
from pyree.compiler.errors import CompileError
from pyree.compiler.input.body import convert
from pyree.compiler.input.complex_body import exp_parts, product
from pyree.compiler.input.complex_pairs import ComplexPair, part_wise, real_type  # noqa: F401
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.stablehlo.common import ints, prop
from pyree.compiler.input.tensor_ops import permuted
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import (
    DTYPES,
    Acc,
    AffineExpr,
    Binary,
    Compare,
    Const,
    Expr,
    LoopIndex,
    Result,
    Select,
    Unary,
)
from pyree.compiler.tensor_program import Constant, Generic, Value
from xdsl.dialects.builtin import ComplexType
from xdsl.ir import Operation


def pair(fn: FunctionLowering, op: Operation, index: int = 0) -> ComplexPair:
    entry = fn.entry(op.operands[index], location_of(op))
    if not isinstance(entry, ComplexPair):
        raise CompileError(f"'{op.name}' of a complex value that does not come from "
                           "stablehlo.complex or fft (complex arguments and constants are not "
                           "supported)", location_of(op))
    return entry


def is_complex(fn: FunctionLowering, op: Operation) -> bool:
    return bool(op.operands) and isinstance(fn.env.get(op.operands[0]), ComplexPair)


def or_complex(rule):
    """``rule`` for real operands, ``lower_complex_unary`` for a complex one."""
    def lower(fn: FunctionLowering, op: Operation) -> None:
        (lower_complex_unary if is_complex(fn, op) else rule)(fn, op)
    return lower


# Ops whose complex result is the real rule applied to each part apart: they move, pick or
# add elements (a pad's value and a select's predicate too: the predicate is real, and stays).
PART_WISE = ("broadcast_in_dim", "broadcast", "reshape", "transpose", "slice", "concatenate",
             "pad", "reverse", "dynamic_slice", "dynamic_update_slice", "select", "add",
             "subtract", "negate", "optimization_barrier")


def lower_convert(rule):
    """``convert``: to complex, the value with a zero imaginary part; from complex to real, the
    real part (as XLA); between complex types, each part."""
    def lower(fn: FunctionLowering, op: Operation) -> None:
        where = location_of(op)
        source = fn.env.get(op.operands[0])
        to_complex = isinstance(getattr(op.results[0].type, "element_type", None), ComplexType)
        if not to_complex and not isinstance(source, ComplexPair):
            return rule(fn, op)
        dtype, shape = tensor_type_of(real_type(op.results[0].type, where), where)
        parts = (source.re, source.im) if isinstance(source, ComplexPair) else \
            (fn.tensor(op.operands[0], where), None)
        made = []
        for part in parts[:2 if to_complex else 1]:
            inputs = Inputs()
            ix = AffineExpr.identity(len(shape))
            value = convert(inputs.load(part, ix), dtype) if part is not None else Const(0.0, dtype)
            out = fn.new_value(dtype, shape, "complex_part")
            fn.emit(Generic(inputs.values, [out], (Result(0, ix, value),), shape, len(shape),
                            where, op.name))
            made.append(out)
        fn.env[op.results[0]] = ComplexPair(*made) if to_complex else made[0]
    return lower


def lower_complex_binary(rule):
    """multiply, divide and abs of complex values (abs scaled by the larger part, as XLA's, so
    that it does not overflow); real operands go to ``rule``."""
    def lower(fn: FunctionLowering, op: Operation) -> None:
        if not is_complex(fn, op):
            return rule(fn, op)
        where = location_of(op)
        name = op.name.removeprefix("stablehlo.")
        zs = [pair(fn, op, i) for i in range(len(op.operands))]
        shape, dtype = zs[0].re.shape, zs[0].re.dtype
        rank = len(shape)

        def part(build) -> Value:
            inputs = Inputs()
            ix = AffineExpr.identity(rank)
            loaded = [(inputs.load(z.re, ix), inputs.load(z.im, ix)) for z in zs]
            out = fn.new_value(dtype, shape, name)
            fn.emit(Generic(inputs.values, [out], (Result(0, ix, build(*loaded)),), shape, rank,
                            where, op.name))
            return out

        def b(kind, x, y):
            return Binary(kind, x, y, dtype)

        if name == "abs":
            def magnitude(z):
                a, c = Unary("abs", z[0], dtype), Unary("abs", z[1], dtype)
                big, small = b("max", a, c), b("min", a, c)
                positive = Compare("gt", big, Const(0.0, dtype))
                ratio = Select(positive, b("div", small, big), Const(0.0, dtype), dtype)
                value = b("mul", big, Unary("sqrt", b("add", Const(1.0, dtype), b("mul", ratio, ratio)),
                                            dtype))
                infinite = Compare("eq", big, Const(math.inf, dtype))
                return Select(infinite, big, value, dtype)
            fn.env[op.results[0]] = part(magnitude)
            return
        if name == "multiply":
            re = part(lambda x, y: product(x, y, dtype)[0])
            im = part(lambda x, y: product(x, y, dtype)[1])
        elif name == "divide":
            re = part(lambda x, y: _divide(x, y, dtype)[0])
            im = part(lambda x, y: _divide(x, y, dtype)[1])
        else:
            raise CompileError(f"'{op.name}' of a complex value is not supported", where)
        fn.env[op.results[0]] = ComplexPair(re, im)
    return lower


def _divide(x: tuple[Expr, Expr], y: tuple[Expr, Expr], dtype: str) -> tuple[Expr, Expr]:
    """``x / y`` as XLA divides: Smith's algorithm (the ratio of the divisor's smaller part to
    its larger, so that ``|y|^2`` never overflows or underflows: 1e20i / (1 + 1e20i) had come
    out NaN), and where that gives NaN in both parts, C's answers for a zero divisor, an
    infinite dividend over a finite divisor and a finite one over an infinite divisor."""
    (ar, ai), (br, bi) = x, y

    def b(kind, p, q):
        return Binary(kind, p, q, dtype)

    def c(v: float) -> Const:
        return Const(v, dtype)

    def isinf(v):
        return Compare("eq", Unary("abs", v, dtype), c(math.inf))

    def finite(v):
        return Binary("and", Compare("ord", v, v), Unary("not", isinf(v), "i1"), "i1")

    def either(p, q):
        return Binary("or", p, q, "i1")

    def both(p, q):
        return Binary("and", p, q, "i1")

    def pick(cond, p, q):
        return Select(cond, p, q, dtype)

    wide_im = Compare("lt", Unary("abs", br, dtype), Unary("abs", bi, dtype))
    ratio = pick(wide_im, b("div", br, bi), b("div", bi, br))
    denominator = pick(wide_im, b("add", bi, b("mul", br, ratio)),
                       b("add", br, b("mul", bi, ratio)))
    re = pick(wide_im, b("div", b("add", b("mul", ar, ratio), ai), denominator),
              b("div", b("add", ar, b("mul", ai, ratio)), denominator))
    im = pick(wide_im, b("div", b("sub", b("mul", ai, ratio), ar), denominator),
              b("div", b("sub", ai, b("mul", ar, ratio)), denominator))

    zero_divisor = both(both(Compare("eq", br, c(0.0)), Compare("eq", bi, c(0.0))),
                        either(Compare("ord", ar, ar), Compare("ord", ai, ai)))
    signed_inf = b("copysign", c(math.inf), br)
    infinite_x = both(either(isinf(ar), isinf(ai)), both(finite(br), finite(bi)))
    infinite_y = both(either(isinf(br), isinf(bi)), both(finite(ar), finite(ai)))

    def unit(v):  # +-1 where v is infinite, else +-0, signed as v
        return b("copysign", pick(isinf(v), c(1.0), c(0.0)), v)

    xr, xi, yr, yi = unit(ar), unit(ai), unit(br), unit(bi)
    corners = (
        (zero_divisor, b("mul", signed_inf, ar), b("mul", signed_inf, ai)),
        (infinite_x, b("mul", c(math.inf), b("add", b("mul", xr, br), b("mul", xi, bi))),
         b("mul", c(math.inf), b("sub", b("mul", xi, br), b("mul", xr, bi)))),
        (infinite_y, b("mul", c(0.0), b("add", b("mul", ar, yr), b("mul", ai, yi))),
         b("mul", c(0.0), b("sub", b("mul", ai, yr), b("mul", ar, yi)))))
    nan = both(Compare("uno", re, re), Compare("uno", im, im))
    out_re, out_im = re, im
    for cond, corner_re, corner_im in reversed(corners):
        out_re, out_im = pick(cond, corner_re, out_re), pick(cond, corner_im, out_im)
    return pick(nan, out_re, re), pick(nan, out_im, im)


def lower_constant(rule):
    """A complex constant (xDSL reads its elements as (re, im) pairs) as two real constants."""
    def lower(fn: FunctionLowering, op: Operation) -> None:
        element = getattr(op.results[0].type, "element_type", None)
        if not isinstance(element, ComplexType):
            return rule(fn, op)
        where = location_of(op)
        dtype, shape = tensor_type_of(real_type(op.results[0].type, where), where)
        values = np.array(op.properties["value"].get_values(), dtype=np.float64).reshape(-1, 2)
        values = np.broadcast_to(values, (int(np.prod(shape, dtype=np.int64)), 2))
        parts = []
        for k in range(2):
            out = fn.new_value(dtype, shape, "complex_constant")
            data = np.ascontiguousarray(values[:, k].reshape(shape)).astype(DTYPES[dtype])
            fn.emit(Constant(out, data=data, location=where))
            parts.append(out)
        fn.env[op.results[0]] = ComplexPair(*parts)
    return lower


def lower_complex(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    re, im = (fn.tensor(v, where) for v in op.operands)
    fn.env[op.results[0]] = ComplexPair(re, im)


def lower_part(fn: FunctionLowering, op: Operation) -> None:
    """real / imag."""
    z = pair(fn, op)
    fn.env[op.results[0]] = z.re if op.name.endswith("real") else z.im


def lower_complex_unary(fn: FunctionLowering, op: Operation) -> None:
    """sin(a+bi) = sin a cosh b + i cos a sinh b; cos(a+bi) = cos a cosh b - i sin a sinh b;
    exp(a+bi) = e^(a/2) cos b e^(a/2) + i e^(a/2) sin b e^(a/2) (i b where b = 0)."""
    z, where = pair(fn, op), location_of(op)
    name = op.name.removeprefix("stablehlo.")

    def part(build) -> Value:
        inputs = Inputs()
        rank = len(z.re.shape)
        ix = AffineExpr.identity(rank)
        a, b = inputs.load(z.re, ix), inputs.load(z.im, ix)
        out = fn.new_value(z.re.dtype, z.re.shape, name)
        fn.emit(Generic(inputs.values, [out], (Result(0, ix, build(a, b, z.re.dtype)),),
                        z.re.shape, rank, where, op.name))
        return out

    def u(kind, x, t):
        return Unary(kind, x, t)

    def mul(x, y, t):
        return Binary("mul", x, y, t)

    forms = {
        "sine": (lambda a, b, t: mul(u("sin", a, t), u("cosh", b, t), t),
                 lambda a, b, t: mul(u("cos", a, t), u("sinh", b, t), t)),
        "cosine": (lambda a, b, t: mul(u("cos", a, t), u("cosh", b, t), t),
                   lambda a, b, t: u("neg", mul(u("sin", a, t), u("sinh", b, t), t), t)),
        # e^(a/2) twice, as XLA: e^a may overflow where e^a cos b does not; b = 0 keeps b
        "exponential": (lambda a, b, t: exp_parts(a, b, t)[0],
                        lambda a, b, t: exp_parts(a, b, t)[1]),
    }
    if name not in forms:
        raise CompileError(f"'{op.name}' of a complex value is not supported", where)
    re, im = forms[name]
    fn.env[op.results[0]] = ComplexPair(part(re), part(im))


def lower_fft(fn: FunctionLowering, op: Operation) -> None:
    """Over the innermost ``len(fft_length)`` dims, one dimension at a time (the DFT is
    separable): RFFT's real transform innermost first, IRFFT's last."""
    where = location_of(op)
    kind = _word(prop(op, "fft_type"), where)  # #stablehlo<fft_type RFFT>, or RFFT
    lengths = ints(op, "fft_length")
    if kind == "RFFT":
        x = fn.tensor(op.operands[0], where)
        rank = len(x.shape)
        z = _fft_last(fn, (x, None), lengths[-1], "RFFT", where)
        for k, d in enumerate(range(rank - 2, rank - 1 - len(lengths), -1)):
            z = _along(fn, z, d, lengths[-2 - k], "FFT", where)
        fn.env[op.results[0]] = z
        return
    z = pair(fn, op)
    rank = len(z.re.shape)
    if kind == "IRFFT":
        for k, d in enumerate(range(rank - len(lengths), rank - 1)):
            z = _along(fn, z, d, lengths[k], "IFFT", where)
        out_shape = tensor_type_of(op.results[0].type, where)[1]
        fn.env[op.results[0]] = _dft(fn, (z.re, z.im), lengths[-1], out_shape, "re", kind, where)
        return
    for k, d in enumerate(range(rank - 1, rank - 1 - len(lengths), -1)):
        z = _along(fn, z, d, lengths[-1 - k], kind, where)
    fn.env[op.results[0]] = z


def _fft_last(fn: FunctionLowering, parts: tuple[Value, Value | None], n: int, kind: str,
              where: str) -> ComplexPair:
    """The FFT, IFFT or RFFT of ``parts`` over their innermost dimension."""
    shape = parts[0].shape[:-1] + ((n // 2 + 1) if kind == "RFFT" else n,)
    return ComplexPair(_dft(fn, parts, n, shape, "re", kind, where),
                       _dft(fn, parts, n, shape, "im", kind, where))


def _along(fn: FunctionLowering, z: ComplexPair, d: int, n: int, kind: str,
           where: str) -> ComplexPair:
    """``z`` transformed along dim ``d``: moved innermost, transformed, moved back."""
    rank = len(z.re.shape)
    if d == rank - 1:
        return _fft_last(fn, (z.re, z.im), n, kind, where)
    order = [k for k in range(rank) if k != d] + [d]
    back = [order.index(k) for k in range(rank)]
    moved = _fft_last(fn, (_moved(fn, z.re, order, where), _moved(fn, z.im, order, where)),
                      n, kind, where)
    return ComplexPair(_moved(fn, moved.re, back, where), _moved(fn, moved.im, back, where))


def _moved(fn: FunctionLowering, value: Value, order: list[int], where: str) -> Value:
    return permuted(fn, value, order, where, "stablehlo.fft", "fft_axis")


def _word(attr, where: str) -> str:
    text = str(getattr(attr, "data", attr))
    for kind in ("IRFFT", "RFFT", "IFFT", "FFT"):
        if kind in text:
            return kind
    raise CompileError(f"stablehlo.fft of unknown type {text}", where)


def _dft(fn: FunctionLowering, parts: tuple[Value, Value | None], n: int,
         shape: tuple[int, ...], which: str, kind: str, where: str) -> Value:
    """One part (``which``: re or im) of the transform of ``parts`` into ``shape``."""
    re, im = parts
    rank = len(shape)
    inputs = Inputs()
    loops = AffineExpr.identity(rank + 1)  # the output element's loops, then j
    j, k = convert(LoopIndex(rank), "i64"), convert(LoopIndex(rank - 1), "i64")
    line = loops[:rank - 1] + (loops[rank],)
    jk = convert(Binary("rem", Binary("mul", j, k, "i64"), Const(n, "i64"), "i64"), "index")
    cos, sin = (inputs.gather(table, (jk,), where) for table in _twiddles(fn, n, where))
    a = convert(inputs.load(re, line), "f64")
    b = convert(inputs.load(im, line), "f64") if im is not None else Const(0.0, "f64")
    if kind == "IRFFT":  # x[k] = Re sum over all n bins; the m given stand for their mirrors
        doubled = Binary("and", Compare("gt", j, Const(0, "i64")),
                         Compare("lt", Binary("mul", j, Const(2, "i64"), "i64"), Const(n, "i64")),
                         "i1")
        weight = Select(doubled, Const(2.0, "f64"), Const(1.0, "f64"), "f64")
        term = _mul(weight, _sub(_mul(a, cos), _mul(b, sin)))
    else:  # (a + ib)(cos t + i s sin t), s = -1 forward, +1 inverse
        s = Const(1.0 if kind == "IFFT" else -1.0, "f64")
        term = (_sub(_mul(a, cos), _mul(s, _mul(b, sin))) if which == "re"
                else Binary("add", _mul(s, _mul(a, sin)), _mul(b, cos), "f64"))
    total = fn.new_value("f64", shape, f"dft_{which}")
    step = Binary("add", Acc(0, "f64"), term, "f64")
    fn.emit(Generic(inputs.values, [total], (Result(0, loops[:rank], step, init=Const(0.0, "f64")),),
                    shape + (re.shape[-1],), rank, where, "stablehlo.fft"))
    inputs = Inputs()
    value: Expr = inputs.load(total, AffineExpr.identity(rank))
    if kind in ("IFFT", "IRFFT"):
        value = Binary("div", value, Const(float(n), "f64"), "f64")
    out = fn.new_value(re.dtype, shape, f"fft_{which}")
    fn.emit(Generic(inputs.values, [out], (Result(0, AffineExpr.identity(rank),
                                                  convert(value, re.dtype)),),
                    shape, rank, where, "stablehlo.fft"))
    return out


def _twiddles(fn: FunctionLowering, n: int, where: str) -> tuple[Value, Value]:
    """cos and sin of 2 pi m / n for m < n, float64 constants made here: the transform reads
    them instead of computing a cosine per term (cuda has no float64 cosine: no libdevice)."""
    angles = 2 * math.pi * np.arange(n, dtype=np.float64) / n
    tables = []
    for name, values in (("cos", np.cos(angles)), ("sin", np.sin(angles))):
        table = fn.new_value("f64", (n,), f"dft_{name}")
        fn.emit(Constant(table, data=values, location=where))
        tables.append(table)
    return tables[0], tables[1]


def _mul(x: Expr, y: Expr) -> Expr:
    return Binary("mul", x, y, "f64")


def _sub(x: Expr, y: Expr) -> Expr:
    return Binary("sub", x, y, "f64")
