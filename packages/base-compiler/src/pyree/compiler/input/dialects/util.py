"""IREE's ``util`` ops that its e2e tests use to keep the compiler from folding constants.

``util.unfoldable_constant`` lowers like ``arith.constant`` (and is declared like it: the result
type is the value's type); ``util.optimization_barrier`` is the identity. pyree folds no
constants into the ops under test either way.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    FloatAttr,
    IntegerAttr,
)
from xdsl.ir import Dialect
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    ParamAttrConstraint,
    VarConstraint,
    irdl_op_definition,
    prop_def,
    result_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer


@irdl_op_definition
class UnfoldableConstantOp(IRDLOperation):
    name = "util.unfoldable_constant"

    _T: ClassVar = VarConstraint("T", AnyAttr())
    result = result_def(_T)
    value = prop_def(
        ParamAttrConstraint(IntegerAttr, (AnyAttr(), _T))
        | ParamAttrConstraint(FloatAttr, (AnyAttr(), _T))
        | ParamAttrConstraint(DenseIntOrFPElementsAttr, (_T, AnyAttr()))
        | ParamAttrConstraint(DenseResourceAttr, (AnyAttr(), _T))
    )

    assembly_format = "attr-dict $value"


@irdl_op_definition
class OptimizationBarrierOp(IRDLOperation):
    """``%a, %b = util.optimization_barrier %x, %y : T, U``: results are the operands."""

    name = "util.optimization_barrier"

    values = var_operand_def(AnyAttr())
    barriers = var_result_def(AnyAttr())

    @classmethod
    def parse(cls, parser: Parser) -> OptimizationBarrierOp:
        values = parser.parse_comma_separated_list(
            Parser.Delimiter.NONE, parser.parse_unresolved_operand)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_type)
        operands = parser.resolve_operands(values, types, parser.pos)
        return cls.create(operands=operands, result_types=types, attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_ssa_value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_list([v.type for v in self.operands], printer.print_attribute)


Util = Dialect("util", [UnfoldableConstantOp, OptimizationBarrierOp], [])
