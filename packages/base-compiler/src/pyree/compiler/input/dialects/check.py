"""IREE's ``check`` dialect: test assertions evaluated by the runtime after a function runs.

Syntax as in IREE (``compiler/src/iree/compiler/Modules/Check/IR/CheckOps.td``), e.g.
``check.expect_almost_eq_const(%r, dense<[1.0]> : tensor<1xf32>, atol 1.0e-2) : tensor<1xf32>``.
The optional ``<%device>`` operand of IREE's forms is not accepted: pyree has one device per call.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    Float32Type,
    FloatAttr,
    TensorType,
)
from xdsl.ir import Attribute, Dialect
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

_ElementsAttr = DenseIntOrFPElementsAttr | DenseResourceAttr


@irdl_op_definition
class ExpectTrueOp(IRDLOperation):
    name = "check.expect_true"
    operand = operand_def(AnyAttr())
    assembly_format = "`(` $operand `)` attr-dict `:` type($operand)"


@irdl_op_definition
class ExpectFalseOp(IRDLOperation):
    name = "check.expect_false"
    operand = operand_def(AnyAttr())
    assembly_format = "`(` $operand `)` attr-dict `:` type($operand)"


@irdl_op_definition
class ExpectAllTrueOp(IRDLOperation):
    name = "check.expect_all_true"
    operand = operand_def(TensorType)
    assembly_format = "`(` $operand `)` attr-dict `:` type($operand)"


@irdl_op_definition
class ExpectEqOp(IRDLOperation):
    name = "check.expect_eq"
    T: ClassVar = VarConstraint("T", base(TensorType))
    lhs = operand_def(T)
    rhs = operand_def(T)
    assembly_format = "`(` $lhs `,` $rhs `)` attr-dict `:` type($lhs)"


@irdl_op_definition
class ExpectEqConstOp(IRDLOperation):
    name = "check.expect_eq_const"
    lhs = operand_def(TensorType)
    value = prop_def(_ElementsAttr)
    assembly_format = "`(` $lhs `,` $value `)` attr-dict `:` type($lhs)"

    def verify_(self) -> None:
        _same_type(self.lhs.type, self.value.get_type())


class _AlmostEqBase(IRDLOperation):
    """Shared syntax: ``(lhs, rhs-or-value [, atol X] [, rtol Y]) attr-dict : type``."""

    CONST: ClassVar[bool]  # the second operand is a constant attribute, not a value
    atol = opt_prop_def(FloatAttr)
    rtol = opt_prop_def(FloatAttr)

    @classmethod
    def parse(cls, parser: Parser):
        parser.parse_punctuation("(")
        lhs = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        second = parser.parse_attribute() if cls.CONST else parser.parse_unresolved_operand()
        props: dict[str, Attribute] = {}
        while parser.parse_optional_punctuation(","):
            bare = parser.parse_optional_number()  # IREE's older spelling: a bare tolerance
            if bare is not None:
                props["atol"] = FloatAttr(float(bare), Float32Type())
                continue
            key = parser.parse_identifier()
            if key not in ("atol", "rtol"):
                parser.raise_error(f"expected 'atol' or 'rtol', got '{key}'")
            props[key] = FloatAttr(float(parser.parse_number()), Float32Type())
        parser.parse_punctuation(")")
        attrs = parser.parse_optional_attr_dict()
        for key in ("atol", "rtol"):
            if key in attrs:
                props[key] = attrs.pop(key)
        parser.parse_punctuation(":")
        lhs_type = parser.parse_type()
        operands = [parser.resolve_operand(lhs, lhs_type)]
        if cls.CONST:
            props["value"] = second
        else:
            operands.append(parser.resolve_operand(second, lhs_type))
        return cls.create(operands=operands, properties=props, attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string("(")
        printer.print_ssa_value(self.operands[0])
        printer.print_string(", ")
        if self.CONST:
            printer.print_attribute(self.properties["value"])
        else:
            printer.print_ssa_value(self.operands[1])
        for key in ("atol", "rtol"):
            value = getattr(self, key)
            if value is not None:
                printer.print_string(f", {key} {value.value.data}")
        printer.print_string(")")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.operands[0].type)


@irdl_op_definition
class ExpectAlmostEqOp(_AlmostEqBase):
    name = "check.expect_almost_eq"
    CONST: ClassVar[bool] = False
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)


@irdl_op_definition
class ExpectAlmostEqConstOp(_AlmostEqBase):
    name = "check.expect_almost_eq_const"
    CONST: ClassVar[bool] = True
    lhs = operand_def(TensorType)
    value = prop_def(_ElementsAttr)

    def verify_(self) -> None:
        _same_type(self.lhs.type, self.value.get_type())


def _same_type(lhs: Attribute, rhs: Attribute) -> None:
    if lhs != rhs:
        raise VerifyException(f"expected value of type {lhs}, got {rhs}")


Check = Dialect("check", [
    ExpectTrueOp, ExpectFalseOp, ExpectAllTrueOp, ExpectEqOp, ExpectEqConstOp,
    ExpectAlmostEqOp, ExpectAlmostEqConstOp,
], [])
