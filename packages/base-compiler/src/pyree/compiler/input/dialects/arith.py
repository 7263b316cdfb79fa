"""arith ops with MLIR's full syntax on tensors, replacing xDSL's (scalar-only) declarations.

    %r = arith.select %c, %a, %b : f32                          // scalar condition
    %r = arith.select %c, %a, %b : tensor<4xi1>, tensor<4xf32>  // elementwise
    %c = arith.cmpf olt, %a, %b : tensor<4xf32>                 // result tensor<4xi1>

and ``arith.remf``, which xDSL lacks.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.arith import (
    CMPF_COMPARISON_OPERATIONS,
    CMPI_COMPARISON_OPERATIONS,
    FloatingPointLikeBinaryOperation,
)
from xdsl.dialects.builtin import IntegerAttr, IntegerType, TensorType, i1, i64
from xdsl.ir import Attribute
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
from xdsl.utils.exceptions import VerifyException


def bool_like(t: Attribute) -> Attribute:
    """i1, or a tensor of i1 of ``t``'s shape: what a comparison or a classification of ``t``
    yields."""
    return TensorType(i1, t.get_shape()) if isinstance(t, TensorType) else i1


@irdl_op_definition
class SelectOp(IRDLOperation):
    name = "arith.select"

    _T: ClassVar = VarConstraint("_T", AnyAttr())
    cond = operand_def(AnyAttr())
    lhs = operand_def(_T)
    rhs = operand_def(_T)
    result = result_def(_T)

    @classmethod
    def parse(cls, parser: Parser) -> SelectOp:
        cond = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        lhs = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        rhs = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = [parser.parse_type()]
        if parser.parse_optional_punctuation(","):
            types.append(parser.parse_type())
        cond_type: Attribute = types[0] if len(types) == 2 else i1
        result_type = types[-1]
        operands = [parser.resolve_operand(cond, cond_type),
                    parser.resolve_operand(lhs, result_type),
                    parser.resolve_operand(rhs, result_type)]
        return cls.create(operands=operands, result_types=[result_type], attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_ssa_value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        if self.cond.type != i1:
            printer.print_attribute(self.cond.type)
            printer.print_string(", ")
        printer.print_attribute(self.result.type)

    def verify_(self) -> None:
        cond = self.cond.type
        if isinstance(cond, TensorType):
            result = self.result.type
            if (cond.get_element_type() != i1 or not isinstance(result, TensorType)
                    or cond.get_shape() != result.get_shape()):
                raise VerifyException(f"condition {cond} does not match result {self.result.type}")
        elif not (isinstance(cond, IntegerType) and cond == i1):
            raise VerifyException(f"condition must be i1 or a tensor of i1, got {cond}")


class _Compare(IRDLOperation):
    """``arith.cmp{f,i} <predicate>, %a, %b : T`` -> i1, or a tensor of i1 shaped like T."""

    PREDICATES: ClassVar[list[str]]
    _T: ClassVar = VarConstraint("_T", AnyAttr())
    predicate = prop_def(IntegerAttr)
    lhs = operand_def(_T)
    rhs = operand_def(_T)
    result = result_def(AnyAttr())

    @classmethod
    def parse(cls, parser: Parser) -> _Compare:
        mnemonic = parser.parse_identifier()
        if mnemonic not in cls.PREDICATES:
            parser.raise_error(f"unknown predicate '{mnemonic}' for {cls.name}")
        parser.parse_punctuation(",")
        lhs = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        rhs = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        return cls.create(
            operands=[parser.resolve_operand(lhs, t), parser.resolve_operand(rhs, t)],
            result_types=[bool_like(t)], attributes=attrs,
            properties={"predicate": IntegerAttr(cls.PREDICATES.index(mnemonic), i64)})

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.PREDICATES[self.predicate.value.data]}, ")
        printer.print_list(self.operands, printer.print_ssa_value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.lhs.type)


@irdl_op_definition
class CmpfOp(_Compare):
    name = "arith.cmpf"
    PREDICATES: ClassVar[list[str]] = list(CMPF_COMPARISON_OPERATIONS)


@irdl_op_definition
class CmpiOp(_Compare):
    name = "arith.cmpi"
    PREDICATES: ClassVar[list[str]] = list(CMPI_COMPARISON_OPERATIONS)


class _Cast(IRDLOperation):
    """``arith.<cast> %x : A to B`` on scalars or same-shaped tensors."""

    input = operand_def(AnyAttr())
    result = result_def(AnyAttr())
    assembly_format = "$input attr-dict `:` type($input) `to` type($result)"

    def verify_(self) -> None:
        src, dst = self.input.type, self.result.type
        if isinstance(src, TensorType) != isinstance(dst, TensorType) or (
                isinstance(src, TensorType) and src.get_shape() != dst.get_shape()):
            raise VerifyException(f"cannot cast {src} to {dst}: shapes differ")


def _cast(op_name: str) -> type[_Cast]:
    class_name = op_name.title().replace("_", "") + "Op"
    return irdl_op_definition(type(class_name, (_Cast,), {"name": f"arith.{op_name}"}))


CAST_OPS = tuple(_cast(n) for n in (
    "extf", "truncf", "sitofp", "uitofp", "fptosi", "fptoui", "extsi", "extui", "trunci",
    "bitcast", "index_cast", "index_castui"))

@irdl_op_definition
class RemfOp(FloatingPointLikeBinaryOperation):
    """``arith.remf``, which xDSL does not declare: the remainder with the dividend's sign
    (C's fmod), what torch-mlir writes for torch.fmod and torch.remainder."""

    name = "arith.remf"


ARITH_OPS = (SelectOp, CmpfOp, CmpiOp, RemfOp, *CAST_OPS)
