"""IREE's flow tensor ops that its tests and exporters write around dynamic shapes.

    %c = flow.tensor.dynamic_constant dense<...> : tensor<3x4xi32> -> tensor<?x4xi32>
    %t = flow.tensor.tie_shape %x : tensor<?x?xi8>{%h, %w}
    %b = flow.tensor.bitcast %x : tensor<?x4xf32>{%n} -> tensor<?x4xi32>{%n}

Each ``{...}`` list gives the ``?`` dims of the type before it, in order. The rules that lower
them are in ``input/flow_tensor.py``.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Operation
from xdsl.irdl import traits_def
from xdsl.parser import Parser


def _parse_dims(parser: Parser) -> list:
    """An optional ``{%a, %b}`` of index operands (unresolved)."""
    if parser.parse_optional_punctuation("{") is None:
        return []
    names = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_unresolved_operand)
    parser.parse_punctuation("}")
    return names


class _Printed(Operation):
    traits: ClassVar = traits_def()

    def print(self, printer) -> None:
        printer.print_op_with_default_format(self)


class DynamicConstantOp(_Printed):
    """A constant whose result type hides some of its dims: the compiler must treat them as
    run-time sizes (IREE's tests use it to reach the dynamic code paths from a constant)."""

    name = "flow.tensor.dynamic_constant"

    @classmethod
    def parse(cls, parser: Parser):
        attrs = parser.parse_optional_attr_dict()
        value = parser.parse_attribute()  # a dense attribute, with its static type
        parser.parse_punctuation("->")
        result = parser.parse_type()
        return cls.create(result_types=[result], attributes=attrs, properties={"value": value})

    @property
    def value(self):
        return self.properties["value"]


class TieShapeOp(_Printed):
    """The operand, with its ``?`` dims stated: ``operands[0]`` and then the dims."""

    name = "flow.tensor.tie_shape"

    @classmethod
    def parse(cls, parser: Parser):
        source = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        dims = _parse_dims(parser)
        attrs = parser.parse_optional_attr_dict()
        operands = parser.resolve_operands([source, *dims], [t, *[IndexType()] * len(dims)],
                                           parser.pos)
        return cls.create(operands=operands, result_types=[t], attributes=attrs)


class BitcastOp(_Printed):
    """The operand's bytes as another type: ``operands[0]``, the source's ``?`` dims, then the
    result's (``properties["source_dims"]`` says how many are the source's)."""

    name = "flow.tensor.bitcast"

    @classmethod
    def parse(cls, parser: Parser):
        source = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        source_type = parser.parse_type()
        source_dims = _parse_dims(parser)
        parser.parse_punctuation("->")
        result_type = parser.parse_type()
        result_dims = _parse_dims(parser)
        attrs = parser.parse_optional_attr_dict()
        dims = [*source_dims, *result_dims]
        operands = parser.resolve_operands([source, *dims],
                                           [source_type, *[IndexType()] * len(dims)], parser.pos)
        return cls.create(operands=operands, result_types=[result_type], attributes=attrs,
                          properties={"source_dims": IntegerAttr(len(source_dims), 64)})


FLOW_TENSOR_OPS = (DynamicConstantOp, TieShapeOp, BitcastOp)
