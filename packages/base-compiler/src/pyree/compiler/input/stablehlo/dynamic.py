"""StableHLO's dynamic forms: run-time sizes as values, and the ops that take shapes as operands.

JAX's ``jax.export`` with symbolic shapes writes a batch ``b`` as ``?``: it reads the size with
``get_dimension_size`` (a ``tensor<i32>``), does integer arithmetic on it, packs sizes into
shape tensors (``reshape`` to ``tensor<1xi32>``, ``concatenate``) and passes those to
``dynamic_broadcast_in_dim``, ``dynamic_iota``, ``dynamic_reshape`` and ``real_dynamic_slice``.
Here a rank-0 size is a ``Dim`` entry and a shape tensor a ``Dims`` entry: both stay ``Size``
expressions and never become kernel values. A comparison of sizes (JAX's shape assertions,
which ``@shape_assertion`` custom calls consume and pyree drops, as IREE does) is a
``SizeCheck`` that nothing else may read. ``result_shape`` gives the run-time dims of an op
whose result type says ``?``, for the rules that know them (elementwise, transpose).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyree.compiler.errors import CompileError
from pyree.compiler.input.constants import dense_contents
from pyree.compiler.input.dialects.stablehlo import CHLO_ELEMENTWISE, ELEMENTWISE
from pyree.compiler.input.function import Dim, FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.stablehlo.common import convert, ints
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import AffineExpr, Const, LoopIndex, Result
from pyree.compiler.sizes import Size, num_elements, opaque
from pyree.compiler.tensor_program import Generic, View
from xdsl.ir import Operation, SSAValue


@dataclass(eq=False)
class Dims:
    """A rank-1 integer tensor of sizes (a shape operand): each an int or a ``Size``."""

    dtype: str
    sizes: tuple


@dataclass(eq=False)
class SizeCheck:
    """A comparison of run-time sizes: only a shape assertion may read it."""

    where: str


def result_shape(fn: FunctionLowering, op: Operation, ssa: SSAValue, where: str) -> tuple:
    """The dtype and shape of ``ssa`` (a result of ``op``): for an op that keeps its operands'
    shape (elementwise, ``_KEEP_SHAPE``), a ``?`` dim is that of an operand of the same rank;
    any other op's ``?`` is refused."""
    dtype, shape = tensor_type_of(ssa.type, where, dynamic=True)
    if None not in shape:
        return dtype, shape
    kind = op.name.split(".", 1)[1]
    keeps = (op.name.startswith("stablehlo.") and kind in ELEMENTWISE) or (
        op.name.startswith("chlo.") and kind in CHLO_ELEMENTWISE)
    if not keeps and op.name not in _KEEP_SHAPE:
        return tensor_type_of(ssa.type, where)  # refuses the ? by name (the op's rule)
    perm = ints(op, "permutation") if op.name == "stablehlo.transpose" else None
    operands = op.operands[:1] if op.name == "stablehlo.dynamic_update_slice" else op.operands
    for operand in operands:
        entry = fn.entry(operand, where)
        have = getattr(entry, "shape", None)
        if have is None or len(have) != len(shape):
            continue
        if perm is not None:
            have = tuple(have[p] for p in perm)
        if all(d is None or d == h for d, h in zip(shape, have)):
            return dtype, tuple(h if d is None else d for d, h in zip(shape, have))
    raise CompileError(f"'{op.name}' with dynamic dimensions is not supported yet (cannot tell "
                       f"the run-time shape of its result, {ssa.type})", where)


# Ops whose result has their first operand's shape (a transpose: permuted).
_KEEP_SHAPE = ("stablehlo.transpose", "stablehlo.reverse", "stablehlo.dynamic_update_slice")


def is_size_op(fn: FunctionLowering, op: Operation) -> bool:
    """Whether ``op`` computes on sizes (a ``Dim``, ``Dims`` or ``SizeCheck`` operand)."""
    return any(isinstance(fn.env.get(v), (Dim, Dims, SizeCheck)) for v in op.operands)


def shape_operand(fn: FunctionLowering, ssa: SSAValue, where: str) -> tuple:
    """A shape operand's sizes: a ``Dims``, or a constant (ints)."""
    entry = fn.entry(ssa, where)
    if isinstance(entry, Dims):
        return entry.sizes
    if isinstance(entry, Dim):
        return (entry.size,)
    if isinstance(entry, Const):
        return (int(entry.value),)
    owner = ssa.owner if isinstance(ssa.owner, Operation) else None
    if owner is not None and owner.name == "stablehlo.concatenate":  # of constants
        return tuple(s for v in owner.operands for s in shape_operand(fn, v, where))
    if owner is not None and owner.name in ("stablehlo.reshape", "stablehlo.convert"):
        return shape_operand(fn, owner.operands[0], where)
    value = owner.properties.get("value") if owner is not None else None
    if value is not None and owner.name in (
            "stablehlo.constant", "arith.constant", "util.unfoldable_constant"):
        dtype, shape = tensor_type_of(ssa.type, where)
        data, splat = dense_contents(value, dtype, shape, where)
        return tuple(int(splat) for _ in range(shape[0])) if data is None else \
            tuple(int(v) for v in data.ravel())
    raise CompileError("a shape computed from tensor contents (a data-dependent shape) is not "
                       "supported; pyree takes shapes made of dimension sizes and constants",
                       where)


