"""The host program: the commands a function runs, written as the module's Function table.

Commands run in order, branches aside. A barrier separates two commands when the later one
touches bytes the earlier one wrote (or writes bytes it read); drivers that run everything in
order may ignore it. A branch or a place a branch lands ends the run of commands recorded into
one command buffer (the runtime waits for the work before it reads a condition), so the
barrier bookkeeping starts afresh there.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from pyree.compiler import sizes
from pyree.compiler._fb.Branch import BranchT
from pyree.compiler._fb.BufferKind import BufferKind
from pyree.compiler._fb.BufferRef import BufferRefT
from pyree.compiler._fb.Check import CheckT
from pyree.compiler._fb.CheckKind import CheckKind
from pyree.compiler._fb.Command import CommandT
from pyree.compiler._fb.CommandKind import CommandKind
from pyree.compiler._fb.Copy import CopyT
from pyree.compiler._fb.Dispatch import DispatchT
from pyree.compiler._fb.ElementType import ElementType
from pyree.compiler._fb.Fill import FillT
from pyree.compiler._fb.Function import FunctionT
from pyree.compiler._fb.SizeCheck import SizeCheckT
from pyree.compiler._fb.SizeExpr import SizeExprT
from pyree.compiler._fb.Symbol import SymbolT
from pyree.compiler._fb.TensorType import TensorTypeT
from pyree.compiler.errors import CompileError
from pyree.compiler.host.linearize import Branch, Copy, Label, Step
from pyree.compiler.host.planning import Plan
from pyree.compiler.kernel import DTYPES
from pyree.compiler.module_writer import size_expr_table
from pyree.compiler.sizes import Size
from pyree.compiler.tensor_program import (
    Check,
    Constant,
    Function,
    Generic,
    SizeCheck,
    Symbol,
    Value,
    parameters_of,
)

_ELEMENT_TYPES = {"index": ElementType.i64, **{
    name: getattr(ElementType, name) for name in DTYPES if hasattr(ElementType, name)}}


class Symbols(NamedTuple):
    """What the host program knows of a function's symbols: the caller's, numbered as the
    function declares them, and the hidden ones' values (``Symbol.hidden``), which the host
    program writes as the numbers they are."""

    index: dict[str, int]
    hidden: dict[str, int]


NO_SYMBOLS = Symbols({}, {})


def tensor_type(value: Value, symbols: Symbols = NO_SYMBOLS) -> TensorTypeT:
    """A run-time dim is -1 in ``dims``, its expression in ``dynamic_dims`` (over the
    function's ``symbols``; a constant's type has none)."""
    shape = [known(d, symbols) for d in value.shape]
    t = TensorTypeT()
    t.elementType = _ELEMENT_TYPES[value.dtype]
    t.dims = [-1 if isinstance(d, Size) else d for d in shape]
    if any(isinstance(d, Size) for d in shape):
        t.dynamicDims = [size_expr(d, symbols) for d in shape if isinstance(d, Size)]
    return t


def known(value, symbols: Symbols):
    """``value`` with the hidden symbols' values put in: an int where no other is left."""
    return sizes.substitute(value, symbols.hidden) if symbols.hidden else value


def size_expr(value, symbols: Symbols) -> SizeExprT:
    code = sizes.code(known(value, symbols), symbols.index, balanced=True)
    at = 0
    while at < len(code):  # a constant the runtime refuses would make the module fail to load
        if code[at] in (sizes.CONST, sizes.SYM):
            if code[at] == sizes.CONST and not 0 <= code[at + 1] <= sizes.LIMIT:
                raise CompileError(f"the run-time size {value} needs the constant {code[at + 1]}, "
                                   "outside the [0, 2^53] a module's size programs may hold")
            at += 2
        else:
            at += 1
    return size_expr_table(code)


def _symbol(symbol: Symbol) -> SymbolT:
    out = SymbolT()
    out.name, out.min, out.divisor = symbol.name, symbol.min, symbol.divisor
    out.max = -1 if symbol.max is None else symbol.max
    return out


def _size_check(check: SizeCheck, symbols: Symbols) -> SizeCheckT:
    out = SizeCheckT()
    out.condition = size_expr(check.condition, symbols)
    out.message, out.location = check.message, check.location
    return out


def _holds_bytes(value: Value) -> bool:
    """Whether ``value`` may hold bytes: a run-time size may be zero only at run time."""
    return isinstance(value.num_bytes, Size) or value.num_bytes > 0


