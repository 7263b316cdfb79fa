"""The ``complex`` dialect inside linalg bodies (torch-mlir's ``view_as_complex``, complex
products, ``view_as_real``, ``torch.polar``): a complex scalar is a pair of real expressions
(``ComplexExpr``) while the body is lowered, as a complex tensor is a pair of real tensors
(``complex_pairs.ComplexPair``). Ops not listed are refused by name."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pyree.compiler.errors import CompileError
from pyree.compiler.input.complex_pairs import ComplexPair, part_wise, real_type
from pyree.compiler.input.function import Empty
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import DTYPES, Binary, Compare, Const, Expr, Select, Unary
from pyree.compiler.tensor_program import Constant
from xdsl.dialects.builtin import ComplexType
from xdsl.ir import Operation


@dataclass(frozen=True)
class ComplexExpr:
    re: Expr
    im: Expr


def product(x: tuple[Expr, Expr], y: tuple[Expr, Expr], dtype: str) -> tuple[Expr, Expr]:
    """``x * y`` of (re, im) pairs, as XLA and PyTorch multiply (no infinity recovery)."""
    def b(kind, p, q):
        return Binary(kind, p, q, dtype)
    return (b("sub", b("mul", x[0], y[0]), b("mul", x[1], y[1])),
            b("add", b("mul", x[0], y[1]), b("mul", x[1], y[0])))


def exp_parts(a: Expr, b: Expr, dtype: str) -> tuple[Expr, Expr]:
    """``exp(a + bi)`` as XLA: e^(a/2) twice (e^a may overflow where e^a cos b does not), and
    an imaginary part of 0 kept."""
    def part(trig: str) -> Expr:
        half = Unary("exp", Binary("mul", a, Const(0.5, dtype), dtype), dtype)
        return Binary("mul", Binary("mul", half, Unary(trig, b, dtype), dtype), half, dtype)
    return part("cos"), Select(Compare("eq", b, Const(0.0, dtype)), b, part("sin"), dtype)


def _parts(op: Operation, args: list, where: str) -> list[ComplexExpr]:
    if not all(isinstance(a, ComplexExpr) for a in args):
        raise CompileError(f"'{op.name}' of an operand that is not complex", where)
    return args


def lower_complex_op(op: Operation, args: list, where: str) -> ComplexExpr | Expr:
    """``op``'s value from its operands' (ComplexExpr for complex ones)."""
    name = op.name.removeprefix("complex.")
    if name == "create":
        re, im = args
        return ComplexExpr(re, im)
    if name in ("re", "im"):
        (z,) = _parts(op, args, where)
        return z.re if name == "re" else z.im
    def b(kind: str, x: Expr, y: Expr) -> Expr:
        return Binary(kind, x, y, x.dtype)
    if name in ("add", "sub"):
        x, y = _parts(op, args, where)
        return ComplexExpr(b(name, x.re, y.re), b(name, x.im, y.im))
    if name == "mul":
        x, y = _parts(op, args, where)
        return ComplexExpr(*product((x.re, x.im), (y.re, y.im), x.re.dtype))
    if name in ("neg", "conj"):
        (z,) = _parts(op, args, where)
        dtype = z.re.dtype
        im = Unary("neg", z.im, dtype)
        return ComplexExpr(Unary("neg", z.re, dtype), im) if name == "neg" else ComplexExpr(z.re, im)
    if name == "abs":  # C's hypot (PyTorch's), scaled: no overflow, +inf beside a NaN (XLA's
        # magnitude in stablehlo/complex.py gives NaN there)
        (z,) = _parts(op, args, where)
        t = z.re.dtype
        a, c = Unary("abs", z.re, t), Unary("abs", z.im, t)
        big, small = b("max", a, c), b("min", a, c)
        ratio = b("div", small, big)
        scaled = b("mul", big, Unary("sqrt", b("add", Const(1.0, t), b("mul", ratio, ratio)), t))
        infinite = Binary("or", Compare("eq", a, Const(math.inf, t)),
                          Compare("eq", c, Const(math.inf, t)), "i1")
        return Select(infinite, Const(math.inf, t),
                      Select(Compare("uno", a, c), Const(math.nan, t),
                             Select(Compare("eq", big, Const(0.0, t)), Const(0.0, t), scaled, t),
                             t), t)
    if name == "exp":
        (z,) = _parts(op, args, where)
        return ComplexExpr(*exp_parts(z.re, z.im, z.re.dtype))
    raise CompileError(f"unsupported op '{op.name}' in a region body (pyree computes complex "
                       "create, re, im, add, sub, mul, neg, conj, abs and exp there)", where)


def complex_tensors(rules: dict) -> dict:
    """``rules`` (the linalg/tensor ops' rules) taking complex tensors too: a complex
    ``tensor.empty`` is two empties, a complex ``arith.constant`` two constants, and the ops
    that only move elements (reshapes, slices, casts) the real rule on each part
    (``complex_pairs.part_wise``)."""
    out = dict(rules)
    for name in ("tensor.empty", "linalg.init_tensor"):
        out[name] = _or_complex(rules[name], _empty)
    out["arith.constant"] = _or_complex(rules["arith.constant"], _constant)
    for name in ("tensor.collapse_shape", "tensor.expand_shape", "tensor.reshape",
                 "tensor.extract_slice", "tensor.cast"):
        out[name] = part_wise(rules[name])
    return out


def _or_complex(rule, complex_rule):
    def lower(fn, op: Operation) -> None:
        element = getattr(op.results[0].type, "element_type", None)
        (complex_rule if isinstance(element, ComplexType) else rule)(fn, op)
    return lower


def _empty(fn, op: Operation) -> None:
    where = location_of(op)
    if op.operands:
        raise CompileError("tensor.empty of a complex type with run-time sizes", where)
    dtype, shape = tensor_type_of(real_type(op.results[0].type, where), where)
    fn.env[op.results[0]] = ComplexPair(Empty(dtype, shape), Empty(dtype, shape))


def _constant(fn, op: Operation) -> None:
    """The (re, im) pairs the constant stores, as two real constants."""
    where = location_of(op)
    dtype, shape = tensor_type_of(real_type(op.results[0].type, where), where)
    values = np.frombuffer(op.value.data.data, DTYPES[dtype]).reshape(-1, 2)
    values = np.broadcast_to(values, (int(np.prod(shape, dtype=np.int64)), 2))
    parts = []
    for k in range(2):
        part = fn.new_value(dtype, shape, "complex_constant")
        fn.emit(Constant(part, data=np.ascontiguousarray(values[:, k]).reshape(shape),
                         location=where))
        parts.append(part)
    fn.env[op.results[0]] = ComplexPair(*parts)
