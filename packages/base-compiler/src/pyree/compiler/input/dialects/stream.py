"""IREE's ``#stream.parameter.named`` attribute: a global's value kept outside the program.

``#stream.parameter.named<"scope"::"key">`` (or ``<"key">``, the empty scope), optionally with a
config dictionary after a comma, which pyree ignores. It initializes a ``util.global`` (what
iree-turbine's and torch-mlir's ``externalize_module_parameters`` emit); the runtime loads the
bytes from a parameter file given for that scope. ``#flow.parameter.named`` is its earlier
spelling (IREE's parameter passes and tests of 2024 wrote it).
"""

from __future__ import annotations

from pyree.compiler.input.dialects.flow_region import DispatchRegionOp, ReturnOp
from pyree.compiler.input.dialects.flow_tensor import FLOW_TENSOR_OPS
from xdsl.ir import Data, Dialect
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer


class NamedParameterAttr(Data[tuple[str, str]]):
    """(scope, key); the scope is empty when the attribute names only a key."""

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> tuple[str, str]:
        parser.parse_punctuation("<")
        first = parser.parse_str_literal(" (the parameter's scope or key)")
        scope, key = "", first
        if parser.parse_optional_punctuation(":") is not None:
            parser.parse_punctuation(":", " (scope::key)")
            scope, key = first, parser.parse_str_literal(" (the parameter's key)")
        if parser.parse_optional_punctuation(",") is not None:
            parser.parse_attribute()  # the config dictionary: nothing pyree uses
        parser.parse_punctuation(">")
        return scope, key

    def print_parameter(self, printer: Printer) -> None:
        scope, key = self.data
        printer.print_string(f'<"{scope}"::"{key}">' if scope else f'<"{key}">')


StreamNamedParameterAttr = irdl_attr_definition(
    type("StreamNamedParameterAttr", (NamedParameterAttr,), {"name": "stream.parameter.named"}))
FlowNamedParameterAttr = irdl_attr_definition(
    type("FlowNamedParameterAttr", (NamedParameterAttr,), {"name": "flow.parameter.named"}))
Stream = Dialect("stream", [], [StreamNamedParameterAttr])
Flow = Dialect("flow", [DispatchRegionOp, ReturnOp, *FLOW_TENSOR_OPS], [FlowNamedParameterAttr])