def emit_function(function: Function, steps: list[Step], plan: Plan,
                  kernel_ordinals: dict[Generic, int]) -> FunctionT:
    callers = [symbol for symbol in function.symbols if symbol.hidden is None]
    symbols = Symbols({symbol.name: k for k, symbol in enumerate(callers)},
                      {s.name: s.hidden for s in function.symbols if s.hidden is not None})
    result_sizes = [known(n, symbols) for n in plan.result_sizes]
    transient_size = known(plan.transient_size, symbols)
    out = FunctionT()
    out.name = function.name
    out.location = function.location
    out.arguments = [tensor_type(v, symbols) for v in function.arguments]
    out.results = [tensor_type(v, symbols) for v in function.results]
    out.resultSizes = [0 if isinstance(n, Size) else n for n in result_sizes]
    out.transientSize = 0 if isinstance(transient_size, Size) else transient_size
    if callers:
        out.symbols = [_symbol(symbol) for symbol in callers]
        out.resultSizeExprs = [size_expr(n, symbols) for n in result_sizes]
        out.transientSizeExpr = size_expr(transient_size, symbols)
    # (also where every size is hidden: a check over them alone is then a constant condition)
    out.sizeChecks = [_size_check(check, symbols) for check in function.size_checks] or None
    if plan.tied:
        out.tiedResults = [plan.tied.get(r, -1) for r in range(len(function.results))]
    emitter = _Emitter(plan, symbols)
    for step in steps:
        if isinstance(step, Generic) and any(_holds_bytes(v) for v in step.results):
            for r in step.outputs:
                if r.scatter is None:
                    continue
                original, result = step.inputs[r.scatter.start], step.results[r.binding]
                # a scatter's result starts as a copy of its original, unless it is in place
                # or tied to it (the runtime then starts it so)
                if _holds_bytes(result) and plan.storage[original] != plan.storage[result] \
                        and not _tied(plan, original, result):
                    emitter.copy(original, emitter.ref(result))
            emitter.dispatch(kernel_ordinals[step], step.inputs, step.results,
                             parameters_of(step))
        elif isinstance(step, Constant) and step.splat is not None:
            emitter.fill(step.result, step.splat)
        elif isinstance(step, Check):
            emitter.check(step)
        elif isinstance(step, Copy) and _holds_bytes(step.source):
            emitter.copy(step.source, emitter.ref(step.target))
        elif isinstance(step, Label):
            emitter.label(step)
        elif isinstance(step, Branch):
            emitter.branch(step)
    for index, value in plan.result_copies:
        emitter.copy(value, emitter.buffer_ref(BufferKind.result, index, 0, value.num_bytes))
    out.commands = emitter.finish()
    out.readbackSize = emitter.readback_size
    return out


def _tied(plan: Plan, original: Value, result: Value) -> bool:
    kept, made = plan.storage[original], plan.storage[result]
    return kept.kind == "argument" and made.kind == "result" and plan.tied.get(made.index) == kept.index


