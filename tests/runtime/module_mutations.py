"""Hostile rewrites of real module files, re-stamped so that they pass the digest: what a module
built to attack the runtime looks like, not a damaged one.

``mutants(module, rng)`` unpacks a module with the compiler's object API, applies one or two
rewrites of the kinds a hostile-input sweep found dangerous (bindings, exports and their
layouts, symbols, library references and lengths, commands, workgroup counts and grids, push
constants, constants, function signatures, raw bytes of the FlatBuffer) and packs it again
around the same data segment. Each mutant carries a description and the functions it touched.
Sizes grow at most a few times: a module may always ask for more memory than a host has, which
is a different test.
"""

from __future__ import annotations

import random

from pyree.compiler._fb.BindingLayout import BindingLayoutT
from pyree.compiler._fb.Command import CommandT
from pyree.compiler._fb.Module import Module, ModuleT
from pyree.compiler.module_writer import ModuleBuilder

from .module_factory import restamp

DISPATCH, COPY, FILL, BARRIER, CHECK, BRANCH = range(6)
CPU_SYMBOLS = ("abort", "free", "exit", "malloc", "sched_yield", "pyree_local_task_worker_v2",
               "pyree_local_task_execute_v2", "pyree_local_task_post_v2", "_init", "_fini")
BIG = (0, 1, 3, 255, 1 << 16, (1 << 31) - 1, (1 << 32) - 1)


class Mutant:
    def __init__(self, data: bytes, what: str, functions: set[str]):
        self.data, self.what, self.functions = data, what, functions


def _unpack(data: bytes) -> tuple[ModuleT, bytes]:
    """The module's tree, its scalar vectors (numpy arrays in the object API) made lists, and
    its data segment."""
    root_end = int.from_bytes(data[-40:-32], "little")
    tree = ModuleT.InitFromObj(Module.GetRootAs(data[:root_end], 0))

    def lists(obj, *fields):
        for field in fields:
            value = getattr(obj, field)
            setattr(obj, field, None if value is None else [int(v) for v in value])

    for f in tree.functions or []:
        lists(f, "resultSizes")
        for t in (f.arguments or []) + (f.results or []):
            lists(t, "dims")
        for c in f.commands or []:
            if c.dispatch is not None:
                lists(c.dispatch, "pushConstants")
            if c.check is not None:
                for t in (c.check.lhsType, c.check.rhsType):
                    if t is not None:
                        lists(t, "dims")
    for c in tree.constants or []:
        lists(c.type, "dims")
    for e in tree.executables or []:
        for member in (e.cuda, e.rocm, e.spirv):
            for x in (member.exports or []) if member is not None else []:
                lists(x, "gridSize", "blockSize")
    return tree, data[root_end:-48]


def _pack(tree: ModuleT, segment: bytes) -> bytes:
    builder = ModuleBuilder("", "")
    builder.module, builder._data = tree, bytearray(segment)
    return builder.finish()