SIZE_OPS = {
    "stablehlo.add": lambda a, b: a + b,
    "stablehlo.subtract": lambda a, b: a - b,
    "stablehlo.multiply": lambda a, b: a * b,
    "stablehlo.divide": lambda a, b: opaque("floordiv", a, b),
    "stablehlo.remainder": lambda a, b: opaque("mod", a, b),
    "stablehlo.maximum": lambda a, b: opaque("max", a, b),
    "stablehlo.minimum": lambda a, b: opaque("min", a, b),
    "stablehlo.convert": lambda a: a,
}


def lower_size_op(fn: FunctionLowering, op: Operation) -> None:
    """An op on sizes: arithmetic gives a size (sizes are non-negative, so the signed and
    floored divisions agree), reshape and concatenate pack sizes into shape tensors, and a
    comparison is a SizeCheck."""
    where = location_of(op)
    result = op.results[0]
    if op.name in ("stablehlo.compare", "stablehlo.and", "stablehlo.or"):
        fn.env[result] = SizeCheck(where)
        return
    dtype, shape = tensor_type_of(result.type, where)
    if op.name == "stablehlo.reshape":
        sizes = shape_operand(fn, op.operands[0], where)
        fn.env[result] = Dim(sizes[0]) if shape == () else Dims(dtype, sizes)
        return
    if op.name == "stablehlo.concatenate":
        fn.env[result] = Dims(dtype, tuple(s for v in op.operands
                                           for s in shape_operand(fn, v, where)))
        return
    rule = SIZE_OPS.get(op.name)
    if rule is None or len(shape) > 1:
        raise CompileError(f"'{op.name}' on a run-time size is not supported; pyree computes "
                           "sizes with " + ", ".join(sorted(SIZE_OPS)), where)
    operands = [shape_operand(fn, v, where) for v in op.operands]
    if len({len(o) for o in operands}) != 1:
        raise CompileError(f"'{op.name}' on shapes of different lengths", where)
    if op.name in ("stablehlo.divide", "stablehlo.remainder") and any(
            isinstance(b, int) and b <= 0 for b in operands[1]):
        raise CompileError(f"'{op.name}' of a run-time size by a divisor below 1", where)
    sizes = tuple(rule(*args) for args in zip(*operands))
    if shape == ():
        fn.env[result] = Dim(sizes[0]) if isinstance(sizes[0], Size) else Const(sizes[0], dtype)
    else:
        fn.env[result] = Dims(dtype, sizes)


def lower_get_dimension_size(fn: FunctionLowering, op: Operation) -> None:
    """A static dim is a constant; a run-time one, its size."""
    where = location_of(op)
    size = fn.entry(op.operands[0], where).shape[ints(op, "dimension")[0]]
    dtype = tensor_type_of(op.results[0].type, where)[0]
    fn.env[op.results[0]] = Dim(size) if isinstance(size, Size) else Const(size, dtype)


def _emit(fn: FunctionLowering, op: Operation, shape: tuple, build) -> None:
    """One parallel Generic over ``shape`` writing ``build(inputs)``: ``op``'s result."""
    where = location_of(op)
    dtype = tensor_type_of(op.results[0].type, where, dynamic=True)[0]
    _check_type(op, shape, where)
    inputs = Inputs()
    value = build(inputs)
    out = fn.bind_value(op.results[0], dtype, shape)
    rank = len(shape)
    fn.emit(Generic(inputs.values, [out], (Result(0, AffineExpr.identity(rank), value),), shape,
                    rank, where, op.name))


def _check_type(op: Operation, shape: tuple, where: str) -> None:
    """The result type's static dims must be the sizes the shape operand gives."""
    _, declared = tensor_type_of(op.results[0].type, where, dynamic=True)
    if len(declared) != len(shape) or any(
            d is not None and isinstance(s, int) and d != s for d, s in zip(declared, shape)):
        raise CompileError(f"'{op.name}': its shape operand gives {shape}, its type says "
                           f"{op.results[0].type}", where)


