"""Complex numbers inside a function: ``stablehlo.complex`` / ``real`` / ``imag``, ``sine``,
``cosine`` and ``exponential`` of a complex value, and ``stablehlo.fft`` (FFT, IFFT, RFFT, IRFFT
over the innermost dimension).

pyree's tensors are real, so a complex tensor is kept as a pair of real tensors of the same
shape (``ComplexPair``: real and imaginary parts) while the function is lowered; each rule above
reads and makes pairs. A complex value anywhere else -- an argument, a result, a constant, an op
not listed -- is refused by name.

The FFT is the DFT as two reductions over the input line (one Generic per output part):
``X[k] = sum_j x[j] (cos t - i sin t)``, ``t = 2 pi ((j k) mod n) / n`` (the sign flips for the
inverses, which also divide by ``n``; IRFFT rebuilds the missing half from the Hermitian symmetry,
weighting the bins it mirrors twice). The sum runs in float64 and rounds once: f32 parts then
agree with numpy's f64 FFT to half an ulp plus the input's own rounding. O(n^2) per line: right
for the short transforms models make, not for long signals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pyree.compiler.errors import CompileError
from pyree.compiler.input.body import convert
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.stablehlo.common import ints, prop
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import (
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
from pyree.compiler.tensor_program import Generic, Value
from xdsl.ir import Operation


@dataclass(eq=False)
class ComplexPair:
    re: Value
    im: Value

    def __str__(self) -> str:
        return "a complex value (pyree keeps complex numbers inside stablehlo.complex, real, " \
               "imag, sine, cosine, exponential and fft)"


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
    exp(a+bi) = e^a cos b + i e^a sin b."""
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
        "exponential": (lambda a, b, t: mul(u("exp", a, t), u("cos", b, t), t),
                        lambda a, b, t: mul(u("exp", a, t), u("sin", b, t), t)),
    }
    if name not in forms:
        raise CompileError(f"'{op.name}' of a complex value is not supported", where)
    re, im = forms[name]
    fn.env[op.results[0]] = ComplexPair(part(re), part(im))


def lower_fft(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    kind = _word(prop(op, "fft_type"), where)  # #stablehlo<fft_type RFFT>, or RFFT
    lengths = ints(op, "fft_length")
    if len(lengths) != 1:
        raise CompileError(f"stablehlo.fft over {len(lengths)} dimensions (pyree transforms "
                           "the innermost one only)", where)
    n = lengths[0]
    if kind == "RFFT":
        x = fn.tensor(op.operands[0], where)
        parts = (x, None)
    else:
        z = pair(fn, op)
        parts = (z.re, z.im)
    out_shape = tensor_type_of(op.results[0].type, where)[1] if kind == "IRFFT" else None
    if kind == "IRFFT":
        fn.env[op.results[0]] = _dft(fn, parts, n, out_shape, "re", kind, where)
        return
    shape = parts[0].shape[:-1] + ((n // 2 + 1) if kind == "RFFT" else n,)
    re = _dft(fn, parts, n, shape, "re", kind, where)
    im = _dft(fn, parts, n, shape, "im", kind, where)
    fn.env[op.results[0]] = ComplexPair(re, im)


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
    jk = Binary("rem", Binary("mul", j, k, "i64"), Const(n, "i64"), "i64")
    angle = Binary("mul", convert(jk, "f64"), Const(2 * math.pi / n, "f64"), "f64")
    cos, sin = Unary("cos", angle, "f64"), Unary("sin", angle, "f64")
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


def _mul(x: Expr, y: Expr) -> Expr:
    return Binary("mul", x, y, "f64")


def _sub(x: Expr, y: Expr) -> Expr:
    return Binary("sub", x, y, "f64")
