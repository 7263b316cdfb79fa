"""linalg ops that xDSL 0.74 lacks or declares unlike MLIR, declared the way xDSL declares its own.

Each op is a name, its indexing maps and iterator types, and the scalar body MLIR gives it
(``linalg`` OpDSL definitions). Contractions, convolutions and pooling cast their operands to
the accumulator's element type first, as MLIR's ``cast_signed`` does; that is also why
``linalg.matmul`` and xDSL's convolution and pooling ops are redeclared here and replace
xDSL's (whose bodies use the operands uncast, and whose ``strides``/``dilations`` are
required where MLIR defaults them to 1). ``linalg.add`` is redeclared for booleans, whose sum
OpDSL builds as ``or`` (xDSL's ``addi`` is ``xor``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import ClassVar

from xdsl.builder import Builder
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import (
    I64,
    AffineMapAttr,
    AnyFloat,
    ArrayAttr,
    DenseIntElementsAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
)
from xdsl.dialects.linalg.abstract_ops import ElementwiseOperation, NamedOperation
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.dialects.linalg.ops import YieldOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException


def convert(value: SSAValue, to: Attribute, unsigned: bool = False) -> SSAValue:
    """``cast_signed`` (``cast_unsigned``): the arith cast that takes ``value`` to type ``to``
    (none if equal), reading integers as signed (unsigned)."""
    src = value.type
    if src == to:
        return value
    if isinstance(src, AnyFloat) and isinstance(to, AnyFloat):
        wider = to.bitwidth > src.bitwidth
        return (arith.ExtFOp(value, to) if wider else arith.TruncFOp(value, to)).result
    if isinstance(src, IntegerType) and isinstance(to, IntegerType):
        if to.width.data < src.width.data:
            return arith.TruncIOp(value, to).result
        return (arith.ExtUIOp if unsigned else arith.ExtSIOp)(value, to).result
    if isinstance(to, AnyFloat):
        return (arith.UIToFPOp if unsigned else arith.SIToFPOp)(value, to).result
    return (arith.FPToUIOp if unsigned else arith.FPToSIOp)(value, to).result


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


def _is_bool(t: Attribute) -> bool:
    """OpDSL's sums and products of booleans are ``or`` and ``and`` (as MLIR builds them)."""
    return isinstance(t, IntegerType) and t.width.data == 1


def _one(like: SSAValue) -> SSAValue:
    return arith.ConstantOp(FloatAttr(1.0, like.type)).result


@irdl_op_definition
class AddOp(_Elementwise):
    name = "linalg.add"
    BODY: ClassVar = staticmethod(lambda a: (
        arith.AddfOp if _is_float(a[0]) else arith.OrIOp if _is_bool(a[0].type)
        else arith.AddiOp)(a[0], a[1]).result)


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
                else (arith.AndIOp, arith.OrIOp) if _is_bool(acc_type)
                else (arith.MuliOp, arith.AddiOp))

    @Builder.implicit_region(arg_types)
    def hidden_region(args: tuple[BlockArgument, ...]) -> None:
        product = mul(convert(args[0], acc_type), convert(args[1], acc_type))
        YieldOp(add(args[2], product))

    return hidden_region


def _iterators(letters: str) -> ArrayAttr[IteratorTypeAttr]:
    """One iterator type per letter: p(arallel) or r(eduction)."""
    return ArrayAttr(IteratorTypeAttr.parallel() if c == "p" else IteratorTypeAttr.reduction()
                     for c in letters)


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
        return _iterators(self.ITERATORS)


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
class BatchMatvecOp(_Contraction):
    name = "linalg.batch_matvec"
    ITERATORS: ClassVar[str] = "ppr"
    MAPS: ClassVar[tuple[AffineMap, ...]] = (AffineMap.from_callable(lambda b, i, k: (b, i, k)),
            AffineMap.from_callable(lambda b, i, k: (b, k)),
            AffineMap.from_callable(lambda b, i, k: (b, i)))


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


@irdl_op_definition
class MatmulTransposeAOp(_Contraction):
    name = "linalg.matmul_transpose_a"
    ITERATORS: ClassVar[str] = "ppr"
    MAPS: ClassVar[tuple[AffineMap, ...]] = (AffineMap.from_callable(lambda m, n, k: (k, m)),
            AffineMap.from_callable(lambda m, n, k: (k, n)),
            AffineMap.from_callable(lambda m, n, k: (m, n)))


@irdl_op_definition
class MatmulTransposeBOp(_Contraction):
    name = "linalg.matmul_transpose_b"
    ITERATORS: ClassVar[str] = "ppr"
    MAPS: ClassVar[tuple[AffineMap, ...]] = (AffineMap.from_callable(lambda m, n, k: (m, k)),
            AffineMap.from_callable(lambda m, n, k: (n, k)),
            AffineMap.from_callable(lambda m, n, k: (m, n)))