def lower_dynamic_broadcast_in_dim(fn: FunctionLowering, op: Operation) -> None:
    from pyree.compiler.input.stablehlo.elementwise import broadcast_load
    where = location_of(op)
    shape = shape_operand(fn, op.operands[1], where)
    bdims = ints(op, "broadcast_dimensions")
    _emit(fn, op, shape, lambda inputs: broadcast_load(fn, inputs, op.operands[0], shape, bdims,
                                                       where))


def lower_dynamic_iota(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    shape = shape_operand(fn, op.operands[0], where)
    d = ints(op, "iota_dimension")[0]
    dtype = tensor_type_of(op.results[0].type, where, dynamic=True)[0]
    _emit(fn, op, shape, lambda inputs: convert(LoopIndex(d), dtype))


def lower_dynamic_reshape(fn: FunctionLowering, op: Operation) -> None:
    """The same bytes under the shape operand's sizes: their count must be the operand's."""
    where = location_of(op)
    source = fn.tensor(op.operands[0], where)
    shape = shape_operand(fn, op.operands[1], where)
    _check_type(op, shape, where)
    if num_elements(shape) != num_elements(source.shape):
        raise CompileError(f"stablehlo.dynamic_reshape of {source.shape} to {shape}: pyree "
                           "cannot tell that the element counts agree", where)
    fn.emit(View(fn.bind_value(op.results[0], source.dtype, shape), source, 0, where))


def lower_real_dynamic_slice(fn: FunctionLowering, op: Operation) -> None:
    """``operand[start:limit:stride]`` per dim; starts and strides constant, limits may be
    sizes."""
    where = location_of(op)
    source = fn.tensor(op.operands[0], where)
    start, limit, stride = (shape_operand(fn, v, where) for v in op.operands[1:4])
    if not all(isinstance(v, int) for v in (*start, *stride)) or min(stride, default=1) < 1:
        raise CompileError("stablehlo.real_dynamic_slice with run-time starts or strides (or "
                           "strides below 1) is not supported; its limits may be sizes", where)
    rank = len(source.shape)
    shape = tuple(opaque("ceildiv", hi - lo, st) if isinstance(hi - lo, Size)
                  else max(0, -(-(hi - lo) // st)) for lo, hi, st in zip(start, limit, stride))
    index = tuple(AffineExpr.loop(rank, d, stride[d], start[d]) for d in range(rank))
    _emit(fn, op, shape, lambda inputs: inputs.load(source, index))


def lower_dynamic_pad(fn: FunctionLowering, op: Operation) -> None:
    """A static ``pad`` when the padding operands are constants (a ``tensor.pad`` exported with
    its amounts as tensors); padding by run-time amounts is refused."""
    from pyree.compiler.input.stablehlo.shape_ops import emit_padded  # imports this module

    where = location_of(op)
    source = fn.tensor(op.operands[0], where)
    try:
        low, high, interior = (list(shape_operand(fn, v, where)) for v in op.operands[2:5])
    except CompileError:
        low = high = interior = [None]
    if not all(isinstance(n, int) for n in (*low, *high, *interior, *source.shape)):
        raise CompileError("stablehlo.dynamic_pad is not supported yet where its padding "
                           "operands or its operand's shape are run-time values (padding by "
                           "run-time amounts); with constant padding it is a static pad", where)
    if not len(low) == len(high) == len(interior) == len(source.shape) or min(
            interior, default=0) < 0:
        raise CompileError(f"stablehlo.dynamic_pad: padding {low}/{high}/{interior} does not "
                           f"fit its {len(source.shape)}-d operand (interior >= 0)", where)
    out = emit_padded(fn, source, low, high, interior, op.operands[1], where, op.name)
    typed = tensor_type_of(op.results[0].type, where, dynamic=True)[1]
    if len(typed) != len(out.shape) or any(t is not None and t != n
                                           for t, n in zip(typed, out.shape)):
        raise CompileError(f"stablehlo.dynamic_pad makes {out.shape}, its type says "
                           f"{op.results[0].type}", where)
    fn.env[op.results[0]] = out


def refused(name: str):
    def lower(fn: FunctionLowering, op: Operation) -> None:
        raise CompileError(f"stablehlo.{name} is not supported yet (pyree takes "
                           "get_dimension_size, dynamic_broadcast_in_dim, dynamic_iota, "
                           "dynamic_reshape, real_dynamic_slice and dynamic_gather)",
                           location_of(op))
    return lower


RULES = {
    "stablehlo.dynamic_broadcast_in_dim": lower_dynamic_broadcast_in_dim,
    "stablehlo.dynamic_iota": lower_dynamic_iota,
    "stablehlo.dynamic_reshape": lower_dynamic_reshape,
    "stablehlo.real_dynamic_slice": lower_real_dynamic_slice,
    "stablehlo.get_dimension_size": lower_get_dimension_size,
    "stablehlo.dynamic_pad": lower_dynamic_pad,
    "stablehlo.dynamic_conv": refused("dynamic_conv"),
}
