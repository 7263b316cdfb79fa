"""Index scalars that are run-time sizes: ``tensor.dim`` of a ``?`` dim, and the index
arithmetic, comparisons and selects on it that shapes and shape guards are made of
(``tensor.empty(%n)``, torch-mlir's ``cf.assert``s). They stay ``Size`` expressions (``Dim``
entries), computed by the host; an op that reads one otherwise reads it as a kernel value
(``kernel.SizeValue``, a push constant). ``util.assume.int`` bounds a size's symbol."""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.input.function import Dim, Empty, FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.types import dtype_of
from pyree.compiler.kernel import Binary, Compare, Const, Select
from pyree.compiler.sizes import Size, compare, exact_quotient, opaque, select
from pyree.compiler.tensor_program import Value
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineSymExpr,
)


def lower_dim(fn: FunctionLowering, op: Operation) -> None:
    """``tensor.dim %t, %i``: a constant for a static dim, else the dim's run-time size."""
    where = location_of(op)
    source = fn.entry(op.operands[0], where)
    index = fn.entry(op.operands[1], where)
    if not isinstance(source, (Value, Empty)) or not isinstance(index, Const):
        raise CompileError("tensor.dim needs a tensor and a constant index", where)
    if not 0 <= int(index.value) < len(source.shape):
        raise CompileError(f"tensor.dim index {index.value} is out of range for a rank-"
                           f"{len(source.shape)} tensor", where)
    dim = source.shape[int(index.value)]
    fn.env[op.results[0]] = Dim(dim) if isinstance(dim, Size) else Const(dim, "index")


def lower_affine_apply(fn: FunctionLowering, op: Operation) -> None:
    """``affine.apply``: its map's one result over sizes and index constants (torch-mlir's
    ``s0 * 2``), a size the host computes, or a constant; over an index scalar the program
    computes (a function argument, an extracted element), that scalar's arithmetic."""
    where = location_of(op)
    affine_map = op.map.data
    if len(affine_map.results) != 1:
        raise CompileError(f"affine.apply needs a map with one result, not "
                           f"{len(affine_map.results)}", where)
    if not all(isinstance(fn.entry(v, where), (Dim, Const)) for v in op.operands):
        return _affine_apply_of_scalars(fn, op, affine_map, where)
    values = [size_of(fn, v, where) for v in op.operands]

    def divide(kind, a, b):
        if isinstance(b, Size) or b <= 0:  # MLIR's affine maps divide by positive constants
            raise CompileError(f"affine.apply divides by {b}, not a positive constant", where)
        return opaque(_AFFINE_DIVISIONS[kind], a, b)

    result = _map_value(affine_map, values, lambda v: v, lambda a, b: a + b,
                        lambda a, b: a * b, divide)
    fn.env[op.results[0]] = Dim(result) if isinstance(result, Size) else Const(result, "index")


def _map_value(affine_map, operands: list, const, add, mul, divide):
    """The map's one result over ``operands`` (its dims, then its symbols), with ``const`` for
    its constants and ``add``, ``mul``, ``divide(kind, a, b)`` for its operations."""
    dims, symbols = operands[:affine_map.num_dims], operands[affine_map.num_dims:]

    def value(e: AffineExpr):
        if isinstance(e, AffineConstantExpr):
            return const(e.value)
        if isinstance(e, AffineDimExpr):
            return dims[e.position]
        if isinstance(e, AffineSymExpr):
            return symbols[e.position]
        a, b = value(e.lhs), value(e.rhs)
        if e.kind == AffineBinaryOpKind.Add:
            return add(a, b)
        if e.kind == AffineBinaryOpKind.Mul:
            return mul(a, b)
        return divide(e.kind, a, b)

    return value(affine_map.results[0])


_AFFINE_DIVISIONS = {AffineBinaryOpKind.FloorDiv: "floordiv", AffineBinaryOpKind.CeilDiv: "ceildiv",
                     AffineBinaryOpKind.Mod: "mod"}


def _affine_apply_of_scalars(fn: FunctionLowering, op: Operation, affine_map, where: str) -> None:
    """The map over index expressions (a rank-0 Generic where one is computed): floor and
    ceiling divisions and ``mod`` by positive constants, as affine maps define them for
    negative values too (``mod`` is never negative)."""
    inputs = Inputs()
    args = [fn.scalar(v, inputs, where) for v in op.operands]
    index = lambda v: Const(v, "index")  # noqa: E731
    arith = lambda name: lambda a, b: Binary(name, a, b, "index")  # noqa: E731

    def floordiv(a, c: int):
        below = Compare("lt", a, index(0))
        return Binary("div", Select(below, arith("sub")(a, index(c - 1)), a, "index"), index(c),
                      "index")

    def divide(kind, a, b):
        c = int(b.value) if isinstance(b, Const) else 0
        if c <= 0:  # MLIR's affine maps divide by positive constants
            raise CompileError(f"affine.apply divides by {b}, not a positive constant", where)
        if kind == AffineBinaryOpKind.FloorDiv:
            return floordiv(a, c)
        if kind == AffineBinaryOpKind.CeilDiv:
            return arith("sub")(index(0), floordiv(arith("sub")(index(0), a), c))
        return arith("sub")(a, arith("mul")(floordiv(a, c), index(c)))

    result = _map_value(affine_map, args, index, arith("add"), arith("mul"), divide)
    fn.define_scalar(op.results[0], result, inputs, where, op.name)