@irdl_op_definition
class BatchMatmulTransposeAOp(_Contraction):
    name = "linalg.batch_matmul_transpose_a"
    ITERATORS: ClassVar[str] = "pppr"
    MAPS: ClassVar[tuple[AffineMap, ...]] = (AffineMap.from_callable(lambda b, m, n, k: (b, k, m)),
            AffineMap.from_callable(lambda b, m, n, k: (b, k, n)),
            AffineMap.from_callable(lambda b, m, n, k: (b, m, n)))


@irdl_op_definition
class BatchMatmulTransposeBOp(_Contraction):
    name = "linalg.batch_matmul_transpose_b"
    ITERATORS: ClassVar[str] = "pppr"
    MAPS: ClassVar[tuple[AffineMap, ...]] = (AffineMap.from_callable(lambda b, m, n, k: (b, m, k)),
            AffineMap.from_callable(lambda b, m, n, k: (b, n, k)),
            AffineMap.from_callable(lambda b, m, n, k: (b, m, n)))


@irdl_op_definition
class BatchReduceMatmulOp(_Contraction):
    name = "linalg.batch_reduce_matmul"
    ITERATORS: ClassVar[str] = "rppr"
    MAPS: ClassVar[tuple[AffineMap, ...]] = (AffineMap.from_callable(lambda b, m, n, k: (b, m, k)),
            AffineMap.from_callable(lambda b, m, n, k: (b, k, n)),
            AffineMap.from_callable(lambda b, m, n, k: (m, n)))


@irdl_op_definition
class BatchVecmatOp(_Contraction):
    name = "linalg.batch_vecmat"
    ITERATORS: ClassVar[str] = "ppr"
    MAPS: ClassVar[tuple[AffineMap, ...]] = (AffineMap.from_callable(lambda b, n, k: (b, k)),
            AffineMap.from_callable(lambda b, n, k: (b, k, n)),
            AffineMap.from_callable(lambda b, n, k: (b, n)))


@irdl_op_definition
class Mmt4DOp(_Contraction):
    """A matmul of tiled operands: ``[M1, K1, M0, K0] x [N1, K1, N0, K0] -> [M1, N1, M0, N0]``."""

    name = "linalg.mmt4d"
    ITERATORS: ClassVar[str] = "pprppr"
    MAPS: ClassVar[tuple[AffineMap, ...]] = (
        AffineMap.from_callable(lambda m1, n1, k1, m0, n0, k0: (m1, k1, m0, k0)),
        AffineMap.from_callable(lambda m1, n1, k1, m0, n0, k0: (n1, k1, n0, k0)),
        AffineMap.from_callable(lambda m1, n1, k1, m0, n0, k0: (m1, n1, m0, n0)))


@irdl_op_definition
class BatchMmt4DOp(_Contraction):
    name = "linalg.batch_mmt4d"
    ITERATORS: ClassVar[str] = "ppprppr"
    MAPS: ClassVar[tuple[AffineMap, ...]] = (
        AffineMap.from_callable(lambda b, m1, n1, k1, m0, n0, k0: (b, m1, k1, m0, k0)),
        AffineMap.from_callable(lambda b, m1, n1, k1, m0, n0, k0: (b, n1, k1, n0, k0)),
        AffineMap.from_callable(lambda b, m1, n1, k1, m0, n0, k0: (b, m1, n1, m0, n0)))


@irdl_op_definition
class ContractOp(_Contraction):
    """``linalg.contract``: a product summed over the loops its output's map leaves out; the
    maps are required (there are no default ones)."""

    name = "linalg.contract"

    def verify_(self) -> None:
        if self.indexing_maps is None:
            raise VerifyException("linalg.contract needs 'indexing_maps'")
        super().verify_()

    def get_iterator_types(self) -> ArrayAttr[IteratorTypeAttr]:
        out = self.indexing_maps.data[-1].data
        used = {e.position for e in out.results if isinstance(e, AffineDimExpr)}
        return _iterators("".join("p" if d in used else "r" for d in range(out.num_dims)))


def _quantized_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
    """``out += (cast(a) - cast(a_zero)) * (cast(b) - cast(b_zero))`` (OpDSL's ``_q`` ops)."""
    arg_types = NamedOperation.body_arg_types((*inputs, *outputs))
    acc_type = arg_types[-1]
    sub, mul, add = ((arith.SubfOp, arith.MulfOp, arith.AddfOp) if isinstance(acc_type, AnyFloat)
                     else (arith.SubiOp, arith.MuliOp, arith.AddiOp))

    @Builder.implicit_region(arg_types)
    def hidden_region(args: tuple[BlockArgument, ...]) -> None:
        a, b, a_zero, b_zero, acc = args
        lhs = sub(convert(a, acc_type), convert(a_zero, acc_type))
        rhs = sub(convert(b, acc_type), convert(b_zero, acc_type))
        YieldOp(add(acc, mul(lhs, rhs)))

    return hidden_region


def _with_zero_points(maps: tuple[AffineMap, ...]) -> tuple[AffineMap, ...]:
    """A contraction's (lhs, rhs, out) maps with the two scalar zero points' before out."""
    scalar = AffineMap(maps[0].num_dims, 0, ())
    return (maps[0], maps[1], scalar, scalar, maps[2])


