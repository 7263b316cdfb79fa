"""Shardy (``sdy``), as far as JAX's single-device programs use it: JAX 0.7 and later put
``#sdy.op_sharding_rule<...>`` on the custom calls of its linear algebra and ``#sdy.sharding``
on sharded arguments. They say how to split work across devices, which one device never
does, so each is kept as its text (``HloAttr``) and never read; xDSL does not know the
dialect, and without this the program failed to parse ("'sdy.op_sharding_rule' is not
registered") before pyree could name the op it cannot compile."""

from __future__ import annotations

from pyree.compiler.input.dialects.stablehlo import HloAttr, text_attr
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Dialect
from xdsl.irdl import IRDLOperation, irdl_op_definition, prop_def
from xdsl.parser import Parser
from xdsl.printer import Printer

_MeshAttr = text_attr("sdy.mesh")


@irdl_op_definition
class MeshOp(IRDLOperation):
    """``sdy.mesh @mesh = <["i"=1]>``: the device mesh a sharded program names (JAX's default
    since 0.7 for any program with shardings), kept and never read."""

    name = "sdy.mesh"
    sym_name = prop_def(StringAttr)
    mesh = prop_def(HloAttr)

    @classmethod
    def parse(cls, parser: Parser) -> MeshOp:
        name = parser.parse_symbol_name()
        parser.parse_punctuation("=")
        mesh = _MeshAttr(_MeshAttr.parse_parameter(parser))
        attrs = parser.parse_optional_attr_dict()
        return cls.create(properties={"sym_name": name, "mesh": mesh}, attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(f" @{self.sym_name.data} = ")
        self.mesh.print_parameter(printer)
        printer.print_op_attributes(self.attributes)


Shardy = Dialect("sdy", [MeshOp], [_MeshAttr] + [text_attr(f"sdy.{kind}") for kind in (
    "op_sharding_rule", "sharding", "sharding_per_value", "tensor_sharding",
    "manual_axes", "dim_sharding", "axis_ref", "sub_axis_info", "sharding_rule")])
