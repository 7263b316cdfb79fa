"""The inputs of a Generic being lowered, each tensor once, numbered as its Loads bind them.

Its own file so that the function lowering and the body lowering both use it without importing
each other."""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import AffineExpr, Expr, Gather, Load, is_float
from pyree.compiler.tensor_program import Value


class Inputs:
    """The inputs of the Generic being built, each Value once: ``Load(binding=i)`` reads
    ``values[i]``."""

    def __init__(self) -> None:
        self.values: list[Value] = []

    def load(self, value: Value, index: tuple[AffineExpr, ...]) -> Load:
        return Load(self.binding(value), index, value.dtype)

    def gather(self, value: Value, index: tuple[Expr, ...], where: str) -> Gather:
        """``value`` read at computed indices (clamped into range: see ``Gather``)."""
        if any(is_float(ix.dtype) for ix in index):
            raise CompileError("tensor.extract with a floating-point index", where)
        if 0 in value.shape:
            raise CompileError(f"tensor.extract from an empty tensor ({value.shape})", where)
        return Gather(self.binding(value), index, value.dtype)

    def binding(self, value: Value) -> int:
        for i, known in enumerate(self.values):
            if known is value:
                return i
        self.values.append(value)
        return len(self.values) - 1
