"""What every StableHLO rule needs: attribute reading, affine indices, one-result Generics,
and StableHLO's ``convert`` (which several rules apply to operands and indices)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from pyree.compiler.errors import CompileError
from pyree.compiler.input.dialects.stablehlo import HloAttr
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.kernel import (
    AffineExpr,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    LoopIndex,
    Result,
    Select,
    is_float,
    is_unsigned,
    itemsize,
    size_value,
)
from pyree.compiler.sizes import is_static
from pyree.compiler.tensor_program import Generic, Value
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    IntegerAttr,
)
from xdsl.ir import Attribute, Operation, SSAValue


def prop(op: Operation, name: str) -> Attribute | None:
    """A property or attribute: the generic form may carry either."""
    attr = op.properties.get(name)
    return attr if attr is not None else op.attributes.get(name)


def hlo_attr(op: Operation, name: str) -> HloAttr:
    """A ``#stablehlo...<...>`` attribute the op cannot do without."""
    attr = prop(op, name)
    if not isinstance(attr, HloAttr):
        raise CompileError(f"'{op.name}' needs a StableHLO '{name}' attribute", location_of(op))
    return attr


def ints(op: Operation, name: str, default: list[int] | None = None) -> list[int]:
    """An integer-list (or integer) attribute as Python ints; ``default`` when absent."""
    attr = prop(op, name)
    if attr is None:
        if default is None:
            raise CompileError(f"'{op.name}' needs '{name}'", location_of(op))
        return list(default)
    values = _ints(attr)
    if values is None:
        raise CompileError(f"'{op.name}': '{name}' should hold integers, not {attr}",
                           location_of(op))
    return values


def _ints(attr: Attribute) -> list[int] | None:
    if isinstance(attr, DenseArrayBase):
        return [int(v) for v in attr.get_values()]
    if isinstance(attr, DenseIntOrFPElementsAttr):
        shape = attr.get_shape() or ()
        flat = [int(v) for v in attr.get_values()]
        count = int(np.prod(shape)) if shape else 1
        return flat * count if len(flat) == 1 and count > 1 else flat
    if isinstance(attr, IntegerAttr):
        return [int(attr.value.data)]
    if isinstance(attr, ArrayAttr):
        parts = [_ints(a) for a in attr.data]
        return None if None in parts else [v for p in parts for v in p]
    return None


def emit_map(fn: FunctionLowering, op: Operation, build: Callable[[Inputs], Expr],
             result: SSAValue | None = None) -> Value:
    """One parallel Generic writing ``build(inputs)`` to every element of ``op``'s result."""
    from pyree.compiler.input.stablehlo.dynamic import result_shape
    where = location_of(op)
    inputs = Inputs()
    ssa = result or op.results[0]
    dtype, shape = result_shape(fn, op, ssa, where)
    out = fn.bind_value(ssa, dtype, shape)
    value = build(inputs)
    rank = len(out.shape)
    fn.emit(Generic(inputs.values, [out], (Result(0, AffineExpr.identity(rank), value),), out.shape, rank,
                    where, op.name))
    return out


def width(dtype: str) -> int:
    """Bits per value (bf16 included, which ``scalar.bits`` does not know)."""
    return 1 if dtype == "i1" else itemsize(dtype) * 8


def as_index(x: Expr) -> Expr:
    return convert(x, "index")


def convert(x: Expr, dtype: str) -> Expr:
    """StableHLO ``convert``: to i1 is ``!= 0``, from i1 is 0/1, integers keep their sign."""
    src = x.dtype
    if src == dtype:
        return x
    if dtype == "i1":
        zero = Const(0.0 if is_float(src) else 0, src)
        return Compare("une" if is_float(src) else "ne", x, zero)
    if src == "i1":
        return Select(x, Const(1.0 if is_float(dtype) else 1, dtype),
                      Const(0.0 if is_float(dtype) else 0, dtype), dtype)
    if is_float(src) and is_float(dtype):
        if width(dtype) == width(src):  # f16 <-> bf16: through f32
            return Cast("fptrunc", Cast("fpext", x, "f32"), dtype)
        return Cast("fpext" if width(dtype) > width(src) else "fptrunc", x, dtype)
    if is_float(dtype):
        return Cast("uitofp" if is_unsigned(src) else "sitofp", x, dtype)
    if is_float(src):
        return _saturating_fptoi(x, dtype)
    if width(dtype) == width(src):
        return Cast("bitcast", x, dtype)
    if width(dtype) < width(src):
        return Cast("trunci", x, dtype)
    return Cast("extui" if is_unsigned(src) else "extsi", x, dtype)


def _saturating_fptoi(x: Expr, dtype: str) -> Expr:
    """Float to integer as XLA converts (LLVM's fptosi.sat): truncated, past the integer's
    range its bound, NaN 0 (the spec leaves it open; JAX users get XLA's answer)."""
    unsigned = is_unsigned(dtype)
    n = width(dtype)
    lo, hi = (0, 2 ** n - 1) if unsigned else (-(2 ** (n - 1)), 2 ** (n - 1) - 1)
    biggest = float(np.finfo(np.float16).max) if x.dtype == "f16" else float(
        np.finfo(np.float32).max) if x.dtype in ("f32", "bf16") else float(np.finfo(np.float64).max)
    # hi + 1 and lo - 1 (unsigned: -1) are powers of two, exact in every float past its range
    above = float(hi + 1) if hi + 1 <= biggest else float("inf")
    below = float(lo - 1) if unsigned else float(lo) if -lo <= biggest else float("-inf")
    value = Cast("fptoui" if unsigned else "fptosi", x, dtype)
    value = Select(Compare("ge", x, Const(above, x.dtype)), Const(hi, dtype), value, dtype)
    value = Select(Compare("le", x, Const(below, x.dtype)), Const(lo, dtype), value, dtype)
    return Select(Compare("uno", x, x), Const(0, dtype), value, dtype)


def clamp(x: Expr, lo: int, hi) -> Expr:
    """``x`` (index) clamped into [lo, hi]; ``hi`` may be a run-time size (a dim of ``?``
    less a window's), which the kernel is given."""
    if isinstance(x, Const) and is_static(hi):
        return Const(min(max(int(x.value), lo), hi), "index")
    return Binary("min", Binary("max", x, Const(lo, "index"), "index"), index_value(hi), "index")


def index_value(n) -> Expr:
    """An index: a constant, or a run-time size the kernel is given."""
    return Const(int(n), "index") if is_static(n) else size_value(n, "index")


def all_of(conds: list[Expr]) -> Expr:
    out = conds[0] if conds else Const(True, "i1")
    for c in conds[1:]:
        out = Binary("and", out, c, "i1")
    return out


def in_range(x: Expr, lo: int, hi: int) -> list[Expr]:
    """``lo <= x < hi`` as conditions."""
    return [Compare("ge", x, Const(lo, "index")), Compare("lt", x, Const(hi, "index"))]


def affine_expr(ix: AffineExpr) -> Expr:
    """An affine index as an index-typed expression of the loops."""
    out: Expr = Const(ix.const, "index")
    for d, c in enumerate(ix.coeffs):
        if c:
            out = Binary("add", out, Binary("mul", LoopIndex(d), Const(c, "index"), "index"),
                         "index")
    return out
