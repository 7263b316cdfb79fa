"""Complex tensors while a function is lowered: pyree's tensors are real, so a complex tensor is
a pair of real tensors of the same shape (``ComplexPair``), which StableHLO's complex rules
(input/stablehlo/complex.py) and linalg's complex bodies (input/complex_body.py) read and make.
An op that only moves or picks elements takes a complex operand through its real rule, once
per part (``part_wise``)."""

from __future__ import annotations

from dataclasses import dataclass

from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.parser import location_of
from pyree.compiler.tensor_program import Value
from xdsl.dialects.builtin import ComplexType, TensorType
from xdsl.ir import Operation


@dataclass(eq=False)
class ComplexPair:
    re: Value
    im: Value

    def __str__(self) -> str:
        return "a complex value (pyree keeps complex numbers inside stablehlo.complex, real, " \
               "imag, sine, cosine, exponential and fft, and linalg bodies of complex ops)"


def part_wise(rule):
    """``rule`` for real operands; for complex ones, ``rule`` on a copy of the op over the real
    parts, once per part, with the complex operands standing for that part while it runs."""
    def lower(fn: FunctionLowering, op: Operation) -> None:
        complex_operands = [v for v in op.operands if isinstance(fn.env.get(v), ComplexPair)]
        if not complex_operands:
            return rule(fn, op)
        where = location_of(op)
        parts = []
        for which in ("re", "im"):
            copy = type(op).create(operands=list(op.operands),
                                   result_types=[real_type(r.type, where) for r in op.results],
                                   properties=dict(op.properties), attributes=dict(op.attributes))
            pairs = {v: fn.env[v] for v in complex_operands}
            try:
                for v, z in pairs.items():
                    fn.env[v] = getattr(z, which)
                rule(fn, copy)
                parts.append([fn.tensor(r, where) for r in copy.results])
            finally:
                fn.env.update(pairs)
                copy.drop_all_references()
        for result, re, im in zip(op.results, *parts):
            fn.env[result] = ComplexPair(re, im)
    return lower


def real_type(t, where: str):
    """A complex tensor type's part type (a real one stays)."""
    element = getattr(t, "element_type", None)
    if isinstance(element, ComplexType):
        return TensorType(element.element_type, t.get_shape())
    return t
