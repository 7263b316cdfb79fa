"""Records a function's host program once: HAL command buffers against binding-table slots,
split wherever the host must read values (a check, a branch) and wherever a branch lands.

Each (buffer kind, index) the commands touch gets one slot; a call builds its binding table from
``Program.sources`` and submits each command buffer as is. The first one starts with the zero
fills the verifier found necessary (``function.clears``). That keeps a call to one crossing per
command buffer -- one for a function without checks or control flow.
"""

from __future__ import annotations

from pyree.runtime.errors import DriverError
from pyree.runtime.hal.device import CommandBuffer, Device, Executable
from pyree.runtime.hal.ffi import STATUS, ffi
from pyree.runtime.module.instance import grid
from pyree.runtime.module.verifier import BUFFER_KINDS, CHECK_KINDS, COMMAND_KINDS
from pyree.runtime.records import Record
from pyree.runtime.vm.checks import CheckStep, Operand
from pyree.runtime.vm.tensor_type import TensorType

_HAL_KINDS = {"dispatch": 0, "copy": 1, "fill": 2, "barrier": 3}
BARRIER = ("barrier", 0, [], [], 0, 0, None)  # (a HAL command as _Recorder.hal_command makes it)


class BranchStep(Record):
    """Go on at step ``target`` when ``condition`` (None: always) is non-zero, or zero with
    ``if_zero``; else at the next step."""

    condition: Operand | None
    if_zero: bool
    target: int


class Program(Record):
    sources: list[tuple[str, int]]                       # slot -> (buffer kind, index)
    # in order; each command buffer's ``contents`` says what its HAL commands are: (kind,
    # kernel ordinal, bytes) each, in order (a dispatch's bytes: its bindings'; a copy's or
    # fill's: its range). A trace names the commands a driver timed by their index there.
    steps: list[CommandBuffer | CheckStep | BranchStep]
    # per tied result (schema 1.10): (result, argument, a command buffer copying the argument
    # into the result), which a call submits first unless the caller donated the argument
    ties: tuple = ()

    @property
    def submits_only(self) -> bool:
        """No step needs the host between submits: the fast path of a call."""
        return all(isinstance(s, CommandBuffer) for s in self.steps)


class _Recorder:
    def __init__(self, device: Device, executable: Executable | None, exports: list):
        self.device = device
        self.executable = executable
        self.exports = exports  # the module's export tables of ``executable``
        self.slots: dict[tuple[str, int], int] = {}

    def slot(self, ref) -> int:
        kind = BUFFER_KINDS[ref.kind]
        key = (kind, 0 if kind in ("transient", "readback") else ref.index)
        return self.slots.setdefault(key, len(self.slots))

    def bindings(self, refs) -> list[tuple[int, int, int]]:
        return [(self.slot(r), r.offset, r.length) for r in refs]

    def hal_command(self, command) -> tuple | None:
        """(kind, kernel, bindings, push constants, fill pattern, its length, workgroups): a
        dispatch's workgroups are what its kernel's run-time grid comes to over its push
        constants, or None for its export's static grid; None for a dispatch whose grid has a 0
        (it runs nothing, and no driver sees it)."""
        kind = COMMAND_KINDS[command.kind]
        if kind == "dispatch":
            d = command.dispatch
            workgroups = grid(self.exports[d.kernel], d.pushConstants)  # (verified)
            if workgroups is not None and 0 in workgroups:
                return None
            return kind, d.kernel, self.bindings(d.bindings), d.pushConstants, 0, 0, workgroups
        if kind == "copy":
            return (kind, 0, self.bindings([command.copy.source, command.copy.target]), [], 0, 0,
                    None)
        if kind == "fill":
            f = command.fill
            return kind, 0, self.bindings([f.target]), [], f.pattern, f.patternLength, None
        return kind, 0, [], [], 0, 0, None

    def clear_command(self, clear) -> tuple:
        """A zero fill of a Clear, in 4-byte words where it is aligned to them."""
        width = 4 if clear.offset % 4 == 0 and clear.length % 4 == 0 else 1
        return "fill", 0, self.bindings([clear]), [], 0, width, None

    def record(self, batch: list[tuple]) -> CommandBuffer:
        keep = []
        array, commands = self.device.command_array(len(batch))
        for c, (kind, kernel, bindings, push, pattern, pattern_length, workgroups) in zip(commands,
                                                                                       batch):
            c.kind, c.export_ordinal = _HAL_KINDS[kind], kernel
            c.executable = self.executable.handle if kind == "dispatch" else 0
            bound = ffi.new("pyree_hal_binding_t[]", [{"slot": s, "offset": o, "length": n}
                                                      for s, o, n in bindings])
            push_array = ffi.new("uint32_t[]", push)
            keep += [bound, push_array]
            c.binding_count, c.bindings = len(bindings), bound
            c.push_constant_count, c.push_constants = len(push), push_array
            c.fill_pattern, c.fill_pattern_length = pattern, pattern_length
            if workgroups is not None:
                if not self.device.workgroup_counts:
                    raise DriverError(f"device '{self.device.uri}': its driver predates HAL ABI "
                                      f"revision 5, so it cannot run a dispatch whose workgroup "
                                      f"count is computed per call (a function with run-time "
                                      f"sizes); update the driver",
                                      STATUS["UNIMPLEMENTED"], "UNIMPLEMENTED")
                c.workgroup_count = workgroups
        return self.device.create_command_buffer(array, len(batch), len(self.slots))


