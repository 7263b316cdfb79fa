"""Sort, scan, top-k and scatter as torch-mlir (``tm_tensor``) and IREE (``iree_linalg_ext``)
spell them.

torch-mlir's linalg-on-tensors output carries ``aten.sort``/``topk`` as ``tm_tensor.sort``
(``aten.kthvalue`` as ``tm_tensor.topk``),
``aten.cumsum``/``cumprod`` as ``tm_tensor.scan`` and ``scatter``/``index_put`` as
``tm_tensor.scatter``; IREE's own inputs use the same ops under ``iree_linalg_ext`` (with
``topk``). One op class serves every kind of both dialects:

    tm_tensor.sort dimension(1) outs(%v, %i : T, U) { ^bb0(...): ... tm_tensor.yield %b : i1 } -> T, U
    tm_tensor.scan dimension(1) inclusive(true) ins(%x : T) outs(%o, %acc : T, V) { ... } -> T, V
    iree_linalg_ext.topk dimension(1) ins(%v, %i : T, U) outs(%ov, %oi : T2, U2) { ... } -> T2, U2
    tm_tensor.scatter {dimension_map = array<i64: 0>} unique_indices(false)
        ins(%updates, %indices : T, U) outs(%original : V) { ... } -> V

IREE's other ops of that form share the class: ``topk_v2 dimension(d) [is_sorted]``,
``arg_compare dimension(d) ... [index_base(%b : index)]``, ``gather dimension_map = [...]``,
``softmax dimension(d)`` and ``reverse dimensions(dense<...>)`` (the last two without a region;
reverse writes its result type after ``:``).
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, i64
from xdsl.ir import Dialect, Operation, Region
from xdsl.irdl import traits_def
from xdsl.parser import Parser
from xdsl.traits import IsTerminator


class SortScanOp(Operation):
    """Operands: the ``ins`` then the ``outs``; properties ``num_ins`` and those the op spells
    (``dimension``, ``inclusive``, ``unique_indices``, ``dimension_map``); one region."""

    traits: ClassVar = traits_def()

    @classmethod
    def parse(cls, parser: Parser):
        props: dict = {"num_ins": IntegerAttr(0, i64)}
        operands: list = []
        leading = parser.parse_optional_attr_dict()  # scatter's {dimension_map = ...}
        while (word := parser.parse_optional_identifier()) is not None:
            if word in ("ins", "outs"):
                parser.parse_punctuation("(")
                names = parser.parse_comma_separated_list(
                    parser.Delimiter.NONE, parser.parse_unresolved_operand)
                parser.parse_punctuation(":")
                types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
                parser.parse_punctuation(")")
                operands += parser.resolve_operands(names, types, parser.pos)
                if word == "ins":
                    props["num_ins"] = IntegerAttr(len(names), i64)
            elif word == "is_sorted":
                props[word] = IntegerAttr(1, 1)
            elif word in ("index_base", "dimensions"):  # (%b : index), (dense<...> : T)
                parser.parse_punctuation("(")
                if word == "dimensions":
                    props[word] = parser.parse_attribute()
                else:
                    name = parser.parse_unresolved_operand()
                    parser.parse_punctuation(":")
                    operands.append(parser.resolve_operand(name, parser.parse_type()))
                    props["has_index_base"] = IntegerAttr(1, 1)
                parser.parse_punctuation(")")
            elif word in ("dimension", "inclusive", "unique_indices"):
                parser.parse_punctuation("(")
                if word == "dimension":
                    props[word] = IntegerAttr(parser.parse_integer(), i64)
                else:
                    props[word] = IntegerAttr(int(parser.parse_boolean()), 1)
                parser.parse_punctuation(")")
            elif word == "dimension_map":  # dimension_map = [0, 1]; older IREE: (dense<...>)
                if parser.parse_optional_punctuation("("):
                    props[word] = parser.parse_attribute()
                    parser.parse_punctuation(")")
                    continue
                parser.parse_punctuation("=")
                values = parser.parse_comma_separated_list(parser.Delimiter.SQUARE,
                                                           parser.parse_integer)
                props[word] = DenseArrayBase.from_list(i64, values)
            else:
                parser.raise_error(f"unexpected '{word}' in {cls.name}")
        attributes = parser.parse_optional_attr_dict_with_keyword()
        region = parser.parse_optional_region() or Region()
        results = []
        if parser.parse_optional_punctuation("->") or parser.parse_optional_punctuation(":"):
            results = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        props.update(leading)
        return cls.create(operands=operands, result_types=results, properties=props,
                          attributes=attributes.data if attributes else {}, regions=[region])

    def print(self, printer) -> None:
        printer.print_op_with_default_format(self)


class YieldOp(Operation):
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


def _dialect(name: str, kinds: tuple[str, ...]) -> Dialect:
    ops = [type(f"{name}.{k}", (SortScanOp,), {"name": f"{name}.{k}"}) for k in kinds]
    ops.append(type(f"{name}.yield", (YieldOp,), {"name": f"{name}.yield"}))
    return Dialect(name, ops, [])


TMTensor = _dialect("tm_tensor", ("sort", "scan", "topk", "scatter"))
LinalgExt = _dialect("iree_linalg_ext", ("sort", "scan", "topk", "scatter", "topk_v2",
                                         "arg_compare", "gather", "softmax", "reverse"))