@irdl_op_definition
class QuantizedMatmulOp(_Contraction):
    name = "linalg.quantized_matmul"
    ITERATORS: ClassVar[str] = "ppr"
    MAPS: ClassVar[tuple[AffineMap, ...]] = _with_zero_points(MatmulOp.MAPS)
    get_hidden_region = classmethod(_quantized_region)


@irdl_op_definition
class QuantizedBatchMatmulOp(_Contraction):
    name = "linalg.quantized_batch_matmul"
    ITERATORS: ClassVar[str] = "pppr"
    MAPS: ClassVar[tuple[AffineMap, ...]] = _with_zero_points(BatchMatmulOp.MAPS)
    get_hidden_region = classmethod(_quantized_region)


# ---- convolutions and pooling -------------------------------------------------------------------

class _Windowed(NamedOperation):
    """An op that slides a window over ``SPATIAL`` dims (``"DHW"``, ``"HW"`` or ``"W"``). ``INDEXING``
    takes ``S`` (``S.SH``, ``S.DW``, ...: the strides and dilations, 1 when absent) and one
    dim per loop, and returns each operand's index as MLIR's OpDSL definition writes it."""

    PRINT_ATTRS_IN_FRONT: ClassVar[bool] = True
    strides = opt_prop_def(DenseIntElementsAttr)
    dilations = opt_prop_def(DenseIntElementsAttr)
    SPATIAL: ClassVar[str] = "HW"
    ITERATORS: ClassVar[str]  # one letter per loop: p(arallel) or r(eduction)
    INDEXING: ClassVar[Callable[..., tuple[tuple, ...]]]
    QUANTIZED: ClassVar[bool] = False  # a ``_q`` op: zero points of input and filter follow them

    def _window(self, attr: DenseIntElementsAttr | None) -> tuple[int, ...]:
        return (1,) * len(self.SPATIAL) if attr is None else tuple(attr.get_values())

    def verify_(self) -> None:
        for key in ("strides", "dilations"):
            values = self._window(getattr(self, key))
            if len(values) != len(self.SPATIAL) or min(values) < 1:
                raise VerifyException(f"{key} must be {len(self.SPATIAL)} positive integers, "
                                      f"got {list(values)}")
        super().verify_()

    def get_default_indexing_maps(self) -> Sequence[AffineMap]:
        strides, dilations = self._window(self.strides), self._window(self.dilations)
        S = SimpleNamespace(**{f"S{d}": s for d, s in zip(self.SPATIAL, strides)},
                            **{f"D{d}": s for d, s in zip(self.SPATIAL, dilations)})
        num_loops = len(self.ITERATORS)
        dims = [AffineDimExpr(d) for d in range(num_loops)]
        maps = tuple(AffineMap(num_loops, 0, index) for index in self.INDEXING(S, *dims))
        return _with_zero_points(maps) if self.QUANTIZED else maps

    def get_iterator_types(self) -> ArrayAttr[IteratorTypeAttr]:
        return _iterators(self.ITERATORS)


class _Convolution(_Windowed):
    """``out[...] += input[...] * filter[...]``, both cast to the accumulator's type."""

    get_hidden_region = classmethod(_contraction_region)


@irdl_op_definition
class Conv1DNcwFcwOp(_Convolution):
    name = "linalg.conv_1d_ncw_fcw"
    SPATIAL: ClassVar[str] = "W"
    ITERATORS: ClassVar[str] = "ppprr"
    INDEXING: ClassVar = staticmethod(lambda S, n, f, ow, c, kw: (
        (n, c, ow * S.SW + kw * S.DW), (f, c, kw), (n, f, ow)))


@irdl_op_definition
class Conv1DNwcWcfOp(_Convolution):
    name = "linalg.conv_1d_nwc_wcf"
    SPATIAL: ClassVar[str] = "W"
    ITERATORS: ClassVar[str] = "ppprr"
    INDEXING: ClassVar = staticmethod(lambda S, n, ow, f, kw, c: (
        (n, ow * S.SW + kw * S.DW, c), (kw, c, f), (n, ow, f)))


@irdl_op_definition
class Conv2DNchwFchwOp(_Convolution):
    name = "linalg.conv_2d_nchw_fchw"
    ITERATORS: ClassVar[str] = "pppprrr"
    INDEXING: ClassVar = staticmethod(lambda S, n, f, oh, ow, c, kh, kw: (
        (n, c, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW), (f, c, kh, kw), (n, f, oh, ow)))


@irdl_op_definition
class Conv2DNhwcHwcfOp(_Convolution):
    name = "linalg.conv_2d_nhwc_hwcf"
    ITERATORS: ClassVar[str] = "pppprrr"
    INDEXING: ClassVar = staticmethod(lambda S, n, oh, ow, f, kh, kw, c: (
        (n, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW, c), (kh, kw, c, f), (n, oh, ow, f)))


