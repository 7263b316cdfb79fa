"""``tensor.gather``, ``tensor.bitcast`` and ``tensor.generate`` (xDSL 0.74 has no such ops)
and ``linalg.init_tensor`` (MLIR's name for ``tensor.empty`` before 2022, which IREE's older e2e
files still write):

    %r = tensor.gather %source[%indices] gather_dims([0, 1]) [unique] : (T, I) -> R
    %e = linalg.init_tensor [1, 1, 2, 3] : tensor<1x1x2x3xf32>

and ``tensor.reshape`` verified as MLIR verifies it: xDSL compares the element counts of
shapes with ``?`` dims too (as products of -1s), so torch-mlir's reshape of a dynamic
``tensor<2x?x3x?xf32>`` into ``tensor<?x?xf32>`` (ONNX Tile, DepthToSpace, GroupNormalization
over a dim_param dim) was refused as invalid; and ``tensor.expand_shape`` of a rank-0 tensor
into ones with no reassociation groups, which MLIR allows and torch-mlir writes for
``x.amax(0, keepdim=True)`` of a 1-D tensor (xDSL requires a group per dim).
"""

from __future__ import annotations

import math
from typing import ClassVar

from xdsl.dialects import tensor
from xdsl.dialects.builtin import DYNAMIC_INDEX, DenseArrayBase, IndexType, TensorType, i64
from xdsl.ir import Operation
from xdsl.irdl import traits_def
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException


class GatherOp(Operation):
    name = "tensor.gather"
    traits: ClassVar = traits_def()

    @classmethod
    def parse(cls, parser: Parser):
        source = parser.parse_unresolved_operand()
        parser.parse_punctuation("[")
        indices = parser.parse_unresolved_operand()
        parser.parse_punctuation("]")
        parser.parse_keyword("gather_dims")
        parser.parse_punctuation("(")
        dims = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        parser.parse_punctuation(")")
        parser.parse_optional_keyword("unique")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        ft = parser.parse_function_type()
        operands = parser.resolve_operands([source, indices], list(ft.inputs), parser.pos)
        return cls.create(operands=operands, result_types=list(ft.outputs),
                          properties={"gather_dims": DenseArrayBase.from_list(i64, dims)},
                          attributes=attrs)

    def print(self, printer) -> None:
        printer.print_op_with_default_format(self)


class InitTensorOp(Operation):
    name = "linalg.init_tensor"
    traits: ClassVar = traits_def()

    @classmethod
    def parse(cls, parser: Parser):
        parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        parser.parse_punctuation(":")
        return cls.create(result_types=[parser.parse_type()])

    def print(self, printer) -> None:
        printer.print_op_with_default_format(self)


class ReshapeOp(tensor.ReshapeOp):
    """xDSL's op with MLIR's verifier: element counts compared only where both are static."""

    name = "tensor.reshape"

    def verify_(self) -> None:
        source, shape, result = self.source.type, self.shape.type, self.result.type
        if not all(isinstance(t, TensorType) for t in (source, shape, result)):
            raise VerifyException("tensor.reshape's operands and result must be tensors")
        if source.element_type != result.element_type:
            raise VerifyException("element types of source and result tensor types should be "
                                  "the same")
        if len(shape.get_shape()) != 1:
            raise VerifyException("shape tensor must have a rank one")
        dims = (source.get_shape(), result.get_shape())
        if all(DYNAMIC_INDEX not in d for d in dims) and math.prod(dims[0]) != math.prod(dims[1]):
            raise VerifyException("source and result tensor should have the same number of "
                                  "elements")
        if shape.get_shape()[0] not in (DYNAMIC_INDEX, len(dims[1])):
            raise VerifyException("length of shape operand differs from the result's tensor rank")


class ExpandShapeOp(tensor.ExpandShapeOp):
    """xDSL's op, which MLIR's verifier also takes from a rank-0 source into all-1 dims."""

    name = "tensor.expand_shape"

    def verify_(self) -> None:
        source, result = self.src.type, self.result.type
        if (isinstance(source, TensorType) and isinstance(result, TensorType)
                and not source.get_shape() and not self.reassociation.data):
            if source.element_type != result.element_type:
                raise VerifyException("expand_shape's source and result element types differ")
            if any(d != 1 for d in result.get_shape()):
                raise VerifyException(f"expand_shape of a rank-0 tensor gives only dims of 1, "
                                      f"not {result}")
            if len(self.static_output_shape) != len(result.get_shape()):
                raise VerifyException("expand_shape's output_shape differs from its result's "
                                      "rank")
            return
        super().verify_()


class BitcastOp(Operation):
    """``%r = tensor.bitcast %x : tensor<4xf32> to tensor<4xi32>``: each element's bits."""

    name = "tensor.bitcast"
    traits: ClassVar = traits_def()

    @classmethod
    def parse(cls, parser: Parser):
        source = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        source_type = parser.parse_type()
        parser.parse_keyword("to")
        return cls.create(operands=[parser.resolve_operand(source, source_type)],
                          result_types=[parser.parse_type()], attributes=attrs)

    def print(self, printer) -> None:
        printer.print_op_with_default_format(self)


class GenerateOp(Operation):
    """``%r = tensor.generate [%dyn, ...] { ^bb0(%i: index, ...): ... tensor.yield %v }``:
    each element from its indices."""

    name = "tensor.generate"
    traits: ClassVar = traits_def()

    @classmethod
    def parse(cls, parser: Parser):
        sizes = parser.parse_optional_undelimited_comma_separated_list(
            parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand) or []
        region = parser.parse_region()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        result_type = parser.parse_type()
        operands = [parser.resolve_operand(s, IndexType()) for s in sizes]
        return cls.create(operands=operands, result_types=[result_type], regions=[region],
                          attributes=attrs)

    def print(self, printer) -> None:
        printer.print_op_with_default_format(self)


TENSOR_EXTRA_OPS = (GatherOp, InitTensorOp, ReshapeOp, ExpandShapeOp, BitcastOp, GenerateOp)