class _Emitter:
    def __init__(self, plan: Plan, symbols: Symbols):
        self.plan = plan
        self.symbols = symbols
        self.commands: list[CommandT] = []
        self._pending: list[tuple[tuple[int, int, int, int], bool]] = []  # ranges since last barrier
        self._labels: dict[Label, int] = {}  # label -> the index of the command it precedes
        self._branches: list[tuple[BranchT, Label]] = []
        # a size-chosen If's label -> the ranges pending on the branches and jumps to it
        self._arriving: dict[Label, list] = {}
        self.readback_size = 0
        # a tied argument's bytes are its result's where the caller donates it: one range
        self._same = {(BufferKind.argument, a): (BufferKind.result, r) for r, a in plan.tied.items()}

    def label(self, label: Label) -> None:
        """The runtime waits for the work before it reads a condition, so barriers start afresh
        at a label; not at a size-chosen If's, which the runtime removes: there the ranges
        pending on every way in still are."""
        self._labels[label] = len(self.commands)
        self._pending = self._pending + self._arriving.pop(label, []) if label.by_size else []

    def branch(self, step: Branch) -> None:
        """The condition is copied into the readback area first: the host reads it there, in
        mapped memory where the device has it, instead of with a transfer of its own. A size
        condition is an expression over the symbols (``condition_size``), a size-chosen If's
        jump the constant 1: the runtime tells them from the host program's own jumps."""
        b = BranchT()
        if step.by_size:
            self._arriving.setdefault(step.target, []).extend(self._pending)
            # a jump is a size branch that always holds, which the runtime removes alike
            b.conditionSize = size_expr(1 if step.condition is None else step.condition,
                                        self.symbols)
            if step.condition is None:  # nothing falls through to the next command
                self._pending = []
        elif step.condition is not None:
            readback = BufferRefT()
            readback.kind, readback.index = BufferKind.readback, 0
            readback.offset, readback.length = self.readback_size, step.condition.num_bytes
            self.readback_size += -(-readback.length // 8) * 8
            self.copy(step.condition, readback)
            b.condition = readback
            b.conditionType = _ELEMENT_TYPES[step.condition.dtype]
        b.ifZero = step.if_zero
        self._branches.append((b, step.target))
        cmd = CommandT()
        cmd.kind, cmd.branch = CommandKind.branch, b
        self.commands.append(cmd)
        if not step.by_size:
            self._pending = []

    def finish(self) -> list[CommandT]:
        for b, label in self._branches:
            b.target = self._labels[label]
        return self.commands

    def ref(self, value: Value) -> BufferRefT:
        s = self.plan.storage[value]
        return self.buffer_ref(getattr(BufferKind, s.kind), s.index, s.offset, value.num_bytes)

    def buffer_ref(self, kind: int, index: int, offset, length) -> BufferRefT:
        """A range whose offset or length may be a run-time size (then 0 in the static field,
        its expression beside it)."""
        offset, length = known(offset, self.symbols), known(length, self.symbols)
        r = BufferRefT()
        r.kind, r.index = kind, index
        r.offset = 0 if isinstance(offset, Size) else offset
        r.length = 0 if isinstance(length, Size) else length
        if isinstance(offset, Size):
            r.offsetExpr = size_expr(offset, self.symbols)
        if isinstance(length, Size):
            r.lengthExpr = size_expr(length, self.symbols)
        return r

    def dispatch(self, kernel: int, inputs: list[Value], results: list[Value],
                 parameters: list[Size]) -> None:
        d = DispatchT()
        d.kernel = kernel
        d.bindings = [self.ref(v) for v in inputs + results]
        parameters = [known(p, self.symbols) for p in parameters]
        d.pushConstants = []
        if any(isinstance(p, Size) for p in parameters):
            d.pushConstantExprs = [size_expr(p, self.symbols) for p in parameters]
        elif parameters:  # every size the kernel takes is one the host program knows
            d.pushConstants = parameters
        self._add(CommandKind.dispatch, "dispatch", d, reads=d.bindings[:len(inputs)],
                  writes=d.bindings[len(inputs):])

    def fill(self, value: Value, scalar) -> None:
        f = FillT()
        f.target = self.ref(value)
        raw = np.array(scalar, dtype=DTYPES[value.dtype]).tobytes()
        f.patternLength = len(raw)
        f.pattern = int.from_bytes(raw, "little")
        self._add(CommandKind.fill, "fill", f, reads=[], writes=[f.target])

    def copy(self, value: Value, target: BufferRefT) -> None:
        c = CopyT()
        c.source, c.target = self.ref(value), target
        self._add(CommandKind.copy, "copy", c, reads=[c.source], writes=[target])

    def check(self, op: Check) -> None:
        c = CheckT()
        c.kind = getattr(CheckKind, op.kind)
        c.lhs, c.lhsType = self.ref(op.lhs), tensor_type(op.lhs, self.symbols)
        if op.rhs is not None:
            c.rhs, c.rhsType = self.ref(op.rhs), tensor_type(op.rhs, self.symbols)
        c.atol, c.rtol, c.location = op.atol, op.rtol, op.location
        c.message = op.message or None
        cmd = CommandT()
        cmd.kind, cmd.check = CommandKind.check, c
        self.commands.append(cmd)

    def _add(self, kind: int, member: str, payload, reads: list[BufferRefT],
             writes: list[BufferRefT]) -> None:
        touched = [(self._span(r), False) for r in reads] + [(self._span(w), True) for w in writes]
        if any(_overlaps(a, b) and (wa or wb) for a, wa in touched for b, wb in self._pending):
            barrier = CommandT()
            barrier.kind = CommandKind.barrier
            self.commands.append(barrier)
            self._pending = []
        self._pending.extend(touched)
        cmd = CommandT()
        cmd.kind = kind
        setattr(cmd, member, payload)
        self.commands.append(cmd)

    def _span(self, ref: BufferRefT) -> tuple:
        """(kind, index, start, end); None for start and end when a bound is a run-time size.
        A tied argument's range is its result's."""
        kind, index = self._same.get((ref.kind, ref.index), (ref.kind, ref.index))
        if ref.offsetExpr is not None or ref.lengthExpr is not None:
            return kind, index, None, None
        return kind, index, ref.offset, ref.offset + ref.length


def _overlaps(a, b) -> bool:
    """Ranges sized at run time overlap whatever else their buffer holds (a barrier too many
    costs little; one too few is a race)."""
    if a[0] != b[0] or a[1] != b[1]:
        return False
    return a[2] is None or b[2] is None or (a[2] < b[3] and b[2] < a[3])
