"""Lowers one ``func.func`` to a tensor program Function: the SSA environment and its rules.

Each MLIR value maps to one of three things: a tensor program ``Value`` (tensors, and scalars
computed at run time as rank-0 tensors), a kernel ``Const`` (scalar constants, kept symbolic so
they fold into the kernels that use them), or ``Empty`` (``tensor.empty``: a shape with no
contents). ``tensor()`` and ``scalar()`` turn any of them into what a use needs, emitting a
Constant only where one is really needed. Unused ops are dropped at the end.
"""

from __future__ import annotations

import dataclasses
import math
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from pyree.compiler.errors import CompileError
from pyree.compiler.input.checks import check_generic
from pyree.compiler.input.constants import python_scalar
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.scalar import is_scalar_op, zero
from pyree.compiler.input.types import dtype_of, is_tensor, tensor_type_of
from pyree.compiler.kernel import (
    DTYPES,
    Binding,
    Const,
    Expr,
    Kernel,
    Result,
    SizeValue,
    evaluate,
    map_result,
    reads,
    size_value,
    walk,
)
from pyree.compiler.sizes import Size, substitute
from pyree.compiler.tensor_program import (
    Check,
    Constant,
    Function,
    Generic,
    GlobalStore,
    If,
    Op,
    SizeCheck,
    Symbol,
    Value,
    View,
    While,
    defined_by,
    read_by,
    size_values,
    walk_ops,
)
from xdsl.dialects import func
from xdsl.ir import SSAValue


@dataclass(eq=False)
class Empty:
    """``tensor.empty``: only its shape matters; reading it reads zeros."""

    dtype: str
    shape: tuple  # ints, or ``Size``s for run-time dims


@dataclass(eq=False)
class Dim:
    """An ``index`` scalar that is a run-time size (``tensor.dim`` of a ``?`` dim, and index
    arithmetic on it): kept as its ``Size``, for the shapes it gives (``tensor.empty``)."""

    size: Size


@dataclass(eq=False)
class Tuple:
    """An XLA tuple (``stablehlo.tuple``): its elements' entries, kept while a function is
    lowered; taking one apart costs nothing, and an exported function's are flattened."""

    elements: list

    def __str__(self) -> str:
        return "a tuple (stablehlo.tuple and get_tuple_element take it apart)"


Entry = Value | Const | Empty | Dim | Tuple


