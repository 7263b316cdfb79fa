"""A function with run-time sizes at one size: the static function its SizeExprs come to.

A dynamic function (schema 1.5: one with symbols) is one host program for every size in its
bounds. For one set of symbol values, every SizeExpr it holds (its types' dynamic dims, its
result and transient sizes, its buffer ranges and push constants, its shape guards: schema
1.6's size checks, each non-zero or the call is an InvocationError quoting its message) has
one value;
``instantiate`` writes them into a copy of the function, which is then a static function like
any other: the verifier checks its ranges and finds its clears, the VM records its command
buffers. The same walk checks every program's form at load, with ``size`` checking instead of
evaluating, so no expression is missed by one and seen by the other. A kernel with run-time
sizes has its grid in its export, per target, over the dispatch's push constants: ``grid``.
"""

from __future__ import annotations

import copy

from pyree.runtime.errors import InvocationError, ModuleError
from pyree.runtime.module.size_exprs import evaluate, spell

U32 = (1 << 32) - 1  # push constants and workgroup counts are 32-bit in the HAL
# Command kind -> its BufferRef fields (a dispatch's bindings are a list of its own).
_REFS = {1: ("copy", ("source", "target")), 2: ("fill", ("target",)),
         4: ("check", ("lhs", "rhs")), 5: ("branch", ("condition",))}
_KIND_NAMES = {0: "dispatch", 1: "copy", 2: "fill", 3: "barrier", 4: "check", 5: "branch"}


def instantiate(function, size, where: str):
    """A static copy of ``function`` (a FunctionT with symbols): each SizeExpr ``e`` replaced
    by ``size(label, e.code, limit)`` (``limit``: the largest value its field holds), each
    dynamic dim by its value. Objects without an expression are shared, not copied. Raises
    ModuleError for a dynamic dim without its expression; a missing table is left for the
    verifier to name. (A dispatch's grid is its export's, over its push constants: ``grid``.)"""
    def fail(label: str, what: str) -> ModuleError:
        return ModuleError(f"module file is invalid: {where}: {label}: {what}")

    def code(expr, label: str) -> list[int]:
        if expr is None or expr.code is None:
            raise fail(label, "a SizeExpr has no code")
        return [int(v) for v in expr.code]

    def tensor_type(t, label: str):
        if t is None or t.dims is None:
            return t
        dynamic = [d for d, n in enumerate(t.dims) if n == -1]
        exprs = t.dynamicDims or []
        if len(exprs) != len(dynamic):
            raise fail(label, f"has {len(dynamic)} dynamic dims but {len(exprs)} SizeExprs "
                              f"for them")
        if not exprs:
            return t
        static = copy.copy(t)
        static.dims = list(t.dims)
        for d, expr in zip(dynamic, exprs):
            static.dims[d] = size(f"{label} dim {d}", code(expr, f"{label} dim {d}"))
        static.dynamicDims = None
        return static

    def buffer_ref(ref, label: str):
        if ref is None or (ref.offsetExpr is None and ref.lengthExpr is None):
            return ref
        static = copy.copy(ref)
        if ref.offsetExpr is not None:
            static.offset = size(f"{label} offset", code(ref.offsetExpr, f"{label} offset"))
        if ref.lengthExpr is not None:
            static.length = size(f"{label} length", code(ref.lengthExpr, f"{label} length"))
        static.offsetExpr = static.lengthExpr = None
        return static

    for k, check in enumerate(function.sizeChecks or []):
        label = f"size check {k}"
        if check is None:
            raise fail(label, "is missing")
        if not size(label, code(check.condition, label)):
            raise InvocationError(f"{where}: {_text(check.message)} (the shape guard "
                                  f"`{spell(code(check.condition, label), _names(function))}` "
                                  f"at {_text(check.location) or 'an unknown location'} fails)")
    out = copy.copy(function)
    out.sizeChecks = None
    out.arguments = [tensor_type(t, f"argument {i}") for i, t in enumerate(function.arguments or [])]
    out.results = [tensor_type(t, f"result {i}") for i, t in enumerate(function.results or [])]
    if function.resultSizeExprs is not None:
        out.resultSizes = [size(f"result {i} size", code(e, f"result {i} size"))
                           for i, e in enumerate(function.resultSizeExprs)]
    if function.transientSizeExpr is not None:
        out.transientSize = size("transient size", code(function.transientSizeExpr,
                                                        "transient size"))
    out.symbols = out.resultSizeExprs = out.transientSizeExpr = None
    out.commands = []
    decided: dict[int, bool] = {}  # a size branch's command -> whether it is taken
    for c, command in enumerate(function.commands or []):
        label = f"command {c} ({_KIND_NAMES.get(command.kind, command.kind)})"
        if command.kind == 5 and command.branch is not None \
                and command.branch.conditionSize is not None:
            held = size(f"{label} condition", code(command.branch.conditionSize,
                                                   f"{label} condition")) != 0
            decided[c] = held != bool(command.branch.ifZero)
        elif command.kind == 0 and command.dispatch is not None:
            command = _dispatch(command, label, size, code, buffer_ref)
        elif command.kind in _REFS and getattr(command, _REFS[command.kind][0]) is not None:
            member_name, fields = _REFS[command.kind]
            member = copy.copy(getattr(command, member_name))
            for field in fields:
                setattr(member, field, buffer_ref(getattr(member, field), f"{label} {field}"))
            if command.kind == 4:
                member.lhsType = tensor_type(member.lhsType, f"{label} lhs type")
                member.rhsType = tensor_type(member.rhsType, f"{label} rhs type")
            command = copy.copy(command)
            setattr(command, member_name, member)
        out.commands.append(command)
    if decided:
        out.commands = _decide(out.commands, decided)
    return out