@irdl_op_definition
class Conv2DNhwcFhwcOp(_Convolution):
    name = "linalg.conv_2d_nhwc_fhwc"
    ITERATORS: ClassVar[str] = "pppprrr"
    INDEXING: ClassVar = staticmethod(lambda S, n, oh, ow, f, kh, kw, c: (
        (n, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW, c), (f, kh, kw, c), (n, oh, ow, f)))


@irdl_op_definition
class Conv2DNgchwFgchwOp(_Convolution):
    name = "linalg.conv_2d_ngchw_fgchw"
    ITERATORS: ClassVar[str] = "ppppprrr"
    INDEXING: ClassVar = staticmethod(lambda S, n, g, fg, oh, ow, c, kh, kw: (
        (n, g, c, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW), (fg, g, c, kh, kw),
        (n, g, fg, oh, ow)))


@irdl_op_definition
class Conv2DNgchwGfchwOp(_Convolution):
    name = "linalg.conv_2d_ngchw_gfchw"
    ITERATORS: ClassVar[str] = "ppppprrr"
    INDEXING: ClassVar = staticmethod(lambda S, n, g, fg, oh, ow, c, kh, kw: (
        (n, g, c, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW), (g, fg, c, kh, kw),
        (n, g, fg, oh, ow)))


@irdl_op_definition
class Conv2DNhwgcGfhwcOp(_Convolution):
    name = "linalg.conv_2d_nhwgc_gfhwc"
    ITERATORS: ClassVar[str] = "ppppprrr"
    INDEXING: ClassVar = staticmethod(lambda S, n, oh, ow, g, fg, kh, kw, c: (
        (n, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW, g, c), (g, fg, kh, kw, c),
        (n, oh, ow, g, fg)))


@irdl_op_definition
class Conv3DNcdhwFcdhwOp(_Convolution):
    name = "linalg.conv_3d_ncdhw_fcdhw"
    SPATIAL: ClassVar[str] = "DHW"
    ITERATORS: ClassVar[str] = "ppppprrrr"
    INDEXING: ClassVar = staticmethod(lambda S, n, f, od, oh, ow, c, kd, kh, kw: (
        (n, c, od * S.SD + kd * S.DD, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW),
        (f, c, kd, kh, kw), (n, f, od, oh, ow)))


@irdl_op_definition
class Conv3DNdhwcDhwcfOp(_Convolution):
    name = "linalg.conv_3d_ndhwc_dhwcf"
    SPATIAL: ClassVar[str] = "DHW"
    ITERATORS: ClassVar[str] = "ppppprrrr"
    INDEXING: ClassVar = staticmethod(lambda S, n, od, oh, ow, f, kd, kh, kw, c: (
        (n, od * S.SD + kd * S.DD, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW, c),
        (kd, kh, kw, c, f), (n, od, oh, ow, f)))


@irdl_op_definition
class DepthwiseConv2DNchwChwOp(_Convolution):
    name = "linalg.depthwise_conv_2d_nchw_chw"
    ITERATORS: ClassVar[str] = "pppprr"
    INDEXING: ClassVar = staticmethod(lambda S, n, ic, oh, ow, kh, kw: (
        (n, ic, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW), (ic, kh, kw), (n, ic, oh, ow)))


@irdl_op_definition
class DepthwiseConv2DNhwcHwcOp(_Convolution):
    name = "linalg.depthwise_conv_2d_nhwc_hwc"
    ITERATORS: ClassVar[str] = "pppprr"
    INDEXING: ClassVar = staticmethod(lambda S, n, oh, ow, ic, kh, kw: (
        (n, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW, ic), (kh, kw, ic), (n, oh, ow, ic)))


@irdl_op_definition
class DepthwiseConv2DNhwcHwcmOp(_Convolution):
    name = "linalg.depthwise_conv_2d_nhwc_hwcm"
    ITERATORS: ClassVar[str] = "ppppprr"
    INDEXING: ClassVar = staticmethod(lambda S, n, oh, ow, ic, cm, kh, kw: (
        (n, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW, ic), (kh, kw, ic, cm),
        (n, oh, ow, ic, cm)))


@irdl_op_definition
class DepthwiseConv1DNwcWcOp(_Convolution):
    name = "linalg.depthwise_conv_1d_nwc_wc"
    SPATIAL: ClassVar[str] = "W"
    ITERATORS: ClassVar[str] = "pppr"
    INDEXING: ClassVar = staticmethod(lambda S, n, ow, ic, kw: (
        (n, ow * S.SW + kw * S.DW, ic), (kw, ic), (n, ow, ic)))


@irdl_op_definition
class DepthwiseConv1DNcwCwOp(_Convolution):
    name = "linalg.depthwise_conv_1d_ncw_cw"
    SPATIAL: ClassVar[str] = "W"
    ITERATORS: ClassVar[str] = "pppr"
    INDEXING: ClassVar = staticmethod(lambda S, n, ic, ow, kw: (
        (n, ic, ow * S.SW + kw * S.DW), (ic, kw), (n, ic, ow)))


