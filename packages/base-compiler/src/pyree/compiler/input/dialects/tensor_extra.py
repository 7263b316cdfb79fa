"""``tensor.gather`` (xDSL 0.74 has no such op) and ``linalg.init_tensor`` (MLIR's name for
``tensor.empty`` before 2022, which IREE's older e2e files still write):

    %r = tensor.gather %source[%indices] gather_dims([0, 1]) [unique] : (T, I) -> R
    %e = linalg.init_tensor [1, 1, 2, 3] : tensor<1x1x2x3xf32>
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import DenseArrayBase, i64
from xdsl.ir import Operation
from xdsl.irdl import traits_def
from xdsl.parser import Parser


class GatherOp(Operation):
    name = "tensor.gather"
    traits: ClassVar = traits_def()

    @classmethod
    def parse(cls, parser: Parser):
        source = parser.parse_unresolved_operand()
        parser.parse_punctuation("[")
        indices = parser.parse_unresolved_operand()
        parser.parse_punctuation("]")
        parser.parse_keyword("gather_dims")
        parser.parse_punctuation("(")
        dims = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        parser.parse_punctuation(")")
        parser.parse_optional_keyword("unique")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        ft = parser.parse_function_type()
        operands = parser.resolve_operands([source, indices], list(ft.inputs), parser.pos)
        return cls.create(operands=operands, result_types=list(ft.outputs),
                          properties={"gather_dims": DenseArrayBase.from_list(i64, dims)},
                          attributes=attrs)

    def print(self, printer) -> None:
        printer.print_op_with_default_format(self)


class InitTensorOp(Operation):
    name = "linalg.init_tensor"
    traits: ClassVar = traits_def()

    @classmethod
    def parse(cls, parser: Parser):
        parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        parser.parse_punctuation(":")
        return cls.create(result_types=[parser.parse_type()])

    def print(self, printer) -> None:
        printer.print_op_with_default_format(self)


TENSOR_EXTRA_OPS = (GatherOp, InitTensorOp)