def _decide(commands: list, decided: dict[int, bool]) -> list:
    """``commands`` at one size: each size branch (``decided``: its command -> taken) not taken
    goes; one taken goes too where the next command left is where it lands (the compiler's
    size-chosen Ifs: the way not taken, between them, is unreachable and goes), else it stays as
    a plain jump. Every other branch stays, retargeted. The compiler put barriers as the straight
    run that is left needs (host/program.py), so no wait is lost with a branch that goes; a jump
    of the host program's own control flow (a value's If) is kept, with the landing it makes."""
    count = len(commands)

    def successors(i: int) -> tuple[int, ...]:
        b = commands[i].branch if commands[i].kind == 5 else None
        if b is None:
            return (i + 1,)
        if i in decided:
            return (b.target,) if decided[i] else (i + 1,)
        return (b.target,) if b.condition is None else (i + 1, b.target)

    reached, todo = set(), [0]
    while todo:
        i = todo.pop()
        if i < count and i not in reached:
            reached.add(i)
            todo.extend(successors(i))
    kept = [i for i in range(count) if i in reached and decided.get(i, True)]

    def landing(target: int) -> int:  # the first command left from ``target`` on
        return next((k for k in kept if k >= target), count)

    while True:  # (dropping one may make the one before land on the next command too)
        idle = [j for n, j in enumerate(kept) if decided.get(j)
                and landing(commands[j].branch.target) == (kept[n + 1] if n + 1 < len(kept)
                                                           else count)]
        if not idle:
            break
        kept = [k for k in kept if k not in idle]
    index = {old: new for new, old in enumerate(kept)}
    out = []
    for i in kept:
        command = commands[i]
        if command.kind == 5 and command.branch is not None:
            branch = copy.copy(command.branch)
            branch.target = index.get(landing(branch.target), len(kept))
            if i in decided:  # taken, and not onto the next command: a plain jump
                branch.conditionSize = None
            command = copy.copy(command)
            command.branch = branch
        out.append(command)
    return out


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value or "")


def _names(function) -> list[str]:
    return [_text(s.name) for s in function.symbols or []]


def _dispatch(command, label: str, size, code, buffer_ref):
    d = command.dispatch
    static = copy.copy(d)
    static.bindings = [buffer_ref(r, f"{label} binding {b}") for b, r in enumerate(d.bindings or [])]
    if d.pushConstantExprs is not None:
        static.pushConstants = [size(f"{label} push constant {k}",
                                     code(e, f"{label} push constant {k}"), U32)
                                for k, e in enumerate(d.pushConstantExprs)]
    static.pushConstantExprs = None
    out = copy.copy(command)
    out.dispatch = static
    return out


def grid(export, push_constants: list[int]) -> tuple[int, int, int] | None:
    """The workgroups a dispatch of ``export`` runs where its kernel has run-time sizes (schema
    1.5: a CpuExport's ``workgroup_count_expr`` as (count, 1, 1), a GpuExport's
    ``grid_size_expr``): its programs over the dispatch's push constants (symbol k is push
    constant k). None where the grid is the export's static one. Raises SizeError, or IndexError
    for a program that reads a push constant the dispatch lacks (the verifier names both)."""
    programs = getattr(export, "workgroupCountExpr", None)
    programs = [programs] if programs is not None else getattr(export, "gridSizeExpr", None)
    if programs is None:
        return None
    values = [evaluate([int(v) for v in p.code], push_constants) for p in programs]
    return (values[0], 1, 1) if len(values) == 1 else tuple(values)