@irdl_op_definition
class DepthwiseConv1DNwcWcmOp(_Convolution):
    name = "linalg.depthwise_conv_1d_nwc_wcm"
    SPATIAL: ClassVar[str] = "W"
    ITERATORS: ClassVar[str] = "ppppr"
    INDEXING: ClassVar = staticmethod(lambda S, n, ow, ic, cm, kw: (
        (n, ow * S.SW + kw * S.DW, ic), (kw, ic, cm), (n, ow, ic, cm)))


@irdl_op_definition
class DepthwiseConv3DNdhwcDhwcOp(_Convolution):
    name = "linalg.depthwise_conv_3d_ndhwc_dhwc"
    SPATIAL: ClassVar[str] = "DHW"
    ITERATORS: ClassVar[str] = "ppppprrr"
    INDEXING: ClassVar = staticmethod(lambda S, n, od, oh, ow, ic, kd, kh, kw: (
        (n, od * S.SD + kd * S.DD, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW, ic),
        (kd, kh, kw, ic), (n, od, oh, ow, ic)))


@irdl_op_definition
class DepthwiseConv3DNcdhwCdhwOp(_Convolution):
    name = "linalg.depthwise_conv_3d_ncdhw_cdhw"
    SPATIAL: ClassVar[str] = "DHW"
    ITERATORS: ClassVar[str] = "ppppprrr"
    INDEXING: ClassVar = staticmethod(lambda S, n, ic, od, oh, ow, kd, kh, kw: (
        (n, ic, od * S.SD + kd * S.DD, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW),
        (ic, kd, kh, kw), (n, ic, od, oh, ow)))


@irdl_op_definition
class DepthwiseConv3DNdhwcDhwcmOp(_Convolution):
    name = "linalg.depthwise_conv_3d_ndhwc_dhwcm"
    SPATIAL: ClassVar[str] = "DHW"
    ITERATORS: ClassVar[str] = "pppppprrr"
    INDEXING: ClassVar = staticmethod(lambda S, n, od, oh, ow, ic, cm, kd, kh, kw: (
        (n, od * S.SD + kd * S.DD, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW, ic),
        (kd, kh, kw, ic, cm), (n, od, oh, ow, ic, cm)))


# conv_1d / conv_2d / conv_3d: one channel, no batch, unit strides (they take no attributes).
@irdl_op_definition
class Conv1DOp(_Convolution):
    name = "linalg.conv_1d"
    SPATIAL: ClassVar[str] = "W"
    ITERATORS: ClassVar[str] = "pr"
    INDEXING: ClassVar = staticmethod(lambda S, ow, kw: ((ow + kw,), (kw,), (ow,)))


@irdl_op_definition
class Conv2DOp(_Convolution):
    name = "linalg.conv_2d"
    ITERATORS: ClassVar[str] = "pprr"
    INDEXING: ClassVar = staticmethod(lambda S, oh, ow, kh, kw: (
        (oh + kh, ow + kw), (kh, kw), (oh, ow)))


@irdl_op_definition
class Conv3DOp(_Convolution):
    name = "linalg.conv_3d"
    SPATIAL: ClassVar[str] = "DHW"
    ITERATORS: ClassVar[str] = "ppprrr"
    INDEXING: ClassVar = staticmethod(lambda S, od, oh, ow, kd, kh, kw: (
        (od + kd, oh + kh, ow + kw), (kd, kh, kw), (od, oh, ow)))


def _declare(name: str, base: type, constants: dict, methods: dict | None = None) -> type:
    """An op class made from its constants (each a ClassVar, as irdl wants them)."""
    return irdl_op_definition(type(name, (base,), {
        **constants, **(methods or {}), "__module__": __name__, "__qualname__": name,
        "__annotations__": {k: ClassVar for k in constants if k.isupper()}}))


def _quantized(base: type[_Convolution]) -> type[_Windowed]:
    """The ``_q`` form of a convolution: its loops and windows, with zero points."""
    return _declare(base.__name__.replace("Op", "QOp"), _Windowed, {
        "name": base.name + "_q", "SPATIAL": base.SPATIAL, "ITERATORS": base.ITERATORS,
        "INDEXING": staticmethod(base.INDEXING), "QUANTIZED": True},
        {"get_hidden_region": classmethod(_quantized_region)})


Conv2DNhwcHwcfQOp, Conv2DNhwcFhwcQOp, Conv2DNchwFchwQOp, DepthwiseConv2DNhwcHwcQOp, \
    DepthwiseConv2DNhwcHwcmQOp = map(_quantized, (
        Conv2DNhwcHwcfOp, Conv2DNhwcFhwcOp, Conv2DNchwFchwOp, DepthwiseConv2DNhwcHwcOp,
        DepthwiseConv2DNhwcHwcmOp))


def _pooling_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
    arg_types = NamedOperation.body_arg_types((*inputs, *outputs))
    acc_type = arg_types[-1]
    combine = cls.COMBINE[0 if isinstance(acc_type, AnyFloat) else 1]
    if combine is arith.AddiOp and _is_bool(acc_type):
        combine = arith.OrIOp

    @Builder.implicit_region(arg_types)
    def hidden_region(args: tuple[BlockArgument, ...]) -> None:
        YieldOp(combine(args[2], convert(args[0], acc_type, cls.UNSIGNED)))

    return hidden_region


