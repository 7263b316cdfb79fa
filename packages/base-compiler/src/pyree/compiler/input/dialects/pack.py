"""``tensor.pack`` (``linalg.pack`` in newer MLIR): a tensor tiled into a higher-rank layout.

    %p = tensor.pack %source [padding_value(%v : T)] [outer_dims_perm = [1, 0]]
           inner_dims_pos = [0, 1] inner_tiles = [16, 2] into %dest : S -> D

Operands: the source, the destination, then the padding value when given
(``properties["padded"]``). Tile sizes must be constants here.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, i64
from xdsl.ir import Operation
from xdsl.irdl import traits_def
from xdsl.parser import Parser


class PackOp(Operation):
    name = "tensor.pack"
    traits: ClassVar = traits_def()

    @classmethod
    def parse(cls, parser: Parser):
        source = parser.parse_unresolved_operand()
        padding = None
        if parser.parse_optional_keyword("padding_value") is not None:
            parser.parse_punctuation("(")
            padding = parser.parse_unresolved_operand()
            parser.parse_punctuation(":")
            padding_type = parser.parse_type()
            parser.parse_punctuation(")")
        properties = {}
        for key in ("outer_dims_perm", "inner_dims_pos", "inner_tiles"):
            if parser.parse_optional_keyword(key) is None:
                continue
            parser.parse_punctuation("=")
            start = parser.pos
            values = parser.parse_comma_separated_list(parser.Delimiter.SQUARE,
                                                       lambda: parser.parse_optional_integer())
            if None in values:
                parser.raise_error(f"tensor.pack {key} must be constants here", start, parser.pos)
            properties[key] = DenseArrayBase.from_list(i64, values)
        parser.parse_keyword("into")
        dest = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        source_type = parser.parse_type()
        parser.parse_punctuation("->")
        dest_type = parser.parse_type()
        names, types = [source, dest], [source_type, dest_type]
        if padding is not None:
            names.append(padding)
            types.append(padding_type)
        properties["padded"] = IntegerAttr(int(padding is not None), 64)
        operands = parser.resolve_operands(names, types, parser.pos)
        return cls.create(operands=operands, result_types=[dest_type], properties=properties,
                          attributes=attrs)

    def print(self, printer) -> None:
        printer.print_op_with_default_format(self)


LinalgPackOp = type("LinalgPackOp", (PackOp,), {"name": "linalg.pack"})
PACK_OPS = (PackOp, LinalgPackOp)
