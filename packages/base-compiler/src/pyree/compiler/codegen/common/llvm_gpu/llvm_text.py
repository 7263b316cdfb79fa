"""A tiny LLVM IR text writer for GPU kernels: SSA temporaries, blocks, intrinsics, constants.

Kernels are written naively (allocas for loop state, repeated address arithmetic); LLVM's O3
pipeline (``machine.py``) promotes allocas to registers and removes the redundancy.

What differs between GPU targets (thread/block id reads, barriers, the kernel calling convention
and attributes, private allocas, cross-lane shuffles, the triple) is asked of ``Module.target``:
``codegen/cuda/nvptx.py``'s ``NvptxTarget`` for ``cuda``, ``codegen/rocm/amdgpu.py``'s
``AmdgpuTarget`` for ``rocm``. The kernel templates in this folder are written once against
this interface.
"""

from __future__ import annotations

import struct

import numpy as np
from pyree.compiler.kernel import DTYPES

LLVM_TYPE = {
    "f32": "float", "f16": "half", "f64": "double", "bf16": "bfloat",
    "i1": "i1", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64",
    "ui8": "i8", "ui16": "i16", "ui32": "i32", "ui64": "i64", "index": "i64",
}


def llvm_type(dtype: str) -> str:
    return LLVM_TYPE[dtype]


def storage_type(dtype: str) -> str:
    """How a value of ``dtype`` lives in memory (i1 is one byte)."""
    return "i8" if dtype == "i1" else LLVM_TYPE[dtype]


def const(value, dtype: str) -> str:
    """LLVM IR spelling of a constant: floats in hex, the only spelling for NaN and ±inf."""
    ty = LLVM_TYPE[dtype]
    if ty in ("half", "bfloat"):
        with np.errstate(over="ignore"):
            bits = int(np.array(value, dtype=DTYPES[dtype]).view(np.uint16))
        return f"0x{'H' if ty == 'half' else 'R'}{bits:04X}"
    if ty in ("float", "double"):  # as a double, of the value rounded to the type
        with np.errstate(over="ignore"):
            v = float(np.float32(value)) if ty == "float" else float(value)
        return f"0x{struct.unpack('<Q', struct.pack('<d', v))[0]:016X}"
    if ty == "i1":
        return "true" if value else "false"
    return str(int(value))


class Function:
    """One kernel's body: ``op`` appends ``%tN = <text>`` and returns ``%tN``."""

    def __init__(self, module: Module):
        self.module = module
        self.lines: list[str] = []
        self.entry_allocas: list[str] = []
        self.sizes = None  # a kernel with run-time sizes: its size_values.SizeValues
        self._n = 0

    def op(self, text: str) -> str:
        self._n += 1
        name = f"%t{self._n}"
        self.lines.append(f"  {name} = {text}")
        return name

    def entry_op(self, text: str) -> str:
        """``op`` in the entry block, before the body's first line: a value that dominates every
        use (a kernel's run-time sizes)."""
        self._n += 1
        name = f"%t{self._n}"
        self.entry_allocas.append(f"  {name} = {text}")
        return name

    def raw(self, text: str) -> None:
        self.lines.append(f"  {text}")

    def new_label(self, hint: str) -> str:
        self._n += 1
        return f"{hint}{self._n}"

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")

    def br(self, target: str) -> None:
        self.raw(f"br label %{target}")

    def cbr(self, cond: str, yes: str, no: str) -> None:
        self.raw(f"br i1 {cond}, label %{yes}, label %{no}")

    def alloca(self, ty: str) -> str:
        self._n += 1
        name = f"%a{self._n}"
        self.entry_allocas += self.module.target.alloca(name, ty)
        return name

    def call(self, ret: str, fn: str, args: list[tuple[str, str]], attrs: str = "",
             library: bool = False) -> str:
        self.module.declare(ret, fn, [t for t, _ in args], attrs, library)
        text = f"call {ret} @{fn}({', '.join(f'{t} {v}' for t, v in args)})"
        if ret == "void":
            self.raw(text)
            return ""
        return self.op(text)

    def special(self, reg: str) -> str:
        """A thread/block id or block size as i32, by its PTX name: tid.x, ctaid.y, ntid.x, ..."""
        return self.module.target.special(self, reg)

    def barrier(self) -> None:
        """A block-wide barrier that also orders shared memory."""
        self.module.target.barrier(self)

    def inline_asm(self, ret: str, asm: str, constraints: str, args: list[tuple[str, str]],
                   convergent: bool = False) -> str:
        """``convergent``: LLVM must not move the instruction into (or copy it onto) paths that
        only some threads take: a barrier, or an instruction every thread of a warp must run
        together (``.aligned``)."""
        arglist = ", ".join(f"{t} {v}" for t, v in args)
        text = f'call {ret} asm sideeffect "{asm}", "{constraints}"({arglist})' + \
            (" convergent" if convergent else "")
        if ret == "void":
            self.raw(text)
            return ""
        return self.op(text)

    # -- counted loops over i64, with the body written by a callback --------------------------
    def loop(self, start: str, end: str, step: str, body, unroll: int = 1) -> None:
        """``for (i = start; i < end; i += step) body(i)`` (i64, unsigned compare). With
        ``unroll`` > 1, trips that have ``unroll`` steps left run that many bodies unguarded (their
        loads can be in flight together), then the rest one at a time."""
        slot = self.alloca("i64")
        self.raw(f"store i64 {start}, ptr {slot}")
        if unroll > 1:
            head, inner, rest = (self.new_label(x) for x in ("uloop", "ubody", "urest"))
            self.br(head)
            self.label(head)
            i = self.op(f"load i64, ptr {slot}")
            reach = self.op(f"mul i64 {step}, {unroll - 1}")
            last = self.op(f"add i64 {i}, {reach}")
            self.cbr(self.op(f"icmp ult i64 {last}, {end}"), inner, rest)
            self.label(inner)
            for u in range(unroll):
                body(i if u == 0 else self.op(f"add i64 {i}, {self.op(f'mul i64 {step}, {u}')}"))
            advance = self.op(f"mul i64 {step}, {unroll}")
            self.raw(f"store i64 {self.op(f'add i64 {i}, {advance}')}, ptr {slot}")
            self.br(head)
            self.label(rest)
        head, inner, done = (self.new_label(x) for x in ("loop", "body", "done"))
        self.br(head)
        self.label(head)
        i = self.op(f"load i64, ptr {slot}")
        self.cbr(self.op(f"icmp ult i64 {i}, {end}"), inner, done)
        self.label(inner)
        body(i)
        self.raw(f"store i64 {self.op(f'add i64 {i}, {step}')}, ptr {slot}")
        self.br(head)
        self.label(done)

    def if_then(self, cond: str, body) -> None:
        yes, done = self.new_label("then"), self.new_label("endif")
        self.cbr(cond, yes, done)
        self.label(yes)
        body()
        self.br(done)
        self.label(done)

    def if_else(self, cond: str, yes_body, no_body) -> None:
        yes, no, done = self.new_label("then"), self.new_label("else"), self.new_label("endif")
        self.cbr(cond, yes, no)
        for label, body in ((yes, yes_body), (no, no_body)):
            self.label(label)
            body()
            self.br(done)
        self.label(done)