class _Pooling(_Windowed):
    """``out[...] = COMBINE(out[...], input[...])`` over the window; the window operand
    gives only the window's shape. ``COMBINE``: the float op, then the integer op (signed),
    as OpDSL's ``max_signed``/``min_signed``/``add`` pick them: ``arith.maximumf`` and
    ``minimumf`` propagate NaN."""

    COMBINE: ClassVar[tuple[type, type]]
    UNSIGNED: ClassVar[bool] = False  # ``*_unsigned``: integers cast and compared as unsigned
    get_hidden_region = classmethod(_pooling_region)


_MAX, _MIN, _SUM = ((arith.MaximumfOp, arith.MaxSIOp), (arith.MinimumfOp, arith.MinSIOp),
                    (arith.AddfOp, arith.AddiOp))
_MAX_UNSIGNED, _MIN_UNSIGNED = (arith.MaximumfOp, arith.MaxUIOp), (arith.MinimumfOp, arith.MinUIOp)
_NCHW: Callable[..., tuple[tuple, ...]] = lambda S, n, c, oh, ow, kh, kw: (  # noqa: E731
    (n, c, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW), (kh, kw), (n, c, oh, ow))
_NHWC: Callable[..., tuple[tuple, ...]] = lambda S, n, oh, ow, c, kh, kw: (  # noqa: E731
    (n, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW, c), (kh, kw), (n, oh, ow, c))


@irdl_op_definition
class PoolingNchwMaxOp(_Pooling):
    name = "linalg.pooling_nchw_max"
    ITERATORS: ClassVar[str] = "pppprr"
    INDEXING: ClassVar = staticmethod(_NCHW)
    COMBINE: ClassVar = _MAX


@irdl_op_definition
class PoolingNchwSumOp(_Pooling):
    name = "linalg.pooling_nchw_sum"
    ITERATORS: ClassVar[str] = "pppprr"
    INDEXING: ClassVar = staticmethod(_NCHW)
    COMBINE: ClassVar = _SUM


@irdl_op_definition
class PoolingNhwcMaxOp(_Pooling):
    name = "linalg.pooling_nhwc_max"
    ITERATORS: ClassVar[str] = "pppprr"
    INDEXING: ClassVar = staticmethod(_NHWC)
    COMBINE: ClassVar = _MAX


@irdl_op_definition
class PoolingNhwcMinOp(_Pooling):
    name = "linalg.pooling_nhwc_min"
    ITERATORS: ClassVar[str] = "pppprr"
    INDEXING: ClassVar = staticmethod(_NHWC)
    COMBINE: ClassVar = _MIN


@irdl_op_definition
class PoolingNhwcSumOp(_Pooling):
    name = "linalg.pooling_nhwc_sum"
    ITERATORS: ClassVar[str] = "pppprr"
    INDEXING: ClassVar = staticmethod(_NHWC)
    COMBINE: ClassVar = _SUM


@irdl_op_definition
class PoolingNcwSumOp(_Pooling):
    name = "linalg.pooling_ncw_sum"
    SPATIAL: ClassVar[str] = "W"
    ITERATORS: ClassVar[str] = "pppr"
    INDEXING: ClassVar = staticmethod(lambda S, n, c, ow, kw: (
        (n, c, ow * S.SW + kw * S.DW), (kw,), (n, c, ow)))
    COMBINE: ClassVar = _SUM


@irdl_op_definition
class PoolingNdhwcSumOp(_Pooling):
    name = "linalg.pooling_ndhwc_sum"
    SPATIAL: ClassVar[str] = "DHW"
    ITERATORS: ClassVar[str] = "pppprrrp"
    INDEXING: ClassVar = staticmethod(lambda S, n, od, oh, ow, kd, kh, kw, c: (
        (n, od * S.SD + kd * S.DD, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW, c),
        (kd, kh, kw), (n, od, oh, ow, c)))
    COMBINE: ClassVar = _SUM


_NWC: Callable[..., tuple[tuple, ...]] = lambda S, n, ow, c, kw: (  # noqa: E731
    (n, ow * S.SW + kw * S.DW, c), (kw,), (n, ow, c))
_NCW: Callable[..., tuple[tuple, ...]] = lambda S, n, c, ow, kw: (  # noqa: E731
    (n, c, ow * S.SW + kw * S.DW), (kw,), (n, c, ow))
_NDHWC: Callable[..., tuple[tuple, ...]] = lambda S, n, od, oh, ow, kd, kh, kw, c: (  # noqa: E731
    (n, od * S.SD + kd * S.DD, oh * S.SH + kh * S.DH, ow * S.SW + kw * S.DW, c),
    (kd, kh, kw), (n, od, oh, ow, c))
