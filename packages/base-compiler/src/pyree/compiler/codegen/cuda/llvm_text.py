"""A tiny LLVM IR text writer for NVPTX kernels: SSA temporaries, blocks, intrinsics, constants.

Kernels are written naively (allocas for loop state, repeated address arithmetic); the O3 pipeline
run in ``ptx.py`` promotes allocas to registers and removes the redundancy.
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
        self._n = 0

    def op(self, text: str) -> str:
        self._n += 1
        name = f"%t{self._n}"
        self.lines.append(f"  {name} = {text}")
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
        self.entry_allocas.append(f"  {name} = alloca {ty}")
        return name

    def call(self, ret: str, fn: str, args: list[tuple[str, str]], attrs: str = "") -> str:
        self.module.declare(ret, fn, [t for t, _ in args], attrs)
        text = f"call {ret} @{fn}({', '.join(f'{t} {v}' for t, v in args)})"
        if ret == "void":
            self.raw(text)
            return ""
        return self.op(text)

    def special(self, reg: str) -> str:
        """A PTX special register as i32: tid.x, ctaid.y, ntid.x, ..."""
        return self.call("i32", f"llvm.nvvm.read.ptx.sreg.{reg}", [])

    def barrier(self) -> None:
        self.call("void", "llvm.nvvm.barrier0", [], "convergent")

    def inline_asm(self, ret: str, asm: str, constraints: str, args: list[tuple[str, str]]) -> str:
        arglist = ", ".join(f"{t} {v}" for t, v in args)
        text = f'call {ret} asm sideeffect "{asm}", "{constraints}"({arglist})'
        if ret == "void":
            self.raw(text)
            return ""
        return self.op(text)

    # -- counted loops over i64, with the body written by a callback --------------------------
    def loop(self, start: str, end: str, step: str, body) -> None:
        """``for (i = start; i < end; i += step) body(i)`` (i64, unsigned compare)."""
        slot = self.alloca("i64")
        self.raw(f"store i64 {start}, ptr {slot}")
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


class Module:
    """Kernels plus the declarations and shared-memory globals they use."""

    def __init__(self, data_layout: str):
        self.data_layout = data_layout
        self.declarations: dict[str, str] = {}
        self.globals: list[str] = []
        self.kernels: list[str] = []
        self.attributes: list[str] = []

    def declare(self, ret: str, fn: str, arg_types: list[str], attrs: str = "") -> None:
        if not fn.startswith("llvm."):
            raise ValueError(fn)
        self.declarations.setdefault(fn, f"declare {ret} @{fn}({', '.join(arg_types)}) {attrs}")

    def shared_array(self, name: str, elem: str, count: int, align: int = 16) -> str:
        self.globals.append(
            f"@{name} = internal addrspace(3) global [{count} x {elem}] undef, align {align}")
        return f"@{name}"

    def dynamic_shared(self, name: str, elem: str) -> str:
        """The kernel's dynamic shared memory (its size is the export's shared_memory_bytes)."""
        self.globals.append(f"@{name} = external addrspace(3) global [0 x {elem}], align 16")
        return f"@{name}"

    def add_kernel(self, name: str, params: list[str], fn: Function,
                   max_threads: int = 0, min_blocks: int = 0) -> None:
        """``max_threads``/``min_blocks`` (.maxntid/.minnctapersm) let ptxas budget registers so
        that ``min_blocks`` blocks of ``max_threads`` fit on one SM."""
        attrs = ""
        if max_threads:
            attrs = f" #{len(self.attributes)}"
            self.attributes.append(
                f'attributes{attrs} = {{ "nvvm.maxntid"="{max_threads}"'
                + (f' "nvvm.minctasm"="{min_blocks}"' if min_blocks else "") + " }")
        body = [f"define ptx_kernel void @{name}({', '.join(params)}){attrs} {{", "entry:"]
        body += fn.entry_allocas
        body += ["  br label %start", "start:"] + fn.lines + ["  ret void", "}"]
        self.kernels.append("\n".join(body))

    def text(self) -> str:
        return "\n".join([
            'target triple = "nvptx64-nvidia-cuda"',
            f'target datalayout = "{self.data_layout}"',
            *self.globals, *self.declarations.values(), *self.kernels, *self.attributes, ""])
