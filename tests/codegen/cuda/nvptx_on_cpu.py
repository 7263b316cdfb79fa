"""Runs the cuda target's LLVM IR for kernels without barriers or warp shuffles on this CPU, one
GPU thread after another: the IR is retargeted to the host (the kernel calling convention and
address spaces dropped, the thread and block ids read from globals that a launch loop sets, a
trap recorded and the thread ended), JIT-compiled by llvmlite, and launched on the grid and block
that its Launch gives for the push constants. It checks what a CPU-only machine can of the
kernels' arithmetic (sizes, indices, bounds, loop nests); kernels whose threads talk to each
other are refused, and run only on a GPU (tests/drivers/cuda)."""

from __future__ import annotations

import ctypes
import re

import llvmlite.binding as llvm
import numpy as np
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Module
from pyree.compiler.codegen.cuda import emit_kernel, resolve_target
from pyree.compiler.codegen.cuda.nvptx import NVPTX
from pyree.compiler.codegen.cuda.ptx import data_layout
from pyree.compiler.kernel import Kernel, size_code
from pyree.runtime.module.size_exprs import evaluate

REGISTERS = ("tid.x", "ctaid.x", "ntid.x", "nctaid.x")


def host_ir(text: str, name: str) -> str:
    """``text`` (one kernel ``name``) for the host, with ``@launch(grid, block, args...)``."""
    if "barrier" in text or "shfl" in text:
        raise ValueError(f"{name}: its threads synchronize; only a GPU runs it")
    text = re.sub(r'target (triple|datalayout) = ".*"\n', "", text)
    text = text.replace("ptx_kernel ", "").replace(" addrspace(1)", "")
    text = re.sub(r"declare .*@llvm\.nvvm\.read\.ptx\.sreg\..*\n", "", text)
    text = text.replace("@llvm.nvvm.read.ptx.sreg.", "@sreg.")
    text = re.sub(r"  call void @llvm\.trap\(\)\n  br label %\w+",
                  "  store i32 1, ptr @trapped\n  ret void", text)
    text = re.sub(r"declare void @llvm\.trap\(\).*\n", "", text)
    params = re.search(rf"define void @{name}\((.*?)\)", text).group(1).split(", ")
    args = ", ".join(params)
    names = ", ".join(params)
    lines = [text, "@trapped = global i32 0"]
    for reg in REGISTERS:
        lines += [f"@v.{reg} = global i32 0",
                  f"define i32 @sreg.{reg}() {{\n  %v = load i32, ptr @v.{reg}\n  ret i32 %v\n}}"]
    lines.append(f"""define void @launch(i32 %grid, i32 %block, {args}) {{
entry:
  store i32 %grid, ptr @v.nctaid.x
  store i32 %block, ptr @v.ntid.x
  br label %blocks
blocks:
  %g = phi i32 [0, %entry], [%g1, %next]
  %more = icmp ult i32 %g, %grid
  br i1 %more, label %body, label %done
body:
  store i32 %g, ptr @v.ctaid.x
  br label %threads
threads:
  %t = phi i32 [0, %body], [%t1, %thread]
  %tmore = icmp ult i32 %t, %block
  br i1 %tmore, label %thread, label %next
thread:
  store i32 %t, ptr @v.tid.x
  call void @{name}({names})
  %t1 = add i32 %t, 1
  br label %threads
next:
  %g1 = add i32 %g, 1
  br label %blocks
done:
  ret void
}}""")
    return "\n".join(lines)


class Emulated:
    """One kernel compiled for cuda (its LLVM IR, as the target writes it) and run here."""

    def __init__(self, kernel: Kernel):
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        module = Module(data_layout(resolve_target("sm_80")), NVPTX)
        self.launch = emit_kernel(module, kernel, "k", resolve_target("sm_80"))
        self.kernel = kernel
        ir = host_ir(module.text(), "k")
        parsed = llvm.parse_assembly(ir)
        parsed.verify()
        target = llvm.Target.from_default_triple().create_target_machine()
        self.engine = llvm.create_mcjit_compiler(parsed, target)
        self.engine.finalize_object()
        pushed = len(re.findall(r"i64 %pc\d+", ir.split("define void @k(")[1].split(")")[0]))
        self.pushed = pushed
        self.fn = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int32,
                                   *[ctypes.c_void_p] * len(kernel.bindings),
                                   *[ctypes.c_uint64] * pushed)(
            self.engine.get_function_address("launch"))
        self.trapped = ctypes.c_int32.from_address(self.engine.get_global_value_address("trapped"))

    def grid(self, push_constants: list[int]) -> int:
        """The blocks a launch takes, as the runtime evaluates the export's grid."""
        (x, y, z) = (evaluate(size_code(g), push_constants) for g in self.launch.grid)
        assert (y, z) == (1, 1)
        return x

    def __call__(self, buffers: list[np.ndarray], push_constants: list[int],
                 high_halves: int = 0) -> bool:
        """Runs the launch on ``buffers`` (in place); False where the kernel trapped.
        ``high_halves``: what the driver leaves in each slot's high half (ignored)."""
        self.trapped.value = 0
        grid = self.grid(push_constants)
        slots = [(high_halves << 32) | p for p in push_constants]
        if grid:
            self.fn(grid, self.launch.block[0], *[b.ctypes.data for b in buffers], *slots)
        return not self.trapped.value
