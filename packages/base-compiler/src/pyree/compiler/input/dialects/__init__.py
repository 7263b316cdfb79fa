"""xDSL dialect declarations for the ops pyree accepts that xDSL 0.74 does not define."""

from pyree.compiler.input.dialects.arith import ARITH_OPS
from pyree.compiler.input.dialects.linalg import LINALG_OPS
from pyree.compiler.input.dialects.linalg_ext import LinalgExt, TMTensor
from pyree.compiler.input.dialects.math import MATH_OPS
from pyree.compiler.input.dialects.ml_program import MLProgram
from pyree.compiler.input.dialects.pack import PACK_OPS
from pyree.compiler.input.dialects.stream import Flow, Stream
from pyree.compiler.input.dialects.tensor_extra import TENSOR_EXTRA_OPS
from pyree.compiler.input.dialects.util import Util

# Ops that replace xDSL's own declaration of the same name, or that it lacks.
REPLACED_OPS = (*ARITH_OPS, *LINALG_OPS, *MATH_OPS, *TENSOR_EXTRA_OPS, *PACK_OPS)


def __getattr__(name: str):
    """Check, StableHLO and CHLO, imported on first use (the parser loads them only for a
    text that uses them)."""
    if name == "Check":
        from pyree.compiler.input.dialects.check import Check
        return Check
    if name in ("CHLO", "StableHLO"):
        from pyree.compiler.input.dialects import stablehlo
        return getattr(stablehlo, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CHLO", "LINALG_OPS", "MLProgram", "REPLACED_OPS", "Check", "Flow", "LinalgExt", "StableHLO",
           "Stream", "TMTensor", "Util"]