class FunctionLowering:
    def __init__(self, op: func.FuncOp, functions: dict[str, func.FuncOp], globals: dict | None = None):
        self.op = op
        self.where = location_of(op)
        self.functions = functions  # the module's, by name: callees to inline
        self.globals = globals or {}  # the module's util.globals by name (input/globals.py)
        self.inlining = [op.sym_name.data]  # the chain of calls being inlined
        self.ops: list[Op] = []
        self.env: dict[SSAValue, Entry] = {}
        self._names: set[str] = set()
        # id(Const or Empty entry) -> (the entry, kept alive so that its id is not reused
        # once an inlined callee's environment is rebound; its Constant's value)
        self._materialized: dict[int, tuple[Entry, Value]] = {}
        self._splats: dict[Value, Const] = {}  # results of splat Constants -> their element
        self.symbols: list[Symbol] = []  # the function's run-time sizes, in order
        self.size_checks: list[SizeCheck] = []  # cf.assert on sizes the sizes do not decide
        self.stored_globals: dict = {}  # name -> what util.global.store last wrote (globals.py)
        self.top_ops = self.ops  # the function's own op list (a store is refused in a block)
        self.scatter_atomics = False  # every target writes at computed places (input/scatter.py)
        self.scatter_dtypes: frozenset[str] | None = None  # ... of these dtypes (None: all)
        self.line_walks = False  # every target walks a line (input/sort_scan.py)
        self.dispatch_cost = 1.0  # the targets' highest ``Backend.dispatch_cost``

    # ---- values ----------------------------------------------------------------------------

    def new_value(self, dtype: str, shape: tuple[int, ...], hint: str | None = None) -> Value:
        base = hint or str(len(self._names))
        name, n = base, 0
        while name in self._names:
            n += 1
            name = f"{base}_{n}"
        self._names.add(name)
        return Value(dtype, tuple(shape), name)

    def new_symbol(self) -> Size:
        """A fresh run-time size of this function (a ``?`` dim of an argument)."""
        symbol = Symbol(f"s{len(self.symbols)}")
        self.symbols.append(symbol)
        return Size.symbol(symbol.name)

    def bound(self, size, low: int, high: int | None, divisor: int) -> None:
        """Narrows the bounds of the symbol ``size`` is (a size that is not one symbol alone
        is left as it is): what the caller may pass, checked per call by the runtime."""
        name = _bare_symbol(size)
        for k, sym in enumerate(self.symbols):
            if sym.name == name:
                self.symbols[k] = _narrowed(sym, low, high, divisor)

    def unifiable(self, a, b) -> bool:
        """Whether ``unify`` can make ``a`` and ``b`` one size: one is a symbol of this
        function that the other does not contain."""
        names = {sym.name for sym in self.symbols}

        def replaceable(x, y) -> bool:
            name = _bare_symbol(x)
            return name in names and not (isinstance(y, Size) and name in y.symbols())
        return a == b or replaceable(a, b) or replaceable(b, a)

    def unify(self, a, b, where: str):
        """Two dims the op needs equal: where one is a symbol of this function's arguments
        not yet tied to anything, it becomes the other everywhere (the runtime then checks
        the argument against it, as IREE's shape checks do); what cannot be tied must already
        be equal. Returns the dim both are."""
        if a == b:
            return a
        order = [sym.name for sym in self.symbols if sym.hidden is None]
        position = lambda size: order.index(_bare_symbol(size)) if _bare_symbol(size) in order \
            else -1
        # The later symbol goes: the first argument's name for a size stays.
        old, new = (a, b) if position(a) > position(b) else (b, a)
        if position(old) >= 0 and self.unifiable(old, new):
            self._replace_symbol(_bare_symbol(old), new)
            return new
        hidden = {sym.name: sym.hidden for sym in self.symbols if sym.hidden is not None}
        if hidden and substitute(a, hidden) == substitute(b, hidden):
            # Equal by the values only the host program knows (input/flow_tensor.py): one
            # hidden size stands for both where both are; else each keeps its own.
            if _bare_symbol(a) in hidden and _bare_symbol(b) in hidden:
                self._replace_symbol(_bare_symbol(b), a)
            return a
        raise CompileError(f"this op needs dims {a} and {b} to be equal; pyree cannot tell "
                           "that they are", where)

    def _replace_symbol(self, name: str, new) -> None:
        old = next(sym for sym in self.symbols if sym.name == name)
        self.symbols = [sym for sym in self.symbols if sym.name != name]
        self.bound(new, old.min, old.max, old.divisor)  # the same size: both bounds hold
        mapping = {name: new}
        seen: set[int] = set()
        values = [e for e in self.env.values() if isinstance(e, (Value, Empty, Dim))]
        for op in walk_ops(self.ops):
            values += defined_by(op) + read_by(op)
            if isinstance(op, View):
                op.byte_offset = substitute(op.byte_offset, mapping)
            if isinstance(op, Generic):
                op.loop_ranges = tuple(substitute(d, mapping) for d in op.loop_ranges)
                if size_values(op):
                    op.outputs = tuple(map_result(r, lambda e: size_value(
                        substitute(e.size, mapping), e.dtype) if isinstance(e, SizeValue)
                        else None) for r in op.outputs)
        self.size_checks = [dataclasses.replace(c, condition=substitute(c.condition, mapping))
                            for c in self.size_checks]
        for ssa, entry in list(self.env.items()):  # a size that is a constant now
            if isinstance(entry, Dim) and not isinstance(substitute(entry.size, mapping), Size):
                self.env[ssa] = Const(substitute(entry.size, mapping), dtype_of(ssa.type, ""))
        for entry in values:
            if id(entry) in seen:
                continue
            seen.add(id(entry))
            if isinstance(entry, Dim):
                entry.size = substitute(entry.size, mapping)
            else:
                entry.shape = tuple(substitute(d, mapping) for d in entry.shape)

    def result_value(self, ssa: SSAValue, where: str) -> Value:
        """A fresh Value of ``ssa``'s type, named after it, bound to it. A ``?`` dim of the
        type takes its size from the op: a destination-style op's result is its ``outs``
        operand's shape; an elementwise op's, its operands'. Any other op with a ``?`` result
        is refused by name."""
        dtype, shape = tensor_type_of(ssa.type, where, dynamic=True)
        if None in shape:
            shape = self._run_time_shape(ssa, shape, where)
        return self.bind_value(ssa, dtype, shape)

    def bind_value(self, ssa: SSAValue, dtype: str, shape: tuple) -> Value:
        """A fresh Value of this dtype and shape, named after ``ssa``, bound to it."""
        value = self.new_value(dtype, shape, ssa.name_hint)
        self.env[ssa] = value
        return value

    def _run_time_shape(self, ssa: SSAValue, shape: tuple, where: str) -> tuple:
        op = ssa.owner
        outputs = getattr(op, "outputs", None)
        if outputs is None and getattr(op, "init", None) is not None:  # broadcast, reduce
            outputs = [op.init]
        if outputs is not None and len(outputs) > ssa.index:
            like = [outputs[ssa.index]]
        elif is_scalar_op(op.name):
            like = [v for v in op.operands if is_tensor(v.type)]
        else:
            raise CompileError(f"dynamic dimensions are not supported yet in the result of "
                               f"'{op.name}' ({ssa.type})", where)
        for operand in like:
            entry = self.entry(operand, where)
            if isinstance(entry, (Value, Empty)) and len(entry.shape) == len(shape):
                return tuple(d if d is not None else o for d, o in zip(shape, entry.shape))
        raise CompileError(f"cannot tell the run-time shape of the result of '{op.name}' "
                           f"({ssa.type})", where)

    @contextmanager
    def callee(self, name: str, where: str, what: str):
        """Yields function ``@name`` to inline into this one; ``what`` names the inlining in the
        error of a recursion (which cannot be inlined)."""
        if name in self.inlining:
            chain = " -> ".join(f"@{f}" for f in (*self.inlining, name))
            raise CompileError(f"recursive {what} @{name} cannot be inlined ({chain})", where)
        self.inlining.append(name)
        try:
            yield self.functions[name]
        finally:
            self.inlining.pop()

    @contextmanager
    def block(self):
        """Lowers into a fresh op list, a control-flow block's, which it yields; constants
        materialized inside stay inside (a block's values are not visible after it)."""
        saved = self.ops, self._materialized
        self.ops, self._materialized = [], dict(self._materialized)
        try:
            yield self.ops
        finally:
            self.ops, self._materialized = saved

    def emit(self, op: Op) -> None:
        if isinstance(op, Generic):
            check_generic(op)
        self.ops.append(op)
        if isinstance(op, Constant) and op.splat is not None:
            self._splats[op.result] = Const(op.splat, op.result.dtype)

    def entry(self, ssa: SSAValue, where: str) -> Entry:
        if ssa not in self.env:  # xDSL parses uses before definitions; MLIR forbids them
            name = f"%{ssa.name_hint}" if ssa.name_hint else "a value"
            raise CompileError(f"{name} is used before its definition", where)
        return self.env[ssa]

    def tensor(self, ssa: SSAValue, where: str) -> Value:
        """``ssa`` as a Value, emitting a Constant for a scalar constant or an empty tensor."""
        return self.value_of(self.entry(ssa, where), where, ssa.name_hint)

    def value_of(self, entry: Entry, where: str, hint: str | None = None) -> Value:
        """An entry as a Value (what ``tensor`` does once the SSA value is looked up)."""
        if isinstance(entry, Value):
            return entry
        if not isinstance(entry, (Const, Empty)):  # a value only some rules read (a complex)
            raise CompileError(f"{entry} cannot be used here", where)
        if id(entry) not in self._materialized:
            if isinstance(entry, Const):
                value = self.new_value(entry.dtype, (), hint)
                data = np.array(entry.value, DTYPES[entry.dtype])
                self.emit(Constant(value, data=data, location=where))
            else:
                value = self.new_value(entry.dtype, entry.shape, hint)
                self.emit(Constant(value, splat=zero(entry.dtype).value, location=where))
            self._materialized[id(entry)] = (entry, value)
        return self._materialized[id(entry)][1]

    def scalar(self, ssa: SSAValue, inputs: Inputs, where: str) -> Expr:
        """A scalar ``ssa`` as an expression of the Generic whose inputs are ``inputs``."""
        entry = self.entry(ssa, where)
        if isinstance(entry, Const):
            return entry
        if isinstance(entry, Value) and entry.shape == ():
            return inputs.load(entry, ())
        if isinstance(entry, Dim):  # the kernel reads it from a push constant
            return SizeValue(entry.size, dtype_of(ssa.type, where))
        raise CompileError("a tensor used where a scalar is expected", where)

    def splat_of(self, ssa: SSAValue) -> Const | None:
        """The one value every element of ``ssa`` holds, when known at compile time."""
        entry = self.env.get(ssa)
        if isinstance(entry, Empty):
            return zero(entry.dtype)
        if isinstance(entry, Value):
            return self._splats.get(entry)
        return None

    def define_scalar(self, ssa: SSAValue, expr: Expr, inputs: Inputs, where: str,
                      origin: str) -> None:
        """Binds a scalar ``ssa`` to ``expr``: folded to a Const when it loads nothing and
        reads no run-time size, else computed by a rank-0 Generic."""
        if not reads(expr) and not any(isinstance(e, SizeValue) for e in walk(expr)):
            self.env[ssa] = fold(expr)
            return
        result = self.result_value(ssa, where)
        self.emit(Generic(inputs.values, [result], (Result(0, (), expr),), (), 0, where, origin))

    # ---- the function ----------------------------------------------------------------------

    def finish(self, args: list[Value], results: list[Value]) -> Function:
        name = self.op.sym_name.data
        checks = [c for c in self.size_checks if c.condition != 1]  # unified since: decided
        return Function(name, args, _live_ops(self.ops, results), results, self.where,
                        self.symbols, checks)