class _Rewriter:
    """One rewrite of ``tree``; ``touched`` collects the functions whose program changed."""

    def __init__(self, tree: ModuleT, rng: random.Random):
        self.tree, self.rng = tree, rng
        self.touched: set[str] = set()

    def pick(self, items):
        return self.rng.choice(items) if items else None

    def commands(self, *kinds):
        """(function, index, command) of every command of ``kinds``."""
        return [(f, i, c) for f in self.tree.functions or [] for i, c in enumerate(f.commands or [])
                if c.kind in kinds]

    def refs(self):
        """(function, BufferRef) of every reference a command makes."""
        out = []
        for f, _, c in self.commands(DISPATCH, COPY, FILL, CHECK, BRANCH):
            if getattr(c, ("dispatch", "copy", "fill", "", "check", "branch")[c.kind]) is None:
                continue  # an earlier rewrite changed its kind
            if c.kind == DISPATCH:
                refs = c.dispatch.bindings or []
            elif c.kind == COPY:
                refs = [c.copy.source, c.copy.target]
            elif c.kind == FILL:
                refs = [c.fill.target]
            elif c.kind == CHECK:
                refs = [c.check.lhs, c.check.rhs]
            else:
                refs = [c.branch.condition]
            out += [(f, r) for r in refs if r is not None]
        return out

    def exports(self):
        out = []
        for e in self.tree.executables or []:
            member = e.cpu or e.cuda or e.rocm or e.spirv
            out += [(member, x) for x in member.exports or []]
        return out

    def size(self, value: int) -> int:
        r = self.rng
        return r.choice([0, 1, value // 2, max(value - 4, 0), value + 4, value - 64 if value > 64
                         else value + 64, value * 2])

    # -- rewrites: each returns its description, or None where the module has nothing to rewrite

    def binding(self):
        f, ref = self.pick(self.refs()) or (None, None)
        if ref is None:
            return None
        field = self.rng.choice(["kind", "index", "offset", "length"])
        old = getattr(ref, field)
        new = {"kind": lambda: self.rng.randrange(5), "index": lambda: old + self.rng.choice([-1, 1, 2]),
               "offset": lambda: self.size(old), "length": lambda: self.size(old)}[field]()
        setattr(ref, field, max(new, 0))
        self.touched.add(f.name)
        return f"{f.name}: a binding's {field} {old} -> {getattr(ref, field)}"

    def drop_binding(self):
        f, i, c = self.pick(self.commands(DISPATCH)) or (None, None, None)
        if c is None or c.dispatch is None or not c.dispatch.bindings:
            return None
        b = self.rng.randrange(len(c.dispatch.bindings))
        del c.dispatch.bindings[b]
        shorten = self.rng.random() < 0.7   # the export's layout shortened to match
        if shorten:
            for member, export in self.exports():
                index = member.exports.index(export)
                if index == c.dispatch.kernel and export.bindings:
                    del export.bindings[-1]
        self.touched.add(f.name)
        return f"{f.name} command {i}: binding {b} dropped" + (", layouts shortened" if shorten else "")

    def layout(self):
        _, export = self.pick(self.exports()) or (None, None)
        if export is None or not export.bindings:
            return None
        layout = self.rng.choice(export.bindings)
        if self.rng.random() < 0.5:
            layout.access = self.rng.randrange(3)
            return f"a layout's access -> {layout.access}"
        old = layout.minLength
        layout.minLength = self.size(old)
        return f"a layout's min length {old} -> {layout.minLength}"

    def add_layout(self):
        _, export = self.pick(self.exports()) or (None, None)
        if export is None:
            return None
        extra = BindingLayoutT()
        extra.access, extra.minLength = self.rng.randrange(3), self.rng.choice([0, 4, 64])
        (export.bindings or []).append(extra)
        return "a layout gained a binding"

    def workgroups(self):
        member, export = self.pick(self.exports()) or (None, None)
        if export is None:
            return None
        value = self.rng.choice(BIG)
        if hasattr(export, "workgroupCount"):
            old, export.workgroupCount = export.workgroupCount, value
            return f"workgroup count {old} -> {value}"
        field = self.rng.choice(["gridSize", "blockSize"])
        sizes = list(getattr(export, field) or [1, 1, 1])
        axis = self.rng.randrange(len(sizes))
        sizes[axis] = value
        setattr(export, field, sizes)
        return f"{field}[{axis}] -> {value}"

    def symbol(self):
        member, export = self.pick(self.exports()) or (None, None)
        if export is None:
            return None
        names = [x.symbol if hasattr(x, "symbol") else x.name for x in member.exports]
        choices = list(CPU_SYMBOLS) + names + [names[0] + b"x" if isinstance(names[0], bytes)
                                               else names[0] + "x", ""]
        new = self.rng.choice(choices)
        if hasattr(export, "symbol"):
            export.symbol = new
        else:
            export.name = new
        return f"an export named {new!r}"

    def library(self):
        executable = self.pick(self.tree.executables or [])
        if executable is None:
            return None
        member = executable.cpu or executable.cuda or executable.rocm or executable.spirv
        field = {"cpu": "library", "cuda": self.rng.choice(["ptx", "cubin"]), "rocm": "codeObject",
                 "spirv": "code"}[next(k for k in ("cpu", "cuda", "rocm", "spirv")
                                       if getattr(executable, k) is not None)]
        ref = getattr(member, field)
        old = (ref.offset, ref.length)
        choice = self.rng.randrange(5)
        if choice == 0:
            ref.length = self.rng.choice([64, ref.length // 2, max(ref.length - 1, 1),
                                          max(ref.length - 4, 1), max(ref.length - 4096, 1)])
        elif choice == 1:
            ref.length += self.rng.choice([1, 64])
        elif choice == 2:
            ref.offset = max(ref.offset + self.rng.choice([-64, 64, 4096]), 0)
        elif choice == 3:
            other = self.pick([c.data for c in self.tree.constants or [] if c.data is not None])
            if other is None:
                return None
            ref.offset, ref.length = other.offset, other.length
        else:
            ref.offset, ref.length = 0, ref.length
        return f"{field} {old} -> {(ref.offset, ref.length)}"

    def command(self):
        f = self.pick([f for f in self.tree.functions or [] if f.commands])
        if f is None:
            return None
        commands, r = f.commands, self.rng
        i = r.randrange(len(commands))
        c = commands[i]
        choice = r.randrange(7)
        self.touched.add(f.name)
        if choice == 0:
            del commands[i]
            return f"{f.name}: command {i} deleted"
        if choice == 1:
            commands.insert(r.randrange(len(commands) + 1), commands[i])
            return f"{f.name}: command {i} repeated"
        if choice == 2:
            j = r.randrange(len(commands))
            commands[i], commands[j] = commands[j], commands[i]
            return f"{f.name}: commands {i} and {j} swapped"
        if choice == 3:
            old, c.kind = c.kind, r.randrange(6)
            return f"{f.name}: command {i} kind {old} -> {c.kind}"
        if choice == 4 and c.kind == DISPATCH and c.dispatch is not None:
            old, c.dispatch.kernel = c.dispatch.kernel, r.randrange(len(self.exports()) or 1)
            return f"{f.name}: command {i} dispatches kernel {c.dispatch.kernel}, not {old}"
        if choice == 5 and c.kind == BRANCH and c.branch is not None:
            b = c.branch
            if r.random() < 0.5:
                old, b.target = b.target, r.randrange(len(commands) + 1)
                return f"{f.name}: branch {i} target {old} -> {b.target}"
            b.ifZero = not b.ifZero
            return f"{f.name}: branch {i} inverted"
        barrier = CommandT()
        barrier.kind = BARRIER
        commands[i] = barrier
        return f"{f.name}: command {i} became a barrier"

    def push_constants(self):
        f, i, c = self.pick(self.commands(DISPATCH)) or (None, None, None)
        if c is None or c.dispatch is None:
            return None
        push = list(c.dispatch.pushConstants or [])
        if push and self.rng.random() < 0.5:
            if self.rng.random() < 0.5:
                push.pop()
            else:
                push[self.rng.randrange(len(push))] = self.rng.choice(BIG)
        else:
            push.append(self.rng.choice(BIG))
        c.dispatch.pushConstants = push
        self.touched.add(f.name)
        return f"{f.name} command {i}: push constants -> {push}"

    def constant(self):
        constant = self.pick(self.tree.constants or [])
        if constant is None or constant.data is None:
            return None
        if self.rng.random() < 0.5:
            dims = list(constant.type.dims or [])
            if not dims:
                return None
            axis = self.rng.randrange(len(dims))
            dims[axis] = self.size(dims[axis])
            constant.type.dims = dims
            constant.data.length = self.size(constant.data.length) if self.rng.random() < 0.5 \
                else constant.data.length
            return f"a constant's dims -> {dims}"
        constant.data.offset = max(constant.data.offset + self.rng.choice([-64, 64]), 0)
        return "a constant's data moved"

    def signature(self):
        f = self.pick(self.tree.functions or [])
        if f is None:
            return None
        self.touched.add(f.name)
        r = self.rng
        choice = r.randrange(4)
        if choice == 0 and f.resultSizes:
            k = r.randrange(len(f.resultSizes))
            f.resultSizes[k] = min(self.size(f.resultSizes[k]), 4 * f.resultSizes[k] + 64)
            return f"{f.name}: result size {k} -> {f.resultSizes[k]}"
        if choice == 1:
            old, f.transientSize = f.transientSize, min(self.size(f.transientSize),
                                                         4 * f.transientSize + 64)
            return f"{f.name}: transient {old} -> {f.transientSize}"
        types = [t for t in (f.arguments or []) + (f.results or [])]
        t = self.pick(types)
        if t is None:
            return None
        if choice == 2 and t.dims:
            axis = r.randrange(len(t.dims))
            t.dims[axis] = min(self.size(t.dims[axis]), 4 * t.dims[axis] + 4)
            return f"{f.name}: a type's dims -> {t.dims}"
        t.elementType = r.randrange(13)
        return f"{f.name}: a type's element type -> {t.elementType}"

    def readback(self):
        f = self.pick([f for f in self.tree.functions or [] if f.readbackSize])
        if f is None:
            return None
        self.touched.add(f.name)
        old, f.readbackSize = f.readbackSize, self.size(f.readbackSize)
        return f"{f.name}: readback {old} -> {f.readbackSize}"


REWRITES = ("binding", "binding", "binding", "drop_binding", "layout", "add_layout", "workgroups",
            "symbol", "library", "command", "command", "push_constants", "constant", "signature",
            "readback")


def mutant(data: bytes, rng: random.Random) -> Mutant:
    """One hostile variant of ``data``: one or two object-level rewrites, or a few raw bytes of
    the FlatBuffer changed; the digest re-stamped either way."""
    tree, segment = _unpack(data)
    names = {(f.name.decode() if isinstance(f.name, bytes) else f.name)
             for f in tree.functions or []}
    if rng.random() < 0.15:
        root_end = int.from_bytes(data[-40:-32], "little")
        out = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            out[rng.randrange(root_end)] ^= rng.randint(1, 255)
        return Mutant(restamp(out), "raw bytes of the FlatBuffer changed", names)
    rewriter, what = _Rewriter(tree, rng), []
    while not what or (len(what) < 2 and rng.random() < 0.3):
        done = getattr(rewriter, rng.choice(REWRITES))()
        if done:
            what.append(done)
    touched = {n.decode() if isinstance(n, bytes) else n for n in rewriter.touched}
    return Mutant(_pack(tree, segment), "; ".join(map(str, what)), touched or names)
