"""StableHLO and CHLO, declared for parsing only: xDSL 0.74 has neither dialect.

Every op is a plain ``Operation`` subclass made from a name table, so the generic form
(``"stablehlo.add"(%a, %b) : (...) -> ...``) parses for all of them. The custom forms that
JAX prints are read by a few grammar families (``_parse_simple`` covers the elementwise and
shape ops) and normalized to the generic form's property names, so the lowering
(``pyree.compiler.input.stablehlo``) reads one spelling. Dialect attributes
(``#stablehlo<comparison_direction LT>``, ``#stablehlo.gather<...>``) keep their body text
(``HloAttr``), which the lowering reads with ``hlo_fields``.
"""

from __future__ import annotations

import re
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    IntegerAttr,
    StringAttr,
    TensorType,
    TupleType,
    i64,
)
from xdsl.ir import (
    Attribute,
    Block,
    Data,
    Dialect,
    Operation,
    OpTraits,
    ParametrizedAttribute,
    Region,
    TypeAttribute,
)
from xdsl.irdl import irdl_attr_definition, traits_def
from xdsl.parser import AttrParser, Parser
from xdsl.traits import IsTerminator
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.mlir_lexer import MLIRTokenKind

_NEST = {MLIRTokenKind.LESS: 1, MLIRTokenKind.L_SQUARE: 1, MLIRTokenKind.L_PAREN: 1,
         MLIRTokenKind.L_BRACE: 1, MLIRTokenKind.GREATER: -1, MLIRTokenKind.R_SQUARE: -1,
         MLIRTokenKind.R_PAREN: -1, MLIRTokenKind.R_BRACE: -1}


class HloAttr(Data[str]):
    """A StableHLO/CHLO dialect attribute, kept as its body text."""

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> str:
        # ``#stablehlo.gather<...>`` arrives at its ``<``; ``#stablehlo<precision X>`` after it.
        own = parser.parse_optional_punctuation("<") is not None
        depth, words = 0, []
        while depth or parser._current_token.kind != MLIRTokenKind.GREATER:
            if parser._current_token.kind == MLIRTokenKind.EOF:
                parser.raise_error("unterminated StableHLO attribute")
            depth += _NEST.get(parser._current_token.kind, 0)
            words.append(parser._consume_token().text)
        if own:  # the other form's ``>`` is the caller's
            parser.parse_punctuation(">")
        return " ".join(words)

    def print_parameter(self, printer) -> None:
        printer.print_string(f"<{self.data}>")


def text_attr(name: str) -> type[HloAttr]:
    """An attribute class named ``name`` (``dialect.kind``) that keeps its body as text."""
    return irdl_attr_definition(type(name.title().replace(".", "").replace("_", ""),
                                     (HloAttr,), {"name": name}))


_ATTRS = [text_attr(f"{d}.{n}") for d in ("stablehlo", "chlo") for n in (
    "comparison_direction", "comparison_type", "precision", "gather", "scatter", "conv", "dot",
    "dot_algorithm", "rng_algorithm", "rng_distribution", "fft_type", "transpose",
    "output_operand_alias", "result_accuracy", "result_accuracy_mode", "channel_handle",
    "type_extensions")]

_INT_LIST = re.compile(r"-?\d+")


def hlo_fields(attr: HloAttr) -> dict[str, list[int] | str]:
    """``name = [1, 2], other = 3`` (an ``HloAttr``'s body) as a dict of int lists/words."""
    out: dict[str, list[int] | str] = {}
    for key, value in re.findall(r"(\w+)\s*=\s*(\[[^\]]*\]|[\w.-]+)", attr.data):
        out[key] = [int(v) for v in _INT_LIST.findall(value)] if value.startswith("[") \
            or value.lstrip("-").isdigit() else value
    return out