def lower_assume_int(fn: FunctionLowering, op: Operation) -> None:
    """``util.assume.int``: each result is its operand; an assumption on a size that is one of
    the function's symbols bounds that symbol (the module records it and the runtime holds each
    call to it, naming the argument and dim). On anything else it is a hint pyree drops."""
    where = location_of(op)
    for operand, result, bounds in zip(op.operands, op.results, op.bounds(), strict=True):
        entry = fn.entry(operand, where)
        fn.env[result] = entry
        low, high, divisor = bounds.get("umin", 0), bounds.get("umax"), bounds.get("udiv", 1)
        if low < 0 or (high is not None and high < low) or divisor < 1:
            raise CompileError(f"util.assume.int bounds umin={low} umax={high} udiv={divisor} "
                               "hold for no size", where)
        if isinstance(entry, Dim):
            fn.bound(entry.size, low, high, divisor)


def size_of(fn: FunctionLowering, ssa: SSAValue, where: str):
    """An index operand that gives a size: an int, or a ``Size``."""
    entry = fn.entry(ssa, where)
    if isinstance(entry, Dim):
        return entry.size
    if isinstance(entry, Const):
        return int(entry.value)
    raise CompileError("a size computed from tensor contents (a data-dependent shape) is not "
                       "supported", where)


_OPS = {
    "arith.addi": lambda a, b: a + b,
    "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.divui": lambda a, b: opaque("floordiv", a, b),
    "arith.divsi": lambda a, b: opaque("floordiv", a, b),
    "arith.floordivsi": lambda a, b: opaque("floordiv", a, b),
    "arith.ceildivui": lambda a, b: opaque("ceildiv", a, b),
    "arith.ceildivsi": lambda a, b: opaque("ceildiv", a, b),
    "arith.remui": lambda a, b: opaque("mod", a, b),
    "arith.remsi": lambda a, b: opaque("mod", a, b),
    "arith.minui": lambda a, b: opaque("min", a, b),
    "arith.minsi": lambda a, b: opaque("min", a, b),
    "arith.maxui": lambda a, b: opaque("max", a, b),
    "arith.maxsi": lambda a, b: opaque("max", a, b),
    "arith.index_cast": lambda a: a,
    "arith.index_castui": lambda a: a,
    "arith.extui": lambda a: a,  # of a comparison's 0/1
}
# arith.cmpi's predicates, in order; sizes are non-negative, so signed and unsigned agree.
_CMPI = ["eq", "ne", "lt", "le", "gt", "ge", "lt", "le", "gt", "ge"]


def is_size_arithmetic(op: Operation, operands: list) -> bool:
    """Whether ``op`` computes a size from sizes (its operands run-time sizes or integer
    constants, one at least a size): then the host computes it (``size_arithmetic``); any
    other op that reads a size reads it as a kernel value (``kernel.SizeValue``)."""
    return (op.name in _OPS or op.name in ("arith.cmpi", "arith.select")) \
        and any(isinstance(e, Dim) for e in operands) \
        and all(isinstance(e, Dim) or (isinstance(e, Const) and isinstance(e.value, (int, bool)))
                for e in operands)


def size_arithmetic(fn: FunctionLowering, op: Operation, operands: list, where: str):
    """The entry of an index op on run-time sizes: sizes are non-negative, so the signed and
    unsigned forms agree, and a cast between index and an integer type keeps the value (a
    size that does not fit the integer type is refused by the runtime's bound on sizes). A
    comparison the sizes decide, given the symbols' bounds, is a constant (torch-mlir's
    shape guards: ``n >= 0``, ``n == n``; with the bounds, ``min(seq, 512)`` is ``seq``); one
    they do not is a 0/1 size the host computes."""
    values = [e.size if isinstance(e, Dim) else int(e.value) for e in operands]
    bounds = {sym.name: (sym.min, sym.max) for sym in fn.symbols}
    name = op.name[len("arith."):]
    if op.name == "arith.cmpi":
        value = compare(_CMPI[op.predicate.value.data], *values, bounds)
    elif op.name == "arith.select":
        # A side may be negative (torch.roll's ``-1`` where ``n - 2 < 0``, clamped by a max
        # after): the host computes it moved up by its negative parts (``sizes.code``), and a
        # value that is still negative where it is used as a size is an InvocationError.
        value = select(*values)
    elif name.startswith(("min", "max")) and isinstance(compare("le", *values, bounds), bool):
        first = compare("le", *values, bounds) == name.startswith("min")  # torch's clamp to a bound
        value = values[0] if first else values[1]
    else:
        if name in ("floordivsi", "ceildivsi") and isinstance(values[1], int) and values[1] < 0:
            # floor(a / -c) is floor(-a / c), whatever a's sign: ONNX's Slice with a negative
            # step counts its elements as (end - start) floordiv step
            values = [-values[0], -values[1]]
        if name.startswith(("div", "floordiv", "ceildiv", "rem")) and isinstance(values[1], int) \
                and values[1] <= 0:
            # Sizes are non-negative, where MLIR's signed and floored divisions agree; a divisor
            # below 1 would make them differ (or trap), so it is refused rather than guessed.
            raise CompileError(f"'{op.name}' of a run-time size by {values[1]}", where)
        quotient = exact_quotient(*values) if name.startswith(("div", "floordiv", "ceildiv")) \
            else None
        if quotient is not None and compare("ge", values[1], 1, bounds) is True:
            value = quotient  # 8*n / n: exact wherever the divisor is not zero
        else:
            value = _OPS[op.name](*values)
    if isinstance(value, Size):
        return Dim(value)
    return Const(value, dtype_of(op.results[0].type, where))
