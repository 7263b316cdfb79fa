"""Region bodies (linalg, tensor.pad) -> kernel IR expressions, and the inputs they load."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyree.compiler.errors import CompileError
from pyree.compiler.input.complex_body import ComplexExpr, lower_complex_op
from pyree.compiler.input.constants import scalar_const
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.scalar import bits, element_dtype, is_scalar_op, lower_scalar_op
from pyree.compiler.kernel import (
    INT_CASTS,
    AffineExpr,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    LoopIndex,
    Select,
    SizeValue,
    affine_range,
    cast_keeps,
    int_range,
    is_float,
    size_value,
)
from xdsl.dialects import arith, tensor
from xdsl.dialects.linalg.ops import IndexOp
from xdsl.ir import Block, SSAValue

if TYPE_CHECKING:
    from pyree.compiler.input.function import FunctionLowering


_TERMINATORS = ("linalg.yield", "tensor.yield", "tm_tensor.yield", "iree_linalg_ext.yield")


def lower_block(fn: FunctionLowering, block: Block, args: dict[SSAValue, Expr],
                inputs: Inputs, loop_of: list[int], owner_where: str,
                loop_ranges: tuple[int, ...] = ()) -> list[Expr]:
    """The expressions a body yields. ``args`` gives each block argument's expression,
    ``loop_of[d]`` the normalized loop of the op's loop ``d`` (for ``linalg.index``), and
    ``loop_ranges`` the normalized loops' trip counts where known (the rest are unbounded).
    Ops of a named op's implicit body report the named op's location, ``owner_where``."""
    env: dict[SSAValue, Expr] = dict(args)

    def operand(value: SSAValue, where: str) -> Expr:
        if value in env:
            return env[value]
        return fn.scalar(value, inputs, where)  # defined outside the body

    for op in block.ops:
        where = location_of(op) or owner_where
        if op.name in _TERMINATORS:
            return [operand(v, where) for v in op.operands]
        if op.name == "cf.assert":
            continue  # a kernel cannot report failure; IREE strips assertions the same way
        if isinstance(op, IndexOp):
            env[op.result] = LoopIndex(loop_of[op.dim.value.data])
        elif isinstance(op, tensor.ExtractOp):
            at = [operand(v, where) for v in op.indices]
            env[op.result] = _extract(fn, op, at, inputs, len(loop_of), loop_ranges, where)
        elif isinstance(op, arith.ConstantOp):
            env[op.result] = scalar_const(op.value, element_dtype(op, where), where)
        elif op.name == "tensor.dim":  # of a tensor outside the body: a size, maybe run-time
            env[op.results[0]] = _dim(fn, op, operand(op.operands[1], where), where)
        elif op.name.startswith("complex."):
            env[op.results[0]] = lower_complex_op(op, [operand(v, where) for v in op.operands],
                                                  where)
        elif is_scalar_op(op.name):
            args = [operand(v, where) for v in op.operands]
            if any(isinstance(a, ComplexExpr) for a in args):
                raise CompileError(f"'{op.name}' of a complex value in a region body (pyree "
                                   "computes complex values with the complex dialect's ops)", where)
            env.update(zip(op.results, lower_scalar_op(op, args, where)))
        else:
            raise CompileError(f"unsupported op '{op.name}' in a region body", where)
    raise CompileError("region body has no terminator", owner_where)


def _dim(fn: FunctionLowering, op, index: Expr, where: str) -> Expr:
    """``tensor.dim`` in a body (Hugging Face's masks read a sequence's length there)."""
    shape = getattr(fn.entry(op.operands[0], where), "shape", None)  # a tensor's, or an empty's
    if shape is None or not isinstance(index, Const) or not 0 <= int(index.value) < len(shape):
        raise CompileError("tensor.dim in a region body needs a tensor defined outside it and "
                           "a constant index within its rank", where)
    return size_value(shape[int(index.value)], "index")


def _extract(fn: FunctionLowering, op: tensor.ExtractOp, at: list[Expr], inputs: Inputs,
             num_loops: int, loop_ranges: tuple[int, ...], where: str) -> Expr:
    """A ``tensor.extract`` in a body: a Load when every index is affine in the loops, else a
    Gather (data-dependent indices: embedding lookups, ``aten.index``)."""
    splat = fn.splat_of(op.tensor)
    if splat is not None:
        return splat
    source = fn.tensor(op.tensor, where)
    bounds = tuple(loop_ranges[d] if d < len(loop_ranges) else UNBOUNDED for d in range(num_loops))
    index = [_affine(expr, bounds) for expr in at]
    if any(ix is None for ix in index):
        return inputs.gather(source, tuple(at), where)
    return inputs.load(source, tuple(index))


UNBOUNDED = 1 << 63  # the trip count assumed for a loop whose range is not known


def _affine(expr: Expr, ranges: tuple[int, ...]) -> AffineExpr | None:
    """``expr`` as a sum of loop indices times constants plus a constant, or None if it is not
    one. MLIR's integer casts and arithmetic wrap: an integer cast, add, sub or mul is taken
    as its mathematical value only where that value fits (``cast_keeps``, the dtype's range) at
    every point of the loop box ``ranges``; an index that may wrap is a Gather, computed
    exactly (``i * 100`` truncated to i8 is not ``100 * i``)."""
    num_loops = len(ranges)
    if isinstance(expr, LoopIndex):
        return AffineExpr(tuple(int(d == expr.dim) for d in range(num_loops)))
    if isinstance(expr, Const) and not is_float(expr.dtype):
        return AffineExpr((0,) * num_loops, int(expr.value))
    if isinstance(expr, Cast) and expr.op in INT_CASTS and not is_float(expr.x.dtype) \
            and not is_float(expr.dtype):
        inner = _affine(expr.x, ranges)
        if inner is None or not cast_keeps(expr.op, expr.x.dtype, expr.dtype,
                                           *affine_range(inner, ranges)):
            return None
        return inner
    if isinstance(expr, Select) and _broadcast_pick(expr, ranges):
        return _affine(expr.b, ranges)
    if not isinstance(expr, Binary) or expr.op not in ("add", "sub", "mul"):
        return None
    a, b = _affine(expr.a, ranges), _affine(expr.b, ranges)
    if a is None or b is None:
        return None
    if expr.op == "mul":
        if any(a.coeffs) and any(b.coeffs):
            return None  # a product of loop indices
        scale, term = (a.const, b) if not any(a.coeffs) else (b.const, a)
        out = AffineExpr(tuple(scale * c for c in term.coeffs), scale * term.const)
    else:
        sign = 1 if expr.op == "add" else -1
        out = AffineExpr(tuple(x + sign * y for x, y in zip(a.coeffs, b.coeffs)),
                         a.const + sign * b.const)
    lo, hi = affine_range(out, ranges)
    dlo, dhi = int_range(expr.dtype)
    return out if dlo <= lo and hi <= dhi else None


def _broadcast_pick(e: Select, ranges: tuple) -> bool:
    """Whether ``e`` is torch-mlir's broadcast of a run-time dim, ``n == 1 ? 0 : i`` with loop
    ``i`` running over ``n``: that is ``i`` (where n is 1, i is 0), so the load stays affine."""
    cond, index = e.cond, e.b
    if not (isinstance(cond, Compare) and cond.predicate == "eq" and isinstance(index, LoopIndex)
            and e.a == Const(0, e.a.dtype) and index.dim < len(ranges)):
        return False
    sides = [cond.a, cond.b]
    return Const(1, cond.a.dtype) in sides and SizeValue(ranges[index.dim], cond.a.dtype) in sides


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
