"""math ops MLIR has and xDSL 0.74 does not declare."""

from __future__ import annotations

from typing import ClassVar

from pyree.compiler.input.dialects.arith import bool_like
from xdsl.dialects.arith import FastMathFlagsAttr
from xdsl.dialects.math import FloatingPointLikeUnaryMathOperation, floatingPointLike
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer

_FASTMATH = "(`fastmath` `` $fastmath^)?"


@irdl_op_definition
class ErfcOp(FloatingPointLikeUnaryMathOperation):
    name = "math.erfc"


class _Classification(IRDLOperation):
    """isnan, isinf, isfinite, isnormal: ``%r = math.isnan %x : f32`` yields i1 (or a tensor
    of i1), so the result type is not written and a declarative format cannot infer it."""

    operand = operand_def(floatingPointLike)
    result = result_def(AnyAttr())
    fastmath = prop_def(FastMathFlagsAttr, default_value=FastMathFlagsAttr("none"))

    @classmethod
    def parse(cls, parser: Parser):
        operand = parser.parse_unresolved_operand()
        props = {}
        if parser.parse_optional_keyword("fastmath") is not None:
            props["fastmath"] = FastMathFlagsAttr(FastMathFlagsAttr.parse_parameter(parser))
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        return cls.create(operands=[parser.resolve_operand(operand, t)],
                          result_types=[bool_like(t)], properties=props, attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.operand)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.operand.type)


@irdl_op_definition
class IsNaNOp(_Classification):
    name = "math.isnan"


@irdl_op_definition
class IsInfOp(_Classification):
    name = "math.isinf"


@irdl_op_definition
class IsFiniteOp(_Classification):
    name = "math.isfinite"


@irdl_op_definition
class IsNormalOp(_Classification):
    name = "math.isnormal"


@irdl_op_definition
class ClampFOp(IRDLOperation):
    name = "math.clampf"

    T: ClassVar = VarConstraint("T", floatingPointLike)
    value = operand_def(T)
    min = operand_def(T)
    max = operand_def(T)
    result = result_def(T)
    fastmath = prop_def(FastMathFlagsAttr, default_value=FastMathFlagsAttr("none"))

    assembly_format = (f"$value `to` ` ` `[` $min `,` $max `]` {_FASTMATH} attr-dict "
                       "`:` type($result)")


@irdl_op_definition
class SinCosOp(IRDLOperation):
    name = "math.sincos"

    T: ClassVar = VarConstraint("T", floatingPointLike)
    operand = operand_def(T)
    sin = result_def(T)
    cos = result_def(T)
    fastmath = prop_def(FastMathFlagsAttr, default_value=FastMathFlagsAttr("none"))

    assembly_format = f"$operand {_FASTMATH} attr-dict `:` type($operand)"


MATH_OPS = (ErfcOp, IsNaNOp, IsInfOp, IsFiniteOp, IsNormalOp, ClampFOp, SinCosOp)
