"""MLIR's ``ml_program`` globals, as JAX and IREE's StableHLO preprocessing write module state:

    ml_program.global private mutable @state(dense<0> : tensor<4xi32>) : tensor<4xi32>
    %s = ml_program.global_load @state : tensor<4xi32>
    ml_program.global_store @state = %s2 : tensor<4xi32>
    %c = ml_program.global_load_const @weights : tensor<4xf32>

The global declares the same properties as ``util.global`` (input/globals.py reads both).
"""

from __future__ import annotations

from pyree.compiler.input.dialects.util import parse_global_head
from xdsl.dialects.builtin import StringAttr, SymbolRefAttr, UnitAttr
from xdsl.ir import Dialect
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    result_def,
    var_operand_def,
)
from xdsl.parser import Parser


@irdl_op_definition
class GlobalOp(IRDLOperation):
    name = "ml_program.global"

    sym_name = prop_def(StringAttr)
    sym_visibility = opt_prop_def(StringAttr)
    is_mutable = opt_prop_def(UnitAttr)
    initial_value = opt_prop_def(AnyAttr())
    type = prop_def(AnyAttr())

    @classmethod
    def parse(cls, parser: Parser) -> GlobalOp:
        properties = parse_global_head(parser)
        if parser.parse_optional_punctuation("(") is not None:
            properties["initial_value"] = parser.parse_attribute()
            parser.parse_punctuation(")")
        parser.parse_punctuation(":")
        properties["type"] = parser.parse_type()
        attributes = parser.parse_optional_attr_dict()
        return cls.create(properties=properties, attributes=attributes)


def _load(op_name: str):
    @irdl_op_definition
    class Load(IRDLOperation):
        name = op_name
        global_name = prop_def(SymbolRefAttr)
        result = result_def(AnyAttr())

        @classmethod
        def parse(cls, parser: Parser):
            name = parser.parse_symbol_name()
            parser.parse_punctuation(":")
            return cls.create(properties={"global_name": SymbolRefAttr(name)},
                              result_types=[parser.parse_type()])

    return Load


GlobalLoadOp = _load("ml_program.global_load")
GlobalLoadConstOp = _load("ml_program.global_load_const")


@irdl_op_definition
class GlobalStoreOp(IRDLOperation):
    """``ml_program.global_store @name = %value : type``."""

    name = "ml_program.global_store"

    global_name = prop_def(SymbolRefAttr)
    value = var_operand_def()

    @classmethod
    def parse(cls, parser: Parser) -> GlobalStoreOp:
        name = parser.parse_symbol_name()
        parser.parse_punctuation("=")
        operand = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        value = parser.resolve_operand(operand, parser.parse_type())
        return cls.create(properties={"global_name": SymbolRefAttr(name)}, operands=[value])


MLProgram = Dialect("ml_program", [GlobalOp, GlobalLoadOp, GlobalLoadConstOp, GlobalStoreOp], [])