# The rest of OpDSL's pooling ops: (name, spatial dims, iterators, indexing, combine, unsigned).
_MORE_POOLS = [
    ("pooling_nhwc_max_unsigned", "HW", "pppprr", _NHWC, _MAX_UNSIGNED, True),
    ("pooling_nhwc_min_unsigned", "HW", "pppprr", _NHWC, _MIN_UNSIGNED, True),
    ("pooling_nwc_sum", "W", "pppr", _NWC, _SUM, False),
    ("pooling_nwc_max", "W", "pppr", _NWC, _MAX, False),
    ("pooling_nwc_min", "W", "pppr", _NWC, _MIN, False),
    ("pooling_nwc_max_unsigned", "W", "pppr", _NWC, _MAX_UNSIGNED, True),
    ("pooling_nwc_min_unsigned", "W", "pppr", _NWC, _MIN_UNSIGNED, True),
    ("pooling_ncw_max", "W", "pppr", _NCW, _MAX, False),
    ("pooling_ndhwc_max", "DHW", "pppprrrp", _NDHWC, _MAX, False),
    ("pooling_ndhwc_min", "DHW", "pppprrrp", _NDHWC, _MIN, False),
]
MORE_POOLING_OPS = tuple(
    _declare("".join(w.title() for w in name.split("_")) + "Op", _Pooling, {
        "name": f"linalg.{name}", "SPATIAL": spatial, "ITERATORS": iterators,
        "INDEXING": staticmethod(indexing), "COMBINE": combine, "UNSIGNED": unsigned})
    for name, spatial, iterators, indexing, combine, unsigned in _MORE_POOLS)


# ---- softmax ------------------------------------------------------------------------------------

@irdl_op_definition
class SoftmaxOp(IRDLOperation):
    """Softmax along ``dimension``; not a structured op (MLIR decomposes it into a max
    reduction, ``exp(x - max)``, a sum reduction and a division)."""

    name = "linalg.softmax"
    input = operand_def(TensorType)
    output = operand_def(TensorType)
    result = opt_result_def(TensorType)
    dimension = prop_def(IntegerAttr[I64])
    assembly_format = ("attr-dict `dimension` `(` $dimension `)` `ins` `(` $input `:` type($input) "
                       "`)` `outs` `(` $output `:` type($output) `)` (`->` type($result)^)?")

    def verify_(self) -> None:
        types = [self.input.type, self.output.type] + ([self.result.type] if self.result else [])
        if any(t != types[0] for t in types):
            raise VerifyException(f"input, output and result types differ: {types}")


def _operand_group(parser: Parser, keyword: str) -> list[SSAValue]:
    """``keyword(%a, %b : A, B)``: the operands, resolved to their types."""
    parser.parse_keyword(keyword)
    parser.parse_punctuation("(")
    names = parser.parse_comma_separated_list(parser.Delimiter.NONE,
                                              parser.parse_unresolved_operand)
    parser.parse_punctuation(":")
    types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
    parser.parse_punctuation(")")
    if len(names) != len(types):
        parser.raise_error(f"{keyword} names {len(names)} operands and {len(types)} types")
    return [parser.resolve_operand(n, t) for n, t in zip(names, types)]


class MapOp(Operation):
    """``linalg.map``: its body applied to the inputs' elements at each place of ``init``'s
    shape. Its block takes the inputs' elements only; the short form names one op instead:

        %r = linalg.map ins(%a, %b : T, T) outs(%init : T) (%x: f32, %y: f32) { ... }
        %r = linalg.map { arith.addf } ins(%a, %b : T, T) outs(%init : T)
    """

    name = "linalg.map"
    traits: ClassVar = traits_def()

    @classmethod
    def parse(cls, parser: Parser):
        short = None
        if parser.parse_optional_punctuation("{") is not None:
            start = parser.pos
            name = parser.parse_identifier()  # the op's name: ``arith.addf``
            short = parser.ctx.get_optional_op(name)
            if short is None:
                parser.raise_error(f"linalg.map applies '{name}', an op pyree does not know",
                                   start, parser.pos)
            short_attrs = parser.parse_optional_attr_dict()
            parser.parse_punctuation("}")
        operands = _operand_group(parser, "ins")
        (init,) = _operand_group(parser, "outs")
        if short is None:
            args = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_argument)
            region = parser.parse_region(args)
        else:
            block = Block(arg_types=[v.type.get_element_type() for v in operands])
            applied = short.create(operands=list(block.args),
                                   result_types=[init.type.get_element_type()],
                                   properties=short_attrs)
            block.add_ops([applied, YieldOp(applied.results[0])])
            region = Region(block)
        attrs = parser.parse_optional_attr_dict()
        results = [init.type] if isinstance(init.type, TensorType) else []
        return cls.create(operands=[*operands, init], result_types=results, regions=[region],
                          attributes=attrs)

    def print(self, printer) -> None:
        printer.print_op_with_default_format(self)


