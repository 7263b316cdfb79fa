"""The host program: the commands a function runs, written as the module's Function table.

Commands run in order, branches aside. A barrier separates two commands when the later one
touches bytes the earlier one wrote (or writes bytes it read); drivers that run everything in
order may ignore it. A branch or a place a branch lands ends the run of commands recorded into
one command buffer (the runtime waits for the work before it reads a condition), so the
barrier bookkeeping starts afresh there.
"""

from __future__ import annotations

import numpy as np
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
from pyree.compiler._fb.TensorType import TensorTypeT
from pyree.compiler.host.linearize import Branch, Copy, Label, Step
from pyree.compiler.host.planning import Plan
from pyree.compiler.kernel import DTYPES
from pyree.compiler.tensor_program import Check, Constant, Function, Generic, Value

_ELEMENT_TYPES = {"index": ElementType.i64, **{
    name: getattr(ElementType, name) for name in DTYPES if hasattr(ElementType, name)}}


def tensor_type(value: Value) -> TensorTypeT:
    t = TensorTypeT()
    t.elementType = _ELEMENT_TYPES[value.dtype]
    t.dims = list(value.shape)
    return t


def emit_function(function: Function, steps: list[Step], plan: Plan,
                  kernel_ordinals: dict[Generic, int]) -> FunctionT:
    out = FunctionT()
    out.name = function.name
    out.location = function.location
    out.arguments = [tensor_type(v) for v in function.arguments]
    out.results = [tensor_type(v) for v in function.results]
    out.resultSizes = list(plan.result_sizes)
    out.transientSize = plan.transient_size
    emitter = _Emitter(plan)
    for step in steps:
        if isinstance(step, Generic) and any(v.num_bytes for v in step.results):
            emitter.dispatch(kernel_ordinals[step], step.inputs, step.results)
        elif isinstance(step, Constant) and step.splat is not None:
            emitter.fill(step.result, step.splat)
        elif isinstance(step, Check):
            emitter.check(step)
        elif isinstance(step, Copy) and step.source.num_bytes:
            emitter.copy(step.source, emitter.ref(step.target))
        elif isinstance(step, Label):
            emitter.label(step)
        elif isinstance(step, Branch):
            emitter.branch(step)
    for index, value in plan.result_copies:
        target = BufferRefT()
        target.kind, target.index, target.offset, target.length = (
            BufferKind.result, index, 0, value.num_bytes)
        emitter.copy(value, target)
    out.commands = emitter.finish()
    out.readbackSize = emitter.readback_size
    return out


class _Emitter:
    def __init__(self, plan: Plan):
        self.plan = plan
        self.commands: list[CommandT] = []
        self._pending: list[tuple[tuple[int, int, int, int], bool]] = []  # ranges since last barrier
        self._labels: dict[Label, int] = {}  # label -> the index of the command it precedes
        self._branches: list[tuple[BranchT, Label]] = []
        self.readback_size = 0

    def label(self, label: Label) -> None:
        self._labels[label] = len(self.commands)
        self._pending = []

    def branch(self, step: Branch) -> None:
        """The condition is copied into the readback area first: the host reads it there, in
        mapped memory where the device has it, instead of with a transfer of its own."""
        b = BranchT()
        if step.condition is not None:
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
        self._pending = []

    def finish(self) -> list[CommandT]:
        for b, label in self._branches:
            b.target = self._labels[label]
        return self.commands

    def ref(self, value: Value) -> BufferRefT:
        s = self.plan.storage[value]
        r = BufferRefT()
        r.kind = getattr(BufferKind, s.kind)
        r.index, r.offset, r.length = s.index, s.offset, value.num_bytes
        return r

    def dispatch(self, kernel: int, inputs: list[Value], results: list[Value]) -> None:
        d = DispatchT()
        d.kernel = kernel
        d.bindings = [self.ref(v) for v in inputs + results]
        d.pushConstants = []
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
        c.lhs, c.lhsType = self.ref(op.lhs), tensor_type(op.lhs)
        if op.rhs is not None:
            c.rhs, c.rhsType = self.ref(op.rhs), tensor_type(op.rhs)
        c.atol, c.rtol, c.location = op.atol, op.rtol, op.location
        c.message = op.message or None
        cmd = CommandT()
        cmd.kind, cmd.check = CommandKind.check, c
        self.commands.append(cmd)

    def _add(self, kind: int, member: str, payload, reads: list[BufferRefT],
             writes: list[BufferRefT]) -> None:
        touched = [(_span(r), False) for r in reads] + [(_span(w), True) for w in writes]
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


def _span(ref: BufferRefT) -> tuple[int, int, int, int]:
    return ref.kind, ref.index, ref.offset, ref.offset + ref.length


def _overlaps(a, b) -> bool:
    return a[0] == b[0] and a[1] == b[1] and a[2] < b[3] and b[2] < a[3]
