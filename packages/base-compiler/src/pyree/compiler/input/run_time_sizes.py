"""Index scalars that are run-time sizes: ``tensor.dim`` of a ``?`` dim, and the index
arithmetic on it that shapes are made of (``tensor.empty(%n)``). They stay ``Size``
expressions (``Dim`` entries) and never become kernel values."""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.input.function import Dim, Empty, FunctionLowering
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.types import dtype_of
from pyree.compiler.kernel import Const
from pyree.compiler.sizes import Size, opaque
from pyree.compiler.tensor_program import Value
from xdsl.ir import Operation, SSAValue


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
}


def size_arithmetic(op: Operation, operands: list, where: str):
    """The entry of an index op on run-time sizes: sizes are non-negative, so the signed and
    unsigned forms agree, and a cast between index and an integer type keeps the value (a
    size that does not fit the integer type is refused by the runtime's bound on sizes)."""
    rule = _OPS.get(op.name)
    if rule is None:
        raise CompileError(f"'{op.name}' on a run-time size is not supported; pyree computes "
                           "shapes with " + ", ".join(sorted(_OPS)), where)
    values = []
    for entry in operands:
        if isinstance(entry, Dim):
            values.append(entry.size)
        elif isinstance(entry, Const) and isinstance(entry.value, int):
            values.append(int(entry.value))
        else:
            raise CompileError(f"'{op.name}' mixes a run-time size with a computed value", where)
    if op.name[len("arith."):].startswith(("div", "floordiv", "ceildiv", "rem")) \
            and isinstance(values[1], int) and values[1] <= 0:
        # Sizes are non-negative, where MLIR's signed and floored divisions agree; a divisor
        # below 1 would make them differ (or trap), so it is refused rather than guessed.
        raise CompileError(f"'{op.name}' of a run-time size by {values[1]}", where)
    value = rule(*values)
    if isinstance(value, Size):
        return Dim(value)
    return Const(value, dtype_of(op.results[0].type, where))
