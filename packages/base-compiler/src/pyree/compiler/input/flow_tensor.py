"""IREE's flow tensor ops around dynamic shapes (declared in ``dialects/flow_tensor.py``).

``flow.tensor.dynamic_constant`` is a constant whose result type hides some of its dims: IREE's
tests use it to reach the code paths of run-time sizes without an argument. Each hidden dim
becomes a hidden symbol (``Symbol.hidden``): the kernels take it as a run-time size, as they
would an argument's, and the host program passes its value, so the function still has no
sizes for the caller to give. ``flow.tensor.tie_shape`` states a value's ``?`` dims (they must
be the dims it has), and ``flow.tensor.bitcast`` reinterprets its bytes. (``util.assume.int``
bounds a size: ``run_time_sizes.lower_assume_int``.)
"""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.input.constants import dense_contents
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.run_time_sizes import size_of
from pyree.compiler.input.tensor_ops import bitcast_elements
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import itemsize
from pyree.compiler.sizes import Size
from pyree.compiler.tensor_program import Constant, Symbol, View
from xdsl.ir import Operation


def lower_dynamic_constant(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    dtype, shape = tensor_type_of(op.value.type, where)
    rdtype, rshape = tensor_type_of(op.results[0].type, where, dynamic=True)
    if rdtype != dtype or len(rshape) != len(shape) or any(
            r is not None and r != n for r, n in zip(rshape, shape)):
        raise CompileError(f"flow.tensor.dynamic_constant of a {op.value.type} value has type "
                           f"{op.results[0].type}: only '?' may differ", where)
    data, splat = dense_contents(op.value, dtype, shape, where)
    constant = fn.new_value(dtype, shape, f"{op.results[0].name_hint or 'dynamic'}_value")
    fn.emit(Constant(constant, data=data, splat=splat, location=where))
    hidden = tuple(_hidden_symbol(fn, n) if r is None else n for r, n in zip(rshape, shape))
    fn.emit(View(fn.bind_value(op.results[0], dtype, hidden), constant, 0, where))


def _hidden_symbol(fn: FunctionLowering, value: int) -> Size:
    names = {symbol.name for symbol in fn.symbols}
    name = next(f"c{k}" for k in range(len(names) + 1) if f"c{k}" not in names)
    fn.symbols.append(Symbol(name, min=value, max=value, hidden=value))
    return Size.symbol(name)


def lower_tie_shape(fn: FunctionLowering, op: Operation) -> None:
    """The operand, its ``?`` dims held to the ones given."""
    where = location_of(op)
    entry = fn.entry(op.operands[0], where)
    _, shape = tensor_type_of(op.results[0].type, where, dynamic=True)
    given = iter(op.operands[1:])
    if sum(d is None for d in shape) != len(op.operands) - 1:
        raise CompileError(f"flow.tensor.tie_shape gives {len(op.operands) - 1} dims for the "
                           f"{sum(d is None for d in shape)} '?' of {op.results[0].type}", where)
    for have, dim in zip(entry.shape, shape):
        if dim is None:
            fn.unify(have, size_of(fn, next(given), where), where)
    fn.env[op.results[0]] = fn.entry(op.operands[0], where)


def lower_bitcast(fn: FunctionLowering, op: Operation) -> None:
    """Same element width: each element's bits as the new type; else the same bytes under the
    result's shape, where the sizes match."""
    where = location_of(op)
    source = fn.tensor(op.operands[0], where)
    dtype, shape = tensor_type_of(op.results[0].type, where, dynamic=True)
    result_dims = iter(op.operands[1 + op.properties["source_dims"].value.data:])
    shape = tuple(size_of(fn, next(result_dims), where) if d is None else d for d in shape)
    if itemsize(dtype) == itemsize(source.dtype) and len(shape) == len(source.shape):
        shape = tuple(fn.unify(d, s, where) for d, s in zip(shape, source.shape))
        bitcast_elements(fn, source, op.results[0], dtype, shape, where, op.name)
        return
    result = fn.bind_value(op.results[0], dtype, shape)
    if result.num_bytes != source.num_bytes:
        raise CompileError(f"flow.tensor.bitcast from {source.shape} x {source.dtype} to "
                           f"{shape} x {dtype}: the sizes differ", where)
    fn.emit(View(result, source, 0, where))


RULES = {
    "flow.tensor.dynamic_constant": lower_dynamic_constant,
    "flow.tensor.tie_shape": lower_tie_shape,
    "flow.tensor.bitcast": lower_bitcast,
}
