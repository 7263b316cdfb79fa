"""Records a function's host program once: HAL command buffers against binding-table slots,
split wherever the host must read values (a check, a branch) and wherever a branch lands.

Each (buffer kind, index) the commands touch gets one slot; a call builds its binding table from
``Program.sources`` and submits each command buffer as is. The first one starts with the zero
fills the verifier found necessary (``function.clears``). That keeps a call to one crossing per
command buffer -- one for a function without checks or control flow.
"""

from __future__ import annotations

from pyree.runtime.hal.device import CommandBuffer, Device, Executable
from pyree.runtime.hal.ffi import ffi
from pyree.runtime.module.verifier import BUFFER_KINDS, CHECK_KINDS, COMMAND_KINDS
from pyree.runtime.records import Record
from pyree.runtime.vm.checks import CheckStep, Operand
from pyree.runtime.vm.tensor_type import TensorType

_HAL_KINDS = {"dispatch": 0, "copy": 1, "fill": 2, "barrier": 3}


class BranchStep(Record):
    """Go on at step ``target`` when ``condition`` (None: always) is non-zero, or zero with
    ``if_zero``; else at the next step."""

    condition: Operand | None
    if_zero: bool
    target: int


class Program(Record):
    sources: list[tuple[str, int]]                       # slot -> (buffer kind, index)
    steps: list[CommandBuffer | CheckStep | BranchStep]  # in order
    # per step, what its HAL commands are: (kind, kernel ordinal, bytes) each, in order (a
    # dispatch's bytes: its bindings'; a copy's or fill's: its range); () for a host step. A
    # trace names the commands a driver timed by their index in their command buffer.
    contents: list[tuple[tuple[str, int, int], ...]]

    @property
    def submits_only(self) -> bool:
        """No step needs the host between submits: the fast path of a call."""
        return all(isinstance(s, CommandBuffer) for s in self.steps)


class _Recorder:
    def __init__(self, device: Device, executable: Executable | None):
        self.device = device
        self.executable = executable
        self.slots: dict[tuple[str, int], int] = {}

    def slot(self, ref) -> int:
        kind = BUFFER_KINDS[ref.kind]
        key = (kind, 0 if kind in ("transient", "readback") else ref.index)
        return self.slots.setdefault(key, len(self.slots))

    def bindings(self, refs) -> list[tuple[int, int, int]]:
        return [(self.slot(r), r.offset, r.length) for r in refs]

    def hal_command(self, command) -> tuple:
        kind = COMMAND_KINDS[command.kind]
        if kind == "dispatch":
            d = command.dispatch
            return kind, d.kernel, self.bindings(d.bindings), d.pushConstants, 0, 0
        if kind == "copy":
            return kind, 0, self.bindings([command.copy.source, command.copy.target]), [], 0, 0
        if kind == "fill":
            f = command.fill
            return kind, 0, self.bindings([f.target]), [], f.pattern, f.patternLength
        return kind, 0, [], [], 0, 0

    def clear_command(self, clear) -> tuple:
        """A zero fill of a Clear, in 4-byte words where it is aligned to them."""
        width = 4 if clear.offset % 4 == 0 and clear.length % 4 == 0 else 1
        return "fill", 0, self.bindings([clear]), [], 0, width

    def record(self, batch: list[tuple]) -> CommandBuffer:
        keep = []
        commands = ffi.new("pyree_hal_command_t[]", len(batch))
        for c, (kind, kernel, bindings, push, pattern, pattern_length) in zip(commands, batch):
            c.kind, c.export_ordinal = _HAL_KINDS[kind], kernel
            c.executable = self.executable.handle if kind == "dispatch" else 0
            array = ffi.new("pyree_hal_binding_t[]", [{"slot": s, "offset": o, "length": n}
                                                      for s, o, n in bindings])
            push_array = ffi.new("uint32_t[]", push)
            keep += [array, push_array]
            c.binding_count, c.bindings = len(bindings), array
            c.push_constant_count, c.push_constants = len(push), push_array
            c.fill_pattern, c.fill_pattern_length = pattern, pattern_length
        return self.device.create_command_buffer(commands, len(batch), len(self.slots))


def _operand(ref, t) -> Operand:
    return Operand(BUFFER_KINDS[ref.kind], ref.index, ref.offset, ref.length, TensorType.from_fb(t))


def record(function, device: Device, executable: Executable | None) -> Program:
    """Records ``function`` (a verified FunctionT) for ``device``."""
    recorder = _Recorder(device, executable)
    commands = function.commands
    landings = {c.branch.target for c in commands if COMMAND_KINDS[c.kind] == "branch"}
    # the verifier's clears (module/coverage.py) open the first command buffer; a branch never
    # lands on them (a landing starts a step of its own)
    plan: list[list[tuple] | CheckStep | BranchStep] = [
        [recorder.clear_command(c) for c in function.clears]] if function.clears else []
    step_at: list[int] = []  # command index -> the step that runs it (or the next one)
    for i, command in enumerate(commands):
        kind = COMMAND_KINDS[command.kind]
        step_at.append(len(plan) if i in landings or not plan or not isinstance(plan[-1], list)
                       else len(plan) - 1)
        if kind == "check":
            c = command.check
            check = CHECK_KINDS[c.kind]
            rhs = _operand(c.rhs, c.rhsType) if check in ("expect_eq", "expect_almost_eq") else None
            plan.append(CheckStep(check, c.location, _operand(c.lhs, c.lhsType), rhs, c.atol, c.rtol,
                                  c.message))
        elif kind == "branch":
            b = command.branch
            condition = None if b.condition is None else _scalar_operand(b.condition, b.conditionType)
            plan.append(BranchStep(condition, bool(b.ifZero), b.target))  # a command index for now
        else:
            if i in landings or not plan or not isinstance(plan[-1], list):
                plan.append([])
            plan[-1].append(recorder.hal_command(command))
    step_at.append(len(plan))
    steps = [recorder.record(p) if isinstance(p, list)
             else BranchStep(p.condition, p.if_zero, step_at[p.target]) if isinstance(p, BranchStep)
             else p for p in plan]
    contents = [tuple((kind, kernel, sum(n for _, _, n in bindings) if kind == "dispatch"
                       else bindings[0][2] if bindings else 0)
                      for kind, kernel, bindings, *_ in p) if isinstance(p, list) else ()
                for p in plan]
    return Program(sorted(recorder.slots, key=recorder.slots.__getitem__), steps, contents)


def _scalar_operand(ref, element_type: int) -> Operand:
    return Operand(BUFFER_KINDS[ref.kind], ref.index, ref.offset, ref.length,
                   TensorType.of(element_type, ()))
