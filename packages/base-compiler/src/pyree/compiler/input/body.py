"""Region bodies (linalg, tensor.pad) -> kernel IR expressions, and the inputs they load."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyree.compiler.errors import CompileError
from pyree.compiler.flow.tensor_program import Value
from pyree.compiler.input.constants import scalar_const
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.scalar import bits, element_dtype, is_scalar_op, lower_scalar_op
from pyree.compiler.kernel import AffineExpr, Cast, Expr, Load, LoopIndex, is_float
from xdsl.dialects import arith
from xdsl.dialects.linalg.ops import IndexOp
from xdsl.ir import Block, SSAValue

if TYPE_CHECKING:
    from pyree.compiler.input.function import FunctionLowering


class Inputs:
    """The inputs of the Generic being built, each Value once: ``Load(binding=i)`` reads
    ``values[i]``."""

    def __init__(self) -> None:
        self.values: list[Value] = []

    def load(self, value: Value, index: tuple[AffineExpr, ...]) -> Load:
        for i, known in enumerate(self.values):
            if known is value:
                return Load(i, index, value.dtype)
        self.values.append(value)
        return Load(len(self.values) - 1, index, value.dtype)


def lower_block(fn: FunctionLowering, block: Block, args: dict[SSAValue, Expr],
                inputs: Inputs, loop_of: list[int], owner_where: str) -> list[Expr]:
    """The expressions a body yields. ``args`` gives each block argument's expression,
    ``loop_of[d]`` the normalized loop of the op's loop ``d`` (for ``linalg.index``).
    Ops of a named op's implicit body report the named op's location, ``owner_where``."""
    env: dict[SSAValue, Expr] = dict(args)

    def operand(value: SSAValue, where: str) -> Expr:
        if value in env:
            return env[value]
        return fn.scalar(value, inputs, where)  # defined outside the body

    for op in block.ops:
        where = location_of(op) or owner_where
        if op.name in ("linalg.yield", "tensor.yield"):
            return [operand(v, where) for v in op.operands]
        if isinstance(op, IndexOp):
            env[op.result] = LoopIndex(loop_of[op.dim.value.data])
        elif isinstance(op, arith.ConstantOp):
            env[op.result] = scalar_const(op.value, element_dtype(op, where), where)
        elif is_scalar_op(op.name):
            args = [operand(v, where) for v in op.operands]
            env[op.results[0]] = lower_scalar_op(op, args, where)
        else:
            raise CompileError(f"unsupported op '{op.name}' in a region body", where)
    raise CompileError("region body has no terminator", owner_where)


def convert(x: Expr, dtype: str) -> Expr:
    """Casts ``x`` to ``dtype`` the way linalg named ops do (signed integers)."""
    if x.dtype == dtype:
        return x
    if is_float(x.dtype) and is_float(dtype):
        return Cast("fpext" if bits(dtype) > bits(x.dtype) else "fptrunc", x, dtype)
    if is_float(dtype):
        return Cast("sitofp", x, dtype)
    if is_float(x.dtype):
        return Cast("fptosi", x, dtype)
    if bits(dtype) == bits(x.dtype):
        return Cast("bitcast", x, dtype)
    return Cast("extsi" if bits(dtype) > bits(x.dtype) else "trunci", x, dtype)
