"""linalg named ops that xDSL 0.74 lacks, declared the way xDSL declares its own.

Each op is a name, its indexing maps and iterator types, and the scalar body MLIR gives it
(``linalg`` OpDSL definitions). Contractions cast both operands to the accumulator's element
type before multiplying, as MLIR's ``cast_signed`` does; that is also why ``linalg.matmul``
is redeclared here and replaces xDSL's (whose body multiplies the operands uncast).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from xdsl.builder import Builder
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import AffineMapAttr, AnyFloat, ArrayAttr, FloatAttr, IntegerType
from xdsl.dialects.linalg.abstract_ops import ElementwiseOperation, NamedOperation
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.dialects.linalg.ops import YieldOp
from xdsl.ir import Attribute, BlockArgument, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.irdl import irdl_op_definition, opt_prop_def
from xdsl.parser import Parser
from xdsl.printer import Printer


def convert(value: SSAValue, to: Attribute) -> SSAValue:
    """``cast_signed``: the arith cast that takes ``value`` to type ``to`` (none if equal)."""
    src = value.type
    if src == to:
        return value
    if isinstance(src, AnyFloat) and isinstance(to, AnyFloat):
        wider = to.bitwidth > src.bitwidth
        return (arith.ExtFOp(value, to) if wider else arith.TruncFOp(value, to)).result
    if isinstance(src, IntegerType) and isinstance(to, IntegerType):
        wider = to.width.data > src.width.data
        return (arith.ExtSIOp(value, to) if wider else arith.TruncIOp(value, to)).result
    if isinstance(to, AnyFloat):
        return arith.SIToFPOp(value, to).result
    return arith.FPToSIOp(value, to).result


# ---- elementwise --------------------------------------------------------------------------------

class _Elementwise(ElementwiseOperation):
    """A named elementwise op: ``BODY(args) -> yielded value`` over the inputs' elements."""

    BODY: ClassVar[Callable[[Sequence[SSAValue]], SSAValue]]

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        arg_types = cls.body_arg_types((*inputs, *outputs))

        @Builder.implicit_region(arg_types)
        def hidden_region(args: tuple[BlockArgument, ...]) -> None:
            YieldOp(convert(cls.BODY(args[:len(inputs)]), arg_types[-1]))

        return hidden_region


def _is_float(value: SSAValue) -> bool:
    return isinstance(value.type, AnyFloat)


def _one(like: SSAValue) -> SSAValue:
    return arith.ConstantOp(FloatAttr(1.0, like.type)).result


@irdl_op_definition
class AbsOp(_Elementwise):
    name = "linalg.abs"
    BODY: ClassVar = staticmethod(
        lambda a: (math.AbsFOp if _is_float(a[0]) else math.AbsIOp)(a[0]).result)


@irdl_op_definition
class NegfOp(_Elementwise):
    name = "linalg.negf"
    BODY: ClassVar = staticmethod(lambda a: arith.NegfOp(a[0]).result)


@irdl_op_definition
class FloorOp(_Elementwise):
    name = "linalg.floor"
    BODY: ClassVar = staticmethod(lambda a: math.FloorOp(a[0]).result)


@irdl_op_definition
class CeilOp(_Elementwise):
    name = "linalg.ceil"
    BODY: ClassVar = staticmethod(lambda a: math.CeilOp(a[0]).result)


@irdl_op_definition
class RoundOp(_Elementwise):
    name = "linalg.round"
    BODY: ClassVar = staticmethod(lambda a: math.RoundOp(a[0]).result)


@irdl_op_definition
class ErfOp(_Elementwise):
    name = "linalg.erf"
    BODY: ClassVar = staticmethod(lambda a: math.ErfOp(a[0]).result)


@irdl_op_definition
class TanhOp(_Elementwise):
    name = "linalg.tanh"
    BODY: ClassVar = staticmethod(lambda a: math.TanhOp(a[0]).result)


@irdl_op_definition
class RsqrtOp(_Elementwise):
    name = "linalg.rsqrt"
    BODY: ClassVar = staticmethod(lambda a: math.RsqrtOp(a[0]).result)


@irdl_op_definition
class ReciprocalOp(_Elementwise):
    name = "linalg.reciprocal"
    BODY: ClassVar = staticmethod(lambda a: arith.DivfOp(_one(a[0]), a[0]).result)


@irdl_op_definition
class SquareOp(_Elementwise):
    name = "linalg.square"
    BODY: ClassVar = staticmethod(
        lambda a: (arith.MulfOp if _is_float(a[0]) else arith.MuliOp)(a[0], a[0]).result)


@irdl_op_definition
class DivOp(_Elementwise):
    name = "linalg.div"
    BODY: ClassVar = staticmethod(
        lambda a: (arith.DivfOp if _is_float(a[0]) else arith.DivSIOp)(a[0], a[1]).result)


@irdl_op_definition
class DivUnsignedOp(_Elementwise):
    name = "linalg.div_unsigned"
    BODY: ClassVar = staticmethod(lambda a: arith.DivUIOp(a[0], a[1]).result)