class Module:
    """Kernels plus the declarations and shared-memory globals they use. Each kernel keeps its
    own globals and attribute group, so that ``parts`` can write groups of kernels as separate
    LLVM modules, which LLVM then optimizes and emits on several cores (``codegen/common/parallel.py``)."""

    def __init__(self, data_layout: str, target):
        self.data_layout = data_layout
        self.target = target
        self.declarations: dict[str, str] = {}
        self._globals: list[str] = []  # those of the kernel being written, until add_kernel
        self._kernels: list[tuple[list[str], str, str, str]] = []  # globals, head, attrs, body

    def declare(self, ret: str, fn: str, arg_types: list[str], attrs: str = "",
                library: bool = False) -> None:
        """An intrinsic, or (``library``) a device-library function from ``target.library_math``."""
        if not fn.startswith("llvm.") and not library:
            raise ValueError(fn)
        self.declarations.setdefault(fn, f"declare {ret} @{fn}({', '.join(arg_types)}) {attrs}")

    def shared_array(self, name: str, elem: str, count: int, align: int = 16) -> str:
        self._globals.append(
            f"@{name} = internal addrspace(3) global [{count} x {elem}] undef, align {align}")
        return f"@{name}"

    def device_array(self, name: str, count: int, align: int) -> str:
        """A zeroed device-memory (global) array of ``count`` bytes, one per loaded module."""
        self._globals.append(
            f"@{name} = internal addrspace(1) global [{count} x i8] zeroinitializer, align {align}")
        return f"@{name}"

    def dynamic_shared(self, name: str, elem: str) -> str:
        """The kernel's dynamic shared memory (its size is the export's shared_memory_bytes)."""
        self._globals.append(f"@{name} = external addrspace(3) global [0 x {elem}], align 16")
        return f"@{name}"

    def add_kernel(self, name: str, params: list[str], fn: Function,
                   max_threads: int = 0, min_blocks: int = 0, block_size: int = 0) -> None:
        """``max_threads``/``min_blocks`` (.maxntid/.minnctapersm) let ptxas budget registers so
        that ``min_blocks`` blocks of ``max_threads`` fit on one SM; ``block_size`` is the launch's
        threads per block (AMDGPU's flat work-group size). The globals declared since the last
        kernel are this one's."""
        group = self.target.kernel_attributes(max_threads, min_blocks, block_size)
        head = f"define {self.target.kernel_cc} void @{name}({', '.join(params)})"
        body = ["{", "entry:", *fn.entry_allocas, "  br label %start", "start:", *fn.lines,
                "  ret void", "}"]
        self._kernels.append((self._globals, head, group, "\n".join(body)))
        self._globals = []

    def text(self) -> str:
        """The module with every kernel."""
        return self._text(range(len(self._kernels)))

    def parts(self, n: int) -> list[tuple[str, int]]:
        """The kernels as at most ``n`` modules of about equal size (the same split on every
        machine, so that the output does not depend on its core count): (text, kernel count)."""
        loads: list[list] = [[0, []] for _ in range(min(n, len(self._kernels)) or 1)]
        by_size = sorted(range(len(self._kernels)), key=lambda k: -len(self._kernels[k][3]))
        for k in by_size:  # largest first into the lightest part
            part = min(loads, key=lambda load: load[0])
            part[0] += len(self._kernels[k][3])
            part[1].append(k)
        return [(self._text(sorted(kernels)), len(kernels)) for _, kernels in loads]

    def _text(self, kernels) -> str:
        groups: dict[str, int] = {}  # attribute group body -> its number in this text
        lines = [f'target triple = "{self.target.triple}"',
                 f'target datalayout = "{self.data_layout}"']
        lines += [g for k in kernels for g in self._kernels[k][0]] + self._globals
        lines += self.declarations.values()
        for k in kernels:
            _, head, group, body = self._kernels[k]
            attrs = f" #{groups.setdefault(group, len(groups))}" if group else ""
            lines.append(f"{head}{attrs} {body}")
        lines += [f"attributes #{i} = {{ {group} }}" for group, i in groups.items()]
        return "\n".join([*lines, *self.target.module_trailer(), ""])