def _operand(ref, t) -> Operand:
    return Operand(BUFFER_KINDS[ref.kind], ref.index, ref.offset, ref.length, TensorType.from_fb(t))


def record(function, device: Device, executable: Executable | None, exports: list) -> Program:
    """Records ``function`` (a verified FunctionT) for ``device``, which runs ``executable``,
    the module's executable whose export tables are ``exports``."""
    recorder = _Recorder(device, executable, exports)
    # a tied result's copy from its argument, its slots taken first (every command buffer is
    # recorded for the whole table)
    tie_copies = []
    for r, a in getattr(function, "ties", {}).items():
        size = TensorType.from_fb(function.arguments[a]).nbytes
        if size:
            tie_copies.append((r, a, size, [("copy", 0, recorder.bindings(
                [_Ref(0, a, 0, size), _Ref(1, r, 0, size)]), [], 0, 0, None)]))
    commands = function.commands
    landings = {c.branch.target for c in commands if COMMAND_KINDS[c.kind] == "branch"}
    # the verifier's clears (module/coverage.py) open the first command buffer, and a barrier
    # closes them: a device that runs commands out of order (Vulkan) otherwise let a fill land
    # after the dispatch that writes the same bytes (a convolution's patches, zeroed under its
    # GEMM: 3-11% of calls wrong on NVIDIA's driver, BENCHMARKS.md); a branch never lands on
    # them (a landing starts a step of its own)
    plan: list[list[tuple] | CheckStep | BranchStep] = [
        [*map(recorder.clear_command, function.clears), BARRIER]] if function.clears else []
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
                                  c.message or ""))
        elif kind == "branch":
            b = command.branch
            condition = None if b.condition is None else _scalar_operand(b.condition, b.conditionType)
            plan.append(BranchStep(condition, bool(b.ifZero), b.target))  # a command index for now
        else:
            if i in landings or not plan or not isinstance(plan[-1], list):
                plan.append([])
            hal_command = recorder.hal_command(command)
            if hal_command is not None:
                plan[-1].append(hal_command)
    step_at.append(len(plan))
    steps = [recorder.record(p) if isinstance(p, list)
             else BranchStep(p.condition, p.if_zero, step_at[p.target]) if isinstance(p, BranchStep)
             else p for p in plan]
    for step, p in zip(steps, plan):
        if isinstance(step, CommandBuffer):
            step.contents = tuple((kind, kernel, sum(n for _, _, n in bindings)
                                   if kind == "dispatch" else bindings[0][2] if bindings else 0)
                                  for kind, kernel, bindings, *_ in p)
    ties = []
    for r, a, size, batch in tie_copies:
        copy = recorder.record(batch)
        copy.contents = (("copy", 0, size),)
        ties.append((r, a, copy))
    return Program(sorted(recorder.slots, key=recorder.slots.__getitem__), steps, tuple(ties))


class _Ref(Record):
    """A range of a call's buffer of a kind (schema BufferKind: 0 argument, 1 result)."""

    kind: int
    index: int
    offset: int
    length: int


def _scalar_operand(ref, element_type: int) -> Operand:
    return Operand(BUFFER_KINDS[ref.kind], ref.index, ref.offset, ref.length,
                   TensorType.of(element_type, ()))