@irdl_op_definition
class PowfOp(_Elementwise):
    name = "linalg.powf"
    BODY: ClassVar = staticmethod(lambda a: math.PowFOp(a[0], a[1]).result)


# ---- contractions -------------------------------------------------------------------------------

def _contraction_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
    arg_types = NamedOperation.body_arg_types((*inputs, *outputs))
    acc_type = arg_types[-1]
    mul, add = ((arith.MulfOp, arith.AddfOp) if isinstance(acc_type, AnyFloat)
                else (arith.MuliOp, arith.AddiOp))

    @Builder.implicit_region(arg_types)
    def hidden_region(args: tuple[BlockArgument, ...]) -> None:
        product = mul(convert(args[0], acc_type), convert(args[1], acc_type))
        YieldOp(add(args[2], product))

    return hidden_region


class _Contraction(NamedOperation):
    """``out[...] += lhs[...] * rhs[...]`` over ``ITERATORS`` loops; ``MAPS`` unless the op
    spells its own ``indexing_maps`` (MLIR's form for transposed operands)."""

    PRINT_ATTRS_IN_FRONT: ClassVar[bool] = True
    indexing_maps = opt_prop_def(ArrayAttr[AffineMapAttr])
    MAPS: ClassVar[tuple[AffineMap, ...]]
    ITERATORS: ClassVar[str]  # one letter per loop: p(arallel) or r(eduction)

    get_hidden_region = classmethod(_contraction_region)

    @classmethod
    def parse(cls, parser: Parser):
        maps = None
        if parser.parse_optional_keyword("indexing_maps"):
            parser.parse_punctuation("=")
            maps = parser.parse_attribute()
        op = super().parse(parser)
        if maps is not None:
            op.properties["indexing_maps"] = maps
        return op

    def print(self, printer: Printer):
        if self.indexing_maps is not None:
            printer.print_string(" indexing_maps = ")
            printer.print_attribute(self.indexing_maps)
        super().print(printer)

    def get_default_indexing_maps(self) -> Sequence[AffineMap]:
        if self.indexing_maps is not None:
            return tuple(m.data for m in self.indexing_maps.data)
        return self.MAPS

    def get_iterator_types(self) -> ArrayAttr[IteratorTypeAttr]:
        return ArrayAttr(IteratorTypeAttr.parallel() if c == "p" else IteratorTypeAttr.reduction()
                         for c in self.ITERATORS)


@irdl_op_definition
class MatmulOp(_Contraction):
    name = "linalg.matmul"
    ITERATORS: ClassVar[str] = "ppr"
    MAPS: ClassVar[tuple[AffineMap, ...]] = (AffineMap.from_callable(lambda i, j, k: (i, k)),
            AffineMap.from_callable(lambda i, j, k: (k, j)),
            AffineMap.from_callable(lambda i, j, k: (i, j)))


@irdl_op_definition
class BatchMatmulOp(_Contraction):
    name = "linalg.batch_matmul"
    ITERATORS: ClassVar[str] = "pppr"
    MAPS: ClassVar[tuple[AffineMap, ...]] = (AffineMap.from_callable(lambda b, i, j, k: (b, i, k)),
            AffineMap.from_callable(lambda b, i, j, k: (b, k, j)),
            AffineMap.from_callable(lambda b, i, j, k: (b, i, j)))


@irdl_op_definition
class MatvecOp(_Contraction):
    name = "linalg.matvec"
    ITERATORS: ClassVar[str] = "pr"
    MAPS: ClassVar[tuple[AffineMap, ...]] = (AffineMap.from_callable(lambda i, k: (i, k)),
            AffineMap.from_callable(lambda i, k: (k,)),
            AffineMap.from_callable(lambda i, k: (i,)))


@irdl_op_definition
class VecmatOp(_Contraction):
    name = "linalg.vecmat"
    ITERATORS: ClassVar[str] = "pr"
    MAPS: ClassVar[tuple[AffineMap, ...]] = (AffineMap.from_callable(lambda j, k: (k,)),
            AffineMap.from_callable(lambda j, k: (k, j)),
            AffineMap.from_callable(lambda j, k: (j,)))


@irdl_op_definition
class DotOp(_Contraction):
    name = "linalg.dot"
    ITERATORS: ClassVar[str] = "r"
    MAPS: ClassVar[tuple[AffineMap, ...]] = (AffineMap.from_callable(lambda k: (k,)),
            AffineMap.from_callable(lambda k: (k,)),
            AffineMap(1, 0, ()))


# Loaded next to xDSL's linalg ops; MatmulOp replaces xDSL's.
LINALG_OPS = (
    AbsOp, NegfOp, FloorOp, CeilOp, RoundOp, ErfOp, TanhOp, RsqrtOp, ReciprocalOp, SquareOp,
    DivOp, DivUnsignedOp, PowfOp, MatmulOp, BatchMatmulOp, MatvecOp, VecmatOp, DotOp,
)
