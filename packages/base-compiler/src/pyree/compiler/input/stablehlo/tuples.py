"""``stablehlo.tuple`` / ``get_tuple_element`` (older TF and XLA exports): a tuple exists only
while its function is lowered, as a ``Tuple`` entry holding its elements' entries, so taking an
element apart costs nothing; IREE flattens tuples the same way. A tuple may pass through calls
and composites of private functions; an exported function's tuple arguments and results are
flattened into their elements (``lowering._argument``, ``_flattened``), as IREE flattens
XLA's."""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.input.function import FunctionLowering, Tuple
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.stablehlo.common import ints
from xdsl.ir import Operation


def lower_tuple(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    fn.env[op.results[0]] = Tuple([fn.entry(v, where) for v in op.operands])


def lower_get_tuple_element(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    entry = fn.entry(op.operands[0], where)
    index = ints(op, "index")[0]
    if not isinstance(entry, Tuple):
        raise CompileError(f"stablehlo.get_tuple_element of {entry}, not a tuple", where)
    if not 0 <= index < len(entry.elements):
        raise CompileError(f"stablehlo.get_tuple_element: index {index} is past the tuple's "
                           f"{len(entry.elements)} elements", where)
    fn.env[op.results[0]] = entry.elements[index]