class ElementwiseOp(Operation):
    """``linalg.elementwise kind=#linalg.elementwise_kind<exp> [indexing_maps = [..]] ins(..)
    outs(..) -> T`` (MLIR's newest elementwise op): the named op of its kind (``max_signed``
    is ``linalg.max``), over identity maps unless it gives its own. Its body is built from that
    named op's (``body``)."""

    name = "linalg.elementwise"
    traits: ClassVar = traits_def()

    @classmethod
    def parse(cls, parser: Parser):
        parser.parse_keyword("kind")
        parser.parse_punctuation("=")
        spelled = parser._consume_token().text  # noqa: SLF001 - an attribute xDSL does not know
        if spelled != "#linalg.elementwise_kind":
            parser.raise_error(f"expected #linalg.elementwise_kind<...>, got {spelled}")
        parser.parse_punctuation("<")
        kind = parser.parse_identifier()
        parser.parse_punctuation(">")
        maps = None
        if parser.parse_optional_keyword("indexing_maps") is not None:
            parser.parse_punctuation("=")
            maps = parser.parse_attribute()
        operands = [_operand_group(parser, "ins"), _operand_group(parser, "outs")]
        attrs = parser.parse_optional_attr_dict()
        results = [parser.parse_type()] if parser.parse_optional_punctuation("->") else []
        properties = {"kind": StringAttr(kind), "num_ins": IntegerAttr(len(operands[0]), 64)}
        if maps is not None:
            properties["indexing_maps"] = maps
        return cls.create(operands=operands[0] + operands[1], result_types=results,
                          properties=properties, attributes=attrs)

    def print(self, printer) -> None:
        printer.print_op_with_default_format(self)

    def body(self) -> Region:
        """The scalar body of the named op of this kind, over this op's operands."""
        kind = self.properties["kind"].data
        named = _NAMED_ELEMENTWISE.get(_KIND_NAMES.get(kind, kind))
        if named is None:
            raise VerifyException(f"linalg.elementwise kind '{kind}' is not supported")
        num_ins = self.properties["num_ins"].value.data
        return named.get_hidden_region(self.operands[:num_ins], self.operands[num_ins:])


_KIND_NAMES = {"max_signed": "max", "min_signed": "min"}


# Loaded next to xDSL's linalg ops; MatmulOp and the convolution and pooling ops replace xDSL's.
LINALG_OPS = (
    AddOp, AbsOp, NegfOp, FloorOp, CeilOp, RoundOp, ErfOp, TanhOp, RsqrtOp, ReciprocalOp, SquareOp,
    DivOp, DivUnsignedOp, PowfOp, MatmulOp, BatchMatmulOp, MatvecOp, BatchMatvecOp, VecmatOp,
    DotOp,
    MatmulTransposeAOp, MatmulTransposeBOp, BatchMatmulTransposeAOp, BatchMatmulTransposeBOp,
    BatchReduceMatmulOp, Conv1DNcwFcwOp, Conv1DNwcWcfOp, Conv2DNchwFchwOp, Conv2DNhwcHwcfOp,
    Conv2DNhwcFhwcOp, Conv2DNgchwFgchwOp, Conv2DNgchwGfchwOp, Conv2DNhwgcGfhwcOp,
    Conv3DNcdhwFcdhwOp, Conv3DNdhwcDhwcfOp,
    DepthwiseConv2DNchwChwOp, DepthwiseConv2DNhwcHwcOp, PoolingNchwMaxOp, PoolingNchwSumOp,
    PoolingNhwcMaxOp, PoolingNhwcMinOp, PoolingNhwcSumOp, PoolingNcwSumOp, PoolingNdhwcSumOp,
    *MORE_POOLING_OPS, SoftmaxOp, BatchVecmatOp, Mmt4DOp, BatchMmt4DOp, ContractOp,
    QuantizedMatmulOp, QuantizedBatchMatmulOp, DepthwiseConv2DNhwcHwcmOp, DepthwiseConv1DNwcWcOp,
    DepthwiseConv1DNcwCwOp, DepthwiseConv1DNwcWcmOp, DepthwiseConv3DNdhwcDhwcOp,
    DepthwiseConv3DNcdhwCdhwOp, DepthwiseConv3DNdhwcDhwcmOp, Conv1DOp, Conv2DOp, Conv3DOp,
    Conv2DNhwcHwcfQOp, Conv2DNhwcFhwcQOp, Conv2DNchwFchwQOp, DepthwiseConv2DNhwcHwcQOp,
    DepthwiseConv2DNhwcHwcmQOp, MapOp, ElementwiseOp,
)


def _named_elementwise() -> dict[str, type]:
    """The named elementwise ops by kind (``linalg.elementwise``'s), xDSL's and pyree's."""
    from xdsl.dialects.linalg import ops

    xdsl_ops = (ops.SubOp, ops.MulOp, ops.MaxOp, ops.MinOp, ops.ExpOp, ops.LogOp,
                ops.SqrtOp, ops.SelectOp)
    return {op.name.removeprefix("linalg."): op for op in (*xdsl_ops, *LINALG_OPS)
            if issubclass(op, ElementwiseOperation)}


_NAMED_ELEMENTWISE = _named_elementwise()
