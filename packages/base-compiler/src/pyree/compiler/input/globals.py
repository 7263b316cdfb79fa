"""Module globals: ``util.global`` / ``ml_program.global``, their loads and stores.

An immutable global holds a dense value (IREE's e2e tests, iree-turbine's exports without
externalized weights) or ``#stream.parameter.named<"scope"::"key">`` (externalized weights): every
load becomes a tensor program Constant -- the same array for every load of one global, so the
module stores it once -- or a parameter Constant, whose bytes the runtime loads from a parameter
file.

A mutable global is module state that persists between calls (a KV cache, a step counter, an
RNG state). Its state is a module constant marked mutable (schema 1.5): the initial value in the
file, copied into a buffer of each loaded module's own at load. A load copies the state into a
fresh value; a store is remembered, and a later load in the same call reads the stored value;
when the function returns, each global it stored is written back (``GlobalStore``, a copy
command into the state), after every read of the old state -- so no fusion or reordering of the
reads can see a half-updated state. A store inside a loop or a conditional is refused by name
(its value would have to leave the block). Calls from several threads at once share the state,
as IREE's do: a stateful function is not reentrant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pyree.compiler.errors import CompileError
from pyree.compiler.input.constants import dense_contents
from pyree.compiler.input.dialects.stream import NamedParameterAttr
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import DTYPES, AffineExpr, Result
from pyree.compiler.tensor_program import Constant, Generic, GlobalStore, Value
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

GLOBAL_OPS = ("util.global", "ml_program.global")


@dataclass(frozen=True)
class Global:
    name: str
    dtype: str
    shape: tuple[int, ...]
    data: np.ndarray | None = None
    splat: float | int | bool | None = None
    parameter: tuple[str, str] | None = None
    mutable: bool = False


def read_globals(module: ModuleOp) -> dict[str, Global]:
    """The module's globals by symbol name."""
    return {g.name: g for g in (_read(op) for op in module.body.block.ops
                                 if op.name in GLOBAL_OPS)}


def _read(op: Operation) -> Global:
    where, name = location_of(op), op.sym_name.data
    mutable = op.is_mutable is not None
    if op.initial_value is None:
        raise CompileError(f"{op.name} @{name} has no initial value; initializer functions are "
                           "not supported", where)
    dtype, shape = tensor_type_of(op.type, where)
    value = op.initial_value
    if isinstance(value, NamedParameterAttr):
        if mutable:
            raise CompileError(f"mutable {op.name} @{name} initialized from a parameter is not "
                               "supported", where)
        return Global(name, dtype, shape, parameter=value.data)
    data, splat = dense_contents(value, dtype, shape, where)
    if not mutable:
        return Global(name, dtype, shape, data=data, splat=splat)
    if data is None:  # the state needs bytes of its own
        data = np.full(shape, splat, DTYPES[dtype])
    return Global(name, dtype, shape, data=data, mutable=True)


def lower_global_load(fn, op: Operation) -> None:
    where = location_of(op)
    g = _global(fn, op, where)
    if g.mutable:
        if g.name in fn.stored_globals:  # stored earlier in this call
            fn.env[op.result] = fn.stored_globals[g.name]
            return
        state = _state(fn, g, where)
        inputs = Inputs()
        index = AffineExpr.identity(len(g.shape))
        out = fn.result_value(op.result, where)
        fn.emit(Generic(inputs.values, [out], (Result(0, index, inputs.load(state, index)),),
                        g.shape, len(g.shape), where, op.name))
        return
    fn.emit(Constant(fn.result_value(op.result, where), data=g.data, splat=g.splat,
                     location=where, parameter=g.parameter, name=g.name))


def lower_global_store(fn, op: Operation) -> None:
    where = location_of(op)
    g = _global(fn, op, where, op.value[0].type)
    if not g.mutable:
        raise CompileError(f"{op.name} into @{g.name}, which is not mutable", where)
    if fn.ops is not fn.top_ops:
        raise CompileError(f"{op.name} inside a loop or a conditional is not supported (store "
                           "the value the control flow yields, after it)", where)
    fn.stored_globals[g.name] = fn.entry(op.value[0], where)


def write_back(fn) -> None:
    """At the function's end: each global it stored takes the value stored last."""
    for name, entry in fn.stored_globals.items():
        g = fn.globals[name]
        fn.emit(GlobalStore(fn.value_of(entry, fn.where), _state(fn, g, fn.where), fn.where))


def _state(fn, g: Global, where: str) -> Value:
    """The value of ``g``'s state (a mutable Constant; one module constant however often)."""
    state = fn.new_value(g.dtype, g.shape, g.name)
    fn.emit(Constant(state, data=g.data, location=where, name=g.name, mutable=True))
    return state


def _global(fn, op: Operation, where: str, type_=None) -> Global:
    name = op.global_name.root_reference.data
    g = fn.globals.get(name)
    if g is None:
        raise CompileError(f"{op.name} of @{name}, which no global declares", where)
    type_ = type_ or op.result.type
    if tensor_type_of(type_, where) != (g.dtype, g.shape):
        raise CompileError(f"{op.name} of @{name} as {type_}, but the global holds "
                           f"{'x'.join(map(str, g.shape + (g.dtype,)))}", where)
    return g
