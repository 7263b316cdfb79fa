"""IREE's ``util`` ops: constants its e2e tests keep from folding, and immutable globals.

``util.unfoldable_constant`` lowers like ``arith.constant`` (and is declared like it: the result
type is the value's type); ``util.optimization_barrier`` is the identity. pyree folds no
constants into the ops under test either way. ``util.global`` declares a module-level constant
(a dense value, or ``#stream.parameter.named``: a parameter loaded at run time) and
``util.global.load`` reads it inside a function. ``#util.inline.never`` is accepted on a function
(its calls are inlined all the same). ``util.assume.int`` states bounds and a divisor of index
values (torch.export's ``Dim(min, max)`` arrives that way): the results are the operands.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    SymbolRefAttr,
    UnitAttr,
)
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    ParamAttrConstraint,
    VarConstraint,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    result_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer


@irdl_op_definition
class UnfoldableConstantOp(IRDLOperation):
    name = "util.unfoldable_constant"

    _T: ClassVar = VarConstraint("T", AnyAttr())
    result = result_def(_T)
    value = prop_def(
        ParamAttrConstraint(IntegerAttr, (AnyAttr(), _T))
        | ParamAttrConstraint(FloatAttr, (AnyAttr(), _T))
        | ParamAttrConstraint(DenseIntOrFPElementsAttr, (_T, AnyAttr()))
        | ParamAttrConstraint(DenseResourceAttr, (AnyAttr(), _T))
    )

    assembly_format = "attr-dict $value"


@irdl_op_definition
class OptimizationBarrierOp(IRDLOperation):
    """``%a, %b = util.optimization_barrier %x, %y : T, U``: results are the operands."""

    name = "util.optimization_barrier"

    values = var_operand_def(AnyAttr())
    barriers = var_result_def(AnyAttr())

    @classmethod
    def parse(cls, parser: Parser) -> OptimizationBarrierOp:
        values = parser.parse_comma_separated_list(
            Parser.Delimiter.NONE, parser.parse_unresolved_operand)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_type)
        operands = parser.resolve_operands(values, types, parser.pos)
        return cls.create(operands=operands, result_types=types, attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_ssa_value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_list([v.type for v in self.operands], printer.print_attribute)


@irdl_op_definition
class AssumeIntOp(IRDLOperation):
    """``%r:2 = util.assume.int %a<umin = 1, umax = 512>, %b<udiv = 8> : index, index``: each
    result is its operand, which is assumed within [umin, umax] and a multiple of udiv.
    ``assumptions`` holds one dictionary per operand. IREE's list form (one assumption per
    call site, ``%a[<...>, <...>]``) is refused: pyree has one host program per function."""

    name = "util.assume.int"

    values = var_operand_def(AnyAttr())
    assumptions = prop_def(ArrayAttr)
    results_ = var_result_def(AnyAttr())

    KEYS: ClassVar = ("umin", "umax", "udiv")

    @classmethod
    def parse(cls, parser: Parser) -> AssumeIntOp:
        def one():
            operand = parser.parse_unresolved_operand()
            if parser.parse_optional_punctuation("[") is not None:
                parser.raise_error("util.assume.int with a list of assumptions per operand is "
                                   "not supported: pyree takes one assumption per value")
            parser.parse_punctuation("<")
            entries = {}
            while True:
                key = parser.parse_identifier()
                if key not in cls.KEYS:
                    parser.raise_error(f"util.assume.int has no '{key}'; it takes "
                                       f"{', '.join(cls.KEYS)}")
                parser.parse_punctuation("=")
                entries[key] = IntegerAttr(parser.parse_integer(), 64)
                if parser.parse_optional_punctuation(",") is None:
                    break
            parser.parse_punctuation(">")
            return operand, DictionaryAttr(entries)

        pairs = parser.parse_comma_separated_list(Parser.Delimiter.NONE, one)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_type)
        operands = parser.resolve_operands([p[0] for p in pairs], types, parser.pos)
        return cls.create(operands=operands, result_types=types, attributes=attrs,
                          properties={"assumptions": ArrayAttr([p[1] for p in pairs])})

    def bounds(self) -> list[dict[str, int]]:
        """Per operand, its assumptions by key."""
        return [{k: v.value.data for k, v in d.data.items()} for d in self.assumptions.data]


def parse_global_head(parser: Parser) -> dict[str, Attribute]:
    """``[private|public|nested] [mutable] @name``, the start of util.global and
    ml_program.global alike, as the properties both ops declare."""
    properties: dict[str, Attribute] = {}
    visibility = parser.parse_optional_keyword_in(("private", "public", "nested"))
    if visibility is not None:
        properties["sym_visibility"] = StringAttr(visibility)
    if parser.parse_optional_keyword("mutable") is not None:
        properties["is_mutable"] = UnitAttr()
    properties["sym_name"] = parser.parse_symbol_name()
    return properties


@irdl_op_definition
class GlobalOp(IRDLOperation):
    """``util.global private [mutable] @name [= initial value] : type``; a typed initial value
    (``dense<...> : tensor<4xf32>``) carries the type itself."""

    name = "util.global"

    sym_name = prop_def(StringAttr)
    sym_visibility = opt_prop_def(StringAttr)
    is_mutable = opt_prop_def(UnitAttr)
    initial_value = opt_prop_def(AnyAttr())
    type = prop_def(AnyAttr())

    @classmethod
    def parse(cls, parser: Parser) -> GlobalOp:
        properties = parse_global_head(parser)
        attributes = parser.parse_optional_attr_dict()
        value_type = None
        if parser.parse_optional_punctuation("=") is not None:
            value = parser.parse_attribute()
            properties["initial_value"] = value
            value_type = getattr(value, "type", None)
        if parser.parse_optional_punctuation(":") is not None:
            value_type = parser.parse_type()
        if value_type is None:
            parser.raise_error("util.global needs a type (': tensor<...>')")
        properties["type"] = value_type
        return cls.create(properties=properties, attributes=attributes)

    def print(self, printer: Printer) -> None:
        if self.sym_visibility is not None:
            printer.print_string(f" {self.sym_visibility.data}")
        if self.is_mutable is not None:
            printer.print_string(" mutable")
        printer.print_string(f" @{self.sym_name.data}")
        printer.print_op_attributes(self.attributes)
        if self.initial_value is not None:
            printer.print_string(" = ")
            printer.print_attribute(self.initial_value)
        printer.print_string(" : ")
        printer.print_attribute(self.type)


@irdl_op_definition
class GlobalLoadOp(IRDLOperation):
    """``%v = util.global.load [immutable] @name : type``."""

    name = "util.global.load"

    global_name = prop_def(SymbolRefAttr)
    result = result_def(AnyAttr())

    @classmethod
    def parse(cls, parser: Parser) -> GlobalLoadOp:
        parser.parse_optional_keyword("immutable")
        name = parser.parse_symbol_name()
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        return cls.create(properties={"global_name": SymbolRefAttr(name)}, attributes=attributes,
                          result_types=[parser.parse_type()])

    def print(self, printer: Printer) -> None:
        printer.print_string(f" @{self.global_name.root_reference.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)


@irdl_op_definition
class GlobalStoreOp(IRDLOperation):
    """``util.global.store %value, @name : type`` (a mutable global's new state)."""

    name = "util.global.store"

    global_name = prop_def(SymbolRefAttr)
    value = var_operand_def()

    @classmethod
    def parse(cls, parser: Parser) -> GlobalStoreOp:
        operand = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        name = parser.parse_symbol_name()
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        value = parser.resolve_operand(operand, parser.parse_type())
        return cls.create(properties={"global_name": SymbolRefAttr(name)}, operands=[value],
                          attributes=attributes)


@irdl_attr_definition
class InlineNeverAttr(ParametrizedAttribute):
    """``#util.inline.never`` on a function: IREE keeps its calls as calls. pyree inlines every
    call (the host program has no calls), which computes the same values."""

    name = "util.inline.never"


Util = Dialect("util", [UnfoldableConstantOp, OptimizationBarrierOp, AssumeIntOp, GlobalOp,
                        GlobalLoadOp, GlobalStoreOp], [InlineNeverAttr])
