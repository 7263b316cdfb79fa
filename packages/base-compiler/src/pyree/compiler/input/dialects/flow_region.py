"""IREE's ``flow.dispatch.region`` and ``flow.return``: a test's hand-made dispatch boundary.

    %r = flow.dispatch.region -> (tensor<4xi32>) { ... flow.return %v : tensor<4xi32> }

pyree forms its own dispatch regions (flow/), so the region's ops are lowered in place and the
results are what ``flow.return`` returns (input/lowering.py); a fill the region holds is then
materialized once per consumer that writes into it, as IREE's region would have kept it.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.ir import Operation
from xdsl.irdl import traits_def
from xdsl.parser import Parser
from xdsl.traits import IsTerminator


class DispatchRegionOp(Operation):
    name = "flow.dispatch.region"
    traits: ClassVar = traits_def()

    @classmethod
    def parse(cls, parser: Parser):
        types = []
        if parser.parse_optional_punctuation("->"):
            types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        region = parser.parse_region()
        return cls.create(result_types=types, regions=[region])

    @property
    def region(self):
        """Its one region (as scf.execute_region's, whose rule lowers it)."""
        return self.regions[0]

    def print(self, printer) -> None:
        printer.print_op_with_default_format(self)


class ReturnOp(Operation):
    name = "flow.return"
    traits: ClassVar = traits_def(IsTerminator())

    @classmethod
    def parse(cls, parser: Parser):
        names = parser.parse_comma_separated_list(parser.Delimiter.NONE,
                                                  parser.parse_unresolved_operand)
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        return cls.create(operands=parser.resolve_operands(names, types, parser.pos))

    def print(self, printer) -> None:
        printer.print_op_with_default_format(self)