def _ints(values: list[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, values)


# ---- the grammar families ----------------------------------------------------------------

def _parse_value(parser: Parser):
    """A keyword's value: int, word, (nested) bracketed list of those, or ``<key = value>``."""
    if parser.parse_optional_punctuation("["):
        items = []
        if not parser.parse_optional_punctuation("]"):
            items = parser.parse_comma_separated_list(parser.Delimiter.NONE,
                                                      lambda: _parse_value(parser))
            parser.parse_punctuation("]")
        return items
    if parser._current_token.kind == MLIRTokenKind.LESS:  # dot's algorithm = <key = value, ...>
        def field():
            key = parser.parse_identifier()
            parser.parse_punctuation("=")
            return key, _parse_value(parser)
        return dict(parser.parse_comma_separated_list(parser.Delimiter.ANGLE, field))
    if (n := parser.parse_optional_integer()) is not None:
        return n
    if (b := parser.parse_optional_boolean()) is not None:
        return b
    if parser._current_token.kind == MLIRTokenKind.HASH_IDENT:
        return parser.parse_attribute()
    if (text := parser.parse_optional_str_literal()) is not None:  # einsum's config
        return text
    return parser.parse_identifier()


def _signature(parser: Parser, num_operands: int, num_results: int | None):
    """Operand and result types after the ``:``; ``num_results`` None: as many as operands
    (``optimization_barrier``), else one type for all when a single one is written."""
    if parser._current_token.kind == MLIRTokenKind.L_PAREN:
        ft = parser.parse_function_type()
        return list(ft.inputs), list(ft.outputs)
    types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
    if parser.parse_optional_punctuation("->"):  # chlo: `T -> T`
        return types, [parser.parse_type()]
    if num_results is None or num_results == 0:
        return types, (types if num_results is None else [])
    if len(types) == 1:
        return types * num_operands, types
    return [types[0]] + [types[-1]] * (num_operands - 1), [types[-1]]  # select: pred, value


class HloOp(Operation):
    """A StableHLO/CHLO op: operands, results, properties and regions as parsed."""

    KEYS: ClassVar[dict[str, str]] = {}  # custom-syntax keyword -> generic property name
    RESULTS: ClassVar[int | None] = 1  # None: one per operand
    # The fewest and the most operands (None: no limit), and whether it has exactly one result;
    # checked when the module is verified, so that a rule never meets a malformed op.
    OPERANDS: ClassVar[tuple[int, int | None]] = (0, None)
    ONE_RESULT: ClassVar[bool] = False
    traits: ClassVar[OpTraits] = traits_def()

    @classmethod
    def parse(cls, parser: Parser):
        return _parse_simple(cls, parser)

    def verify_(self) -> None:
        low, high = self.OPERANDS
        n = len(self.operands)
        if n < low or (high is not None and n > high):
            want = low if low == high else f"at least {low}" if high is None else f"{low} to {high}"
            raise VerifyException(f"takes {want} operand{'s' * (want != 1)}, not {n}")
        if self.ONE_RESULT and len(self.results) != 1:
            raise VerifyException(f"has one result, not {len(self.results)}")


def _parse_simple(cls, parser: Parser):
    """``[DIR,] %a, %b [, [0:1]] [, key = value]* [, WORD] {attrs} : types``."""
    props: dict[str, Attribute] = {}
    operands = []
    if parser._current_token.kind == MLIRTokenKind.BARE_IDENT and cls.name.endswith("compare"):
        props["comparison_direction"] = _enum("comparison_direction", parser.parse_identifier())
        parser.parse_punctuation(",")
    while True:
        if (operand := parser.parse_optional_unresolved_operand()) is not None:
            operands.append(operand)
            if parser._current_token.kind == MLIRTokenKind.L_SQUARE:
                _parse_slice(parser, props)
        elif parser._current_token.kind == MLIRTokenKind.L_SQUARE:  # slice: [a:b:s, ...]
            _parse_slice(parser, props)
        elif parser._current_token.kind == MLIRTokenKind.BARE_IDENT:
            word = parser.parse_identifier()
            if parser.parse_optional_punctuation("="):
                value = _parse_value(parser)
                if parser.parse_optional_keyword("x"):
                    value = [value, _parse_value(parser)]
                _set(cls, parser, props, word, value)
            else:
                props["compare_type"] = _enum("comparison_type", word)
        else:
            break
        if not parser.parse_optional_punctuation(","):
            break
    attrs = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    in_types, out_types = _signature(parser, len(operands), cls.RESULTS)
    resolved = parser.resolve_operands(operands, in_types, parser.pos)
    props.update({k: v for k, v in attrs.items() if k in cls.KEYS.values()})
    attrs = {k: v for k, v in attrs.items() if k not in props}
    return cls.create(operands=resolved, result_types=out_types, properties=props,
                      attributes=attrs)


def _enum(kind: str, word: str) -> HloAttr:
    return next(a for a in _ATTRS if a.name == f"stablehlo.{kind}")(word)


def _set(cls, parser: Parser, props: dict, word: str, value) -> None:
    if word in ("batching_dims", "contracting_dims"):
        old = props.get("dot_dimension_numbers")
        text = (old.data + ", ") if old else ""
        kind = word.removesuffix("_dims")
        text += f"lhs_{kind}_dimensions = {value[0]}, rhs_{kind}_dimensions = {value[1]}"
        props["dot_dimension_numbers"] = _enum("dot", text)
    elif word in cls.KEYS:
        key = cls.KEYS[word]
        props[key] = (IntegerAttr(value, i64) if isinstance(value, int) else
                      StringAttr(value) if isinstance(value, str) else _ints(value))
    elif word not in ("precision", "algorithm"):  # no effect here: products run in the
        # result's type (f32 for bf16 operands, as the algorithms JAX writes accumulate);
        # anything else might
        parser.raise_error(f"unsupported '{word}' on '{cls.name}'")


def _parse_slice(parser: Parser, props: dict) -> None:
    bounds = []

    def one():
        parts = [parser.parse_integer()]
        while parser.parse_optional_punctuation(":"):
            parts.append(parser.parse_integer())
        bounds.append(parts + [1] * (3 - len(parts)))

    parser.parse_comma_separated_list(parser.Delimiter.SQUARE, one)
    for k, key in enumerate(("start_indices", "limit_indices", "strides")):
        props[key] = _ints([b[k] for b in bounds])


class ConstantOp(HloOp):
    """``stablehlo.constant dense<...> : tensor<...>``."""

    name = "stablehlo.constant"

    @classmethod
    def parse(cls, parser: Parser):
        attrs = parser.parse_optional_attr_dict()
        value = parser.parse_attribute()
        return cls.create(result_types=[value.get_type()], properties={"value": value},
                          attributes=attrs)


class ReduceOp(HloOp):
    """``stablehlo.reduce(%x init: %i), ... applies OP across dimensions = [..] : T`` or
    ``... : T reducer(%a: t, %b: t) (%c: u, %d: u) { body }``."""

    name = "stablehlo.reduce"
    OPERANDS = (2, None)

    @classmethod
    def parse(cls, parser: Parser):
        pairs = []
        while parser.parse_optional_punctuation("("):
            x = parser.parse_unresolved_operand()
            parser.parse_keyword("init")
            parser.parse_punctuation(":")
            pairs.append((x, parser.parse_unresolved_operand()))
            parser.parse_punctuation(")")
            parser.parse_optional_punctuation(",")
        applies = parser.parse_identifier() if parser.parse_optional_keyword("applies") else None
        parser.parse_keyword("across")
        parser.parse_keyword("dimensions")
        parser.parse_punctuation("=")
        dims = _parse_value(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        ft = parser.parse_function_type()
        operands = parser.resolve_operands([p[0] for p in pairs] + [p[1] for p in pairs],
                                           ft.inputs.data, parser.pos)
        scalars = list(ft.inputs.data[len(pairs):])
        if applies is not None:
            region = _applies_region(parser, applies, scalars)
        else:
            parser.parse_keyword("reducer")
            firsts, seconds = [], []
            for _ in pairs:
                parser.parse_punctuation("(")
                firsts.append(parser.parse_argument())
                parser.parse_punctuation(",")
                seconds.append(parser.parse_argument())
                parser.parse_punctuation(")")
            region = parser.parse_region(firsts + seconds)
        return cls.create(operands=operands, result_types=list(ft.outputs),
                          properties={"dimensions": _ints(dims)}, attributes=attrs,
                          regions=[region])


def _applies_region(parser: Parser, name: str, scalars: list[Attribute]) -> Region:
    op_type = parser.ctx.get_optional_op(name)
    if op_type is None:
        parser.raise_error(f"unsupported op '{name}'")
    block = Block(arg_types=scalars * 2)
    n = len(scalars)
    ops = [op_type.create(operands=[block.args[k], block.args[n + k]], result_types=[t])
           for k, t in enumerate(scalars)]
    block.add_ops([*ops, ReturnOp.create(operands=[o.results[0] for o in ops])])
    return Region(block)


class ConvolutionOp(HloOp):
    """``stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1],
    window = {stride = [..], pad = [[..]], lhs_dilate = [..], rhs_dilate = [..],
    reverse = [..]} {attrs} : (T, U) -> V``."""

    name = "stablehlo.convolution"
    OPERANDS = (2, 2)
    ONE_RESULT = True
    _WINDOW: ClassVar = {"stride": "window_strides", "lhs_dilate": "lhs_dilation",
                         "rhs_dilate": "rhs_dilation"}

    @classmethod
    def parse(cls, parser: Parser):
        operands = parser.parse_comma_separated_list(parser.Delimiter.PAREN,
                                                     parser.parse_unresolved_operand)
        props: dict[str, Attribute] = {}
        parser.parse_keyword("dim_numbers")
        parser.parse_punctuation("=")
        words = []
        ends = (MLIRTokenKind.COMMA, MLIRTokenKind.L_BRACE, MLIRTokenKind.COLON)
        while parser._current_token.kind not in ends or words.count("[") != words.count("]"):
            words.append(parser._consume_token().text)
        props["dimension_numbers"] = _enum("conv", "".join(words))
        if parser.parse_optional_punctuation(","):  # the window, unless all defaults
            parser.parse_keyword("window")
            parser.parse_punctuation("=")
            parser.parse_punctuation("{")
            while not parser.parse_optional_punctuation("}"):
                key = parser.parse_identifier()
                parser.parse_punctuation("=")
                value = _parse_value(parser)
                if key == "pad":
                    props["padding"] = ArrayAttr([_ints(p) for p in value])
                elif key == "reverse":
                    props["window_reversal"] = _ints([int(v) for v in value])
                elif key in cls._WINDOW:
                    props[cls._WINDOW[key]] = _ints(value)
                else:
                    parser.raise_error(f"unsupported convolution window field '{key}'")
                parser.parse_optional_punctuation(",")
        attrs = parser.parse_optional_attr_dict()
        props.update(attrs)
        parser.parse_punctuation(":")
        ft = parser.parse_function_type()
        resolved = parser.resolve_operands(operands, ft.inputs.data, parser.pos)
        return cls.create(operands=resolved, result_types=list(ft.outputs), properties=props)


class WhileOp(HloOp):
    """``stablehlo.while(%it = %x, ...) : T, ... cond { } do { }`` (lowered with the other
    control flow, in ``input/control_flow.py``)."""

    name = "stablehlo.while"

    @classmethod
    def parse(cls, parser: Parser):
        pairs = []

        def one():
            arg = parser.parse_argument(expect_type=False)
            parser.parse_punctuation("=")
            pairs.append((arg, parser.parse_unresolved_operand()))

        parser.parse_comma_separated_list(parser.Delimiter.PAREN, one)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        operands = parser.resolve_operands([p[1] for p in pairs], types, parser.pos)
        regions = []
        for keyword in ("cond", "do"):
            parser.parse_keyword(keyword)
            regions.append(parser.parse_region([a.resolve(t) for (a, _), t in zip(pairs, types)]))
        return cls.create(operands=operands, result_types=types, attributes=attrs,
                          regions=regions)


def _typed_by_result(cls, parser: Parser, operands: list, operand_types) -> HloOp:
    """The rest of an op whose type is ``(A, B) -> R`` or only ``R``, the operand types then
    ``operand_types(R)`` (complex's parts, a tuple's elements)."""
    attrs = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    if parser._current_token.kind == MLIRTokenKind.L_PAREN:
        ft = parser.parse_function_type()
        in_types, out_type = list(ft.inputs), ft.outputs.data[0]
    else:
        out_type = parser.parse_type()
        in_types = operand_types(out_type)
    resolved = parser.resolve_operands(operands, in_types, parser.pos)
    return cls.create(operands=resolved, result_types=[out_type], attributes=attrs)


class ComplexOp(HloOp):
    """``stablehlo.complex %re, %im : T``: the one type is the complex result's; the operands
    are its parts (the generic form and ``: (A, A) -> T`` spell them out)."""

    name = "stablehlo.complex"
    OPERANDS = (2, 2)
    ONE_RESULT = True

    @classmethod
    def parse(cls, parser: Parser):
        operands = [parser.parse_unresolved_operand()]
        parser.parse_punctuation(",")
        operands.append(parser.parse_unresolved_operand())

        def parts(out_type) -> list:
            part = getattr(getattr(out_type, "element_type", None), "element_type", None)
            if part is None:
                parser.raise_error("stablehlo.complex makes a tensor of complex numbers")
            return [TensorType(part, out_type.get_shape())] * 2
        return _typed_by_result(cls, parser, operands, parts)


class TopKOp(HloOp):
    """``chlo.top_k(%x, k = 3) : T -> (T, U)``."""

    name = "chlo.top_k"
    OPERANDS = (1, 1)

    @classmethod
    def parse(cls, parser: Parser):
        parser.parse_punctuation("(")
        x = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        parser.parse_keyword("k")
        parser.parse_punctuation("=")
        k = parser.parse_integer()
        parser.parse_punctuation(")")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        ft = parser.parse_function_type() if parser._current_token.kind == \
            MLIRTokenKind.L_PAREN else None
        if ft is None:
            in_type = parser.parse_type()
            parser.parse_punctuation("->")
            outs = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        else:
            in_type, outs = ft.inputs.data[0], list(ft.outputs)
        operand = parser.resolve_operand(x, in_type)
        return cls.create(operands=[operand], result_types=outs,
                          properties={"k": IntegerAttr(k, i64)}, attributes=attrs)


class RngBitGeneratorOp(HloOp):
    """``stablehlo.rng_bit_generator %s, algorithm = THREE_FRY : (T) -> (T, U)``; the
    algorithm is kept as the generic form's ``rng_algorithm`` property."""

    name = "stablehlo.rng_bit_generator"
    OPERANDS = (1, 1)

    @classmethod
    def parse(cls, parser: Parser):
        state = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        parser.parse_keyword("algorithm")
        parser.parse_punctuation("=")
        props: dict[str, Attribute] = {"rng_algorithm": _enum("rng_algorithm",
                                                              parser.parse_identifier())}
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        ft = parser.parse_function_type()
        operand = parser.resolve_operand(state, ft.inputs.data[0])
        return cls.create(operands=[operand], result_types=list(ft.outputs),
                          properties=props, attributes=attrs)


class CustomCallOp(HloOp):
    """``stablehlo.custom_call @target(%a, ...) {attrs} : (T...) -> (R...)``; the target is kept
    as the generic form's ``call_target_name``. The lowering accepts JAX's ``shape_assertion``
    only and refuses every other target by name."""

    name = "stablehlo.custom_call"
    RESULTS = None

    @classmethod
    def parse(cls, parser: Parser):
        target = parser.parse_symbol_name()
        operands = parser.parse_comma_separated_list(parser.Delimiter.PAREN,
                                                     parser.parse_unresolved_operand)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        ft = parser.parse_function_type()
        resolved = parser.resolve_operands(operands, list(ft.inputs), parser.pos)
        return cls.create(operands=resolved, result_types=list(ft.outputs),
                          properties={"call_target_name": target}, attributes=attrs)


@irdl_attr_definition
class TokenType(ParametrizedAttribute, TypeAttribute):
    """``!stablehlo.token``: orders side effects; it carries no data."""

    name = "stablehlo.token"


class CompositeOp(HloOp):
    """``stablehlo.composite "name" %a, ... {decomposition = @f, ...} : (T...) -> (R...)``:
    ``name``, ``decomposition`` and the other attributes kept as the generic form's
    properties."""

    name = "stablehlo.composite"
    RESULTS = None

    @classmethod
    def parse(cls, parser: Parser):
        props: dict[str, Attribute] = {"name": StringAttr(parser.parse_str_literal())}
        operands = parser.parse_optional_undelimited_comma_separated_list(
            parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand) or []
        props.update(parser.parse_optional_attr_dict())
        parser.parse_punctuation(":")
        ft = parser.parse_function_type()
        resolved = parser.resolve_operands(operands, list(ft.inputs), parser.pos)
        return cls.create(operands=resolved, result_types=list(ft.outputs), properties=props)


class TupleOp(HloOp):
    """``stablehlo.tuple %a, %b : tuple<A, B>``: the operand types are the tuple's."""

    name = "stablehlo.tuple"
    ONE_RESULT = True

    @classmethod
    def parse(cls, parser: Parser):
        operands = parser.parse_optional_undelimited_comma_separated_list(
            parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand) or []

        def elements(out_type) -> list:
            if not isinstance(out_type, TupleType):
                parser.raise_error("stablehlo.tuple makes a tuple")
            return list(out_type.types)
        return _typed_by_result(cls, parser, operands, elements)


class GetTupleElementOp(HloOp):
    """``stablehlo.get_tuple_element %t[0] : (tuple<A, B>) -> A``."""

    name = "stablehlo.get_tuple_element"
    OPERANDS = (1, 1)
    ONE_RESULT = True

    @classmethod
    def parse(cls, parser: Parser):
        operand = parser.parse_unresolved_operand()
        parser.parse_punctuation("[")
        index = parser.parse_integer()
        parser.parse_punctuation("]")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        ft = parser.parse_function_type()
        resolved = parser.resolve_operand(operand, ft.inputs.data[0])
        return cls.create(operands=[resolved], result_types=list(ft.outputs),
                          properties={"index": IntegerAttr(index, i64)}, attributes=attrs)


def _generic_only(name: str) -> type[HloOp]:
    """Ops that JAX prints in the generic form. (Ops not declared at all are refused by name
    while parsing, in either form.)"""

    def parse(cls, parser: Parser):
        parser.raise_error(f"'{name}' is only accepted in the generic form")

    return type(name, (HloOp,), {"name": name, "parse": classmethod(parse)})


def _simple(name: str, keys: dict[str, str] | None = None, results: int | None = 1,
            operands: tuple[int, int | None] = (0, None)) -> type[HloOp]:
    return type(name, (HloOp,), {"name": name, "KEYS": keys or {}, "RESULTS": results,
                                 "OPERANDS": operands, "ONE_RESULT": results == 1})


def _arity(name: str) -> tuple[int, int | None]:
    """The operands of an elementwise op (``ELEMENTWISE``, ``CHLO_*``) by its name."""
    n = 3 if name in ("select", "clamp") else 2 if name in _BINARY else 1
    return n, n


ELEMENTWISE = (
    "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power",
    "atan2", "and", "or", "xor", "not", "shift_left", "shift_right_arithmetic",
    "shift_right_logical", "abs", "negate", "exponential", "exponential_minus_one", "log",
    "log_plus_one", "logistic", "sqrt", "rsqrt", "cbrt", "tanh", "sine", "cosine", "tan",
    "floor", "ceil", "round_nearest_afz", "round_nearest_even", "sign", "is_finite", "popcnt",
    "count_leading_zeros", "convert", "bitcast_convert", "compare", "select", "clamp",
    "reduce_precision")
# reduce_precision's custom form says ``format = e5m10``, its generic form the two counts.
_ELEMENTWISE_KEYS = {"reduce_precision": {"format": "format", "exponent_bits": "exponent_bits",
                                          "mantissa_bits": "mantissa_bits"}}
CHLO_ELEMENTWISE = ("erf", "erfc", "tan", "acos", "asin", "atan", "sinh", "cosh", "asinh",
                    "acosh", "atanh", "lgamma", "digamma", "erf_inv", "is_inf", "is_neg_inf",
                    "is_pos_inf", "square", "next_after", "bessel_i1e", "zeta", "polygamma")
CHLO_BROADCAST = ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum",
                  "power", "atan2", "and", "or", "xor", "shift_left", "shift_right_arithmetic",
                  "shift_right_logical", "compare", "select", "polygamma", "zeta", "complex")

_BINARY = frozenset({
    "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "atan2",
    "and", "or", "xor", "shift_left", "shift_right_arithmetic", "shift_right_logical", "compare",
    "next_after", "polygamma", "zeta", "complex"})

_SHAPE_OPS = {
    "broadcast_in_dim": {"dims": "broadcast_dimensions"},
    "reshape": {},
    "transpose": {"dims": "permutation"},
    "slice": {},
    "concatenate": {"dim": "dimension"},
    "pad": {"low": "edge_padding_low", "high": "edge_padding_high",
            "interior": "interior_padding"},
    "iota": {"dim": "iota_dimension"},
    "reverse": {"dims": "dimensions"},
    "dot_general": {},
    "dot": {},
    "dynamic_slice": {"sizes": "slice_sizes"},
    "dynamic_update_slice": {},
    "get_dimension_size": {"dim": "dimension"},
    "dynamic_broadcast_in_dim": {"dims": "broadcast_dimensions"},
    "dynamic_iota": {"dim": "iota_dimension"},
    "dynamic_reshape": {},
    "real_dynamic_slice": {},
    "dynamic_pad": {},
}
_SHAPE_ARITY = {"concatenate": (1, None), "pad": (2, 2), "iota": (0, 0), "dot_general": (2, 2),
                "dot": (2, 2), "dynamic_slice": (1, None), "dynamic_update_slice": (2, None),
                "dynamic_broadcast_in_dim": (2, 2), "dynamic_iota": (1, 1),
                "dynamic_reshape": (2, 2), "real_dynamic_slice": (4, 4), "dynamic_pad": (5, 5)}
ReturnOp = _simple("stablehlo.return", results=0)
ReturnOp.traits = traits_def(IsTerminator())

STABLEHLO_OPS = [
    ConstantOp, ReduceOp, ConvolutionOp, WhileOp, ReturnOp, RngBitGeneratorOp, CustomCallOp,
    _simple("stablehlo.optimization_barrier", results=None),
    ComplexOp, CompositeOp, TupleOp, GetTupleElementOp,
    _simple("stablehlo.einsum", {"config": "einsum_config"}, operands=(2, 2)),
    _simple("stablehlo.unary_einsum", {"config": "einsum_config"}, operands=(1, 1)),
    _simple("stablehlo.replica_id", operands=(0, 0)),
    _simple("stablehlo.partition_id", operands=(0, 0)),
    _simple("stablehlo.after_all"),
    _simple("stablehlo.create_token", operands=(0, 0)),
    _simple("stablehlo.cholesky", {"lower": "lower"}, operands=(1, 1)),
    _simple("stablehlo.real", operands=(1, 1)),
    _simple("stablehlo.imag", operands=(1, 1)),
    _simple("stablehlo.fft", {"type": "fft_type", "length": "fft_length"}, operands=(1, 1)),
    _simple("stablehlo.rng", {"distribution": "rng_distribution"}, operands=(3, 3)),
    *[_simple(f"stablehlo.{n}", _ELEMENTWISE_KEYS.get(n), operands=_arity(n)) for n in ELEMENTWISE],
    *[_simple(f"stablehlo.{n}", keys, operands=_SHAPE_ARITY.get(n, (1, 1)))
      for n, keys in _SHAPE_OPS.items()],
    *[_generic_only(f"stablehlo.{n}") for n in (
        "reduce_window", "gather", "scatter", "select_and_scatter", "sort", "if", "case", "map",
        "batch_norm_inference", "broadcast", "torch_index_select", "dynamic_conv", "dynamic_gather",
        "triangular_solve", "batch_norm_training", "batch_norm_grad", "all_reduce",
        "reduce_scatter")],
    # JAX prints these generic; ``%x {attrs} : (T) -> T`` parses too (they have no region).
    *[_simple(f"stablehlo.{n}", results=None, operands=(1, None)) for n in (
        "all_gather", "all_to_all", "collective_permute", "collective_broadcast")],
]
CHLO_OPS = [
    *[_simple(f"chlo.{n}", operands=_arity(n)) for n in CHLO_ELEMENTWISE],
    *[_simple(f"chlo.broadcast_{n}", {"broadcast_dimensions": "broadcast_dimensions"},
              operands=_arity(n)) for n in CHLO_BROADCAST],
    TopKOp,
]

StableHLO = Dialect("stablehlo", STABLEHLO_OPS,
                    [TokenType, *[a for a in _ATTRS if a.name.startswith("s")]])
CHLO = Dialect("chlo", CHLO_OPS, [a for a in _ATTRS if a.name.startswith("c")])

