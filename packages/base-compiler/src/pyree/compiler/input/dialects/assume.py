"""IREE's ``util.assume.int``: facts about integer values (ranges, divisors) for the compiler.

    %n2 = util.assume.int %n<umin = 1, umax = 512, udiv = 8> : index
    %a2, %b2 = util.assume.int %a<udiv = 16>, %b[<umin = 0>, <umin = 4>] : index, i32

Each operand has one assumption, or a list of them (one per call site IREE has seen; any may
hold). The results are the operands; ``properties["assumptions"]`` keeps, per operand, the
list of ``{key: value}`` dictionaries for a rule that uses them (a bound on a run-time size).
"""

from __future__ import annotations

import math
from typing import ClassVar

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, i64
from xdsl.ir import Operation
from xdsl.irdl import traits_def
from xdsl.parser import Parser

KEYS = ("umin", "umax", "udiv")


def _parse_one(parser: Parser) -> DictionaryAttr:
    """``<umin = 0, umax = 3, udiv = 1>`` (any of the keys, or none)."""
    parser.parse_punctuation("<")
    values = {}
    if parser.parse_optional_punctuation(">") is not None:
        return DictionaryAttr(values)
    while True:
        start = parser.pos
        key = parser.parse_identifier()
        if key not in KEYS:
            parser.raise_error(f"util.assume.int knows {', '.join(KEYS)}, not '{key}'",
                               start, parser.pos)
        parser.parse_punctuation("=")
        values[key] = IntegerAttr(parser.parse_integer(), i64)
        if parser.parse_optional_punctuation(",") is None:
            break
    parser.parse_punctuation(">")
    return DictionaryAttr(values)


class AssumeIntOp(Operation):
    name = "util.assume.int"
    traits: ClassVar = traits_def()

    @classmethod
    def parse(cls, parser: Parser):
        def operand():
            name = parser.parse_unresolved_operand()
            if parser.parse_optional_punctuation("[") is not None:
                listed = parser.parse_comma_separated_list(parser.Delimiter.NONE,
                                                           lambda: _parse_one(parser))
                parser.parse_punctuation("]")
                return name, ArrayAttr(listed)
            return name, ArrayAttr([_parse_one(parser)])

        pairs = parser.parse_comma_separated_list(parser.Delimiter.NONE, operand)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        operands = parser.resolve_operands([n for n, _ in pairs], types, parser.pos)
        return cls.create(operands=operands, result_types=types, attributes=attrs,
                          properties={"assumptions": ArrayAttr([a for _, a in pairs])})

    def bounds(self) -> list[dict[str, int]]:
        """Per operand, what holds whichever of its listed assumptions does: the lowest umin,
        the highest umax (none where one has none), the gcd of the divisors."""
        out = []
        for listed in self.properties["assumptions"].data:
            each = [{k: v.value.data for k, v in d.data.items()} for d in listed.data]
            highs = [a.get("umax") for a in each]
            out.append({"umin": min(a.get("umin", 0) for a in each),
                        "umax": None if None in highs else max(highs),
                        "udiv": math.gcd(*(a.get("udiv", 1) for a in each))})
        return out

    def print(self, printer) -> None:
        printer.print_op_with_default_format(self)
