"""math ops MLIR has and xDSL 0.74 does not declare."""

from __future__ import annotations

from xdsl.dialects.math import FloatingPointLikeUnaryMathOperation
from xdsl.irdl import irdl_op_definition


@irdl_op_definition
class ErfcOp(FloatingPointLikeUnaryMathOperation):
    name = "math.erfc"


MATH_OPS = (ErfcOp,)