def _narrowed(sym: Symbol, low: int, high: int | None, divisor: int) -> Symbol:
    highs = [h for h in (sym.max, high) if h is not None]
    return dataclasses.replace(sym, min=max(sym.min, low), max=min(highs) if highs else None,
                               divisor=math.lcm(sym.divisor, divisor))


def _bare_symbol(value) -> str | None:
    """The name of a size that is one symbol alone, else None."""
    if isinstance(value, Size) and len(value.symbols()) == 1:
        name = next(iter(value.symbols()))
        if value == Size.symbol(name):
            return name
    return None


def fold(expr: Expr) -> Const:
    """The value of an expression that loads nothing, computed by the reference interpreter."""
    kernel = Kernel("fold", (), 0, (Binding(expr.dtype, (), "write"),), (Result(0, (), expr),))
    out = np.zeros((), DTYPES[expr.dtype])
    evaluate(kernel, [out])
    return Const(python_scalar(out[()], expr.dtype), expr.dtype)


def _live_ops(ops: list[Op], results: list[Value]) -> list[Op]:
    """``ops`` without those whose results nothing uses (checks, and control flow that may
    hold them, are always used)."""
    live: set[Value] = set(results)
    kept: list[Op] = []
    for op in reversed(ops):
        if isinstance(op, (Check, If, While, GlobalStore)) or any(v in live for v in defined_by(op)):
            live.update(read_by(op))
            kept.append(op)
    kept.reverse()
    return kept
