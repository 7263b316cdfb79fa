"""``util.global`` and ``util.global.load``: module-level constants that functions read.

A global holds a dense value (IREE's e2e tests, iree-turbine's exports without externalized
weights) or ``#stream.parameter.named<"scope"::"key">`` (externalized weights): every load
becomes a tensor program Constant -- the same array for every load of one global, so the module
stores it once -- or a parameter Constant, whose bytes the runtime loads from a parameter file.
Only immutable globals with an initial value are constants; anything else is refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pyree.compiler.errors import CompileError
from pyree.compiler.input.constants import dense_contents
from pyree.compiler.input.dialects.stream import NamedParameterAttr
from pyree.compiler.input.dialects.util import GlobalLoadOp, GlobalOp
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.tensor_program import Constant
from xdsl.dialects.builtin import ModuleOp


@dataclass(frozen=True)
class Global:
    name: str
    dtype: str
    shape: tuple[int, ...]
    data: np.ndarray | None = None
    splat: float | int | bool | None = None
    parameter: tuple[str, str] | None = None


def read_globals(module: ModuleOp) -> dict[str, Global]:
    """The module's globals by symbol name."""
    return {g.name: g for g in (_read(op) for op in module.body.block.ops
                                 if isinstance(op, GlobalOp))}


def _read(op: GlobalOp) -> Global:
    where, name = location_of(op), op.sym_name.data
    if op.is_mutable is not None:
        raise CompileError(f"mutable util.global @{name} is not supported: pyree reads globals "
                           "as constants (immutable, with an initial value)", where)
    if op.initial_value is None:
        raise CompileError(f"util.global @{name} has no initial value; initializer functions are "
                           "not supported", where)
    dtype, shape = tensor_type_of(op.type, where)
    value = op.initial_value
    if isinstance(value, NamedParameterAttr):
        return Global(name, dtype, shape, parameter=value.data)
    data, splat = dense_contents(value, dtype, shape, where)
    return Global(name, dtype, shape, data=data, splat=splat)


def lower_global_load(fn, op: GlobalLoadOp) -> None:
    where = location_of(op)
    name = op.global_name.root_reference.data
    g = fn.globals.get(name)
    if g is None:
        raise CompileError(f"util.global.load of @{name}, which no util.global declares", where)
    if tensor_type_of(op.result.type, where) != (g.dtype, g.shape):
        raise CompileError(f"util.global.load of @{name} as {op.result.type}, but the global "
                           f"holds {'x'.join(map(str, g.shape + (g.dtype,)))}", where)
    fn.emit(Constant(fn.result_value(op.result, where), data=g.data, splat=g.splat,
                     location=where, parameter=g.parameter, name=name))
