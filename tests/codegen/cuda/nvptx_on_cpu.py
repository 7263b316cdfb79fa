"""Runs the cuda target's LLVM IR on this CPU: the IR is retargeted to the host (the kernel
calling convention and address spaces dropped, so a block's shared memory is one global; the
thread and block ids read from thread-local globals; a trap recorded and the thread ended),
run through LLVM's O3 as the target's IR is, JIT-compiled by llvmlite, and launched on the grid and block that its Launch gives for the push
constants. A kernel whose threads do not talk to each other runs one thread after another in a
loop of its own; one with barriers and warp shuffles runs each block as that many OS threads,
the barrier and the shuffles being Python callbacks (``_Block``). It checks what a CPU-only
machine can of the kernels' arithmetic (sizes, indices, bounds, loop nests, block folds);
timing, memory ordering and the GPU's own arithmetic are tests/drivers/cuda's, on a GPU."""

from __future__ import annotations

import ctypes
import re
import threading

import llvmlite.binding as llvm
import numpy as np
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Module
from pyree.compiler.codegen.common.llvm_gpu.machine import optimized
from pyree.compiler.codegen.cuda import emit_kernel, resolve_target
from pyree.compiler.codegen.cuda.nvptx import NVPTX
from pyree.compiler.codegen.cuda.ptx import data_layout
from pyree.compiler.kernel import Kernel, size_code
from pyree.runtime.module.size_exprs import evaluate

REGISTERS = ("tid.x", "ctaid.x", "ctaid.y", "ctaid.z", "ntid.x", "nctaid.x")
IDS = ("tid.x", "ctaid.x", "ctaid.y", "ctaid.z")  # Python's, for blocks of threads that talk


SHUFFLE = re.compile(r"@llvm\.nvvm\.shfl\.sync\.bfly\.(f32|i32)\(i32 -1, (float|i32) (%\w+), "
                     r"i32 (\d+), i32 31\)")


# The x86-64 library calls that LLVM makes for f16 and bf16 conversions on a CPU without F16C or
# AVX512-BF16, defined here in integer arithmetic (rounding to nearest even, NaNs kept quiet):
# MCJIT finds no such symbols in the process.
HALF_CONVERSIONS = """
define float @__extendhfsf2(half %h) {
  %b = bitcast half %h to i16
  %u = zext i16 %b to i32
  %sign = shl i32 %u, 16
  %s = and i32 %sign, 2147483648
  %e = and i32 %u, 31744
  %m = and i32 %u, 1023
  %special = icmp eq i32 %e, 31744
  %zero_e = icmp eq i32 %e, 0
  %man13 = shl i32 %m, 13
  %inf = or i32 %man13, 2139095040
  %sub_f = uitofp i32 %m to float
  %sub_v = fmul float %sub_f, 0x3E70000000000000
  %sub_b = bitcast float %sub_v to i32
  %norm_bits = shl i32 %e, 13
  %norm_exp = add i32 %norm_bits, 939524096
  %norm = or i32 %norm_exp, %man13
  %a = select i1 %zero_e, i32 %sub_b, i32 %norm
  %b2 = select i1 %special, i32 %inf, i32 %a
  %r = or i32 %b2, %s
  %f = bitcast i32 %r to float
  ret float %f
}
define half @__truncsfhf2(float %x) {
  %u = bitcast float %x to i32
  %hi = lshr i32 %u, 16
  %s = and i32 %hi, 32768
  %a = and i32 %u, 2147483647
  %nan = icmp ugt i32 %a, 2139095040
  %big = icmp uge i32 %a, 1199566848
  %tiny = icmp ult i32 %a, 947912704
  %m13 = lshr i32 %a, 13
  %mlow = and i32 %m13, 1023
  %qnan = or i32 %mlow, 512
  %nanb = or i32 %qnan, 31744
  %odd = and i32 %m13, 1
  %r0 = sub i32 %a, 939524096
  %r1 = add i32 %r0, 4095
  %r2 = add i32 %r1, %odd
  %norm = lshr i32 %r2, 13
  %af = bitcast i32 %a to float
  %scaled = fmul float %af, 0x4170000000000000
  %magic = fadd float %scaled, 0x4160000000000000
  %mb = bitcast float %magic to i32
  %sub = sub i32 %mb, 1258291200
  %v0 = select i1 %tiny, i32 %sub, i32 %norm
  %v1 = select i1 %big, i32 31744, i32 %v0
  %v2 = select i1 %nan, i32 %nanb, i32 %v1
  %v = or i32 %v2, %s
  %t = trunc i32 %v to i16
  %h = bitcast i16 %t to half
  ret half %h
}
define bfloat @__truncsfbf2(float %x) {
  %u = bitcast float %x to i32
  %a = and i32 %u, 2147483647
  %nan = icmp ugt i32 %a, 2139095040
  %hi = lshr i32 %u, 16
  %odd = and i32 %hi, 1
  %r0 = add i32 %u, 32767
  %r1 = add i32 %r0, %odd
  %rn = lshr i32 %r1, 16
  %q = or i32 %hi, 64
  %v = select i1 %nan, i32 %q, i32 %rn
  %t = trunc i32 %v to i16
  %h = bitcast i16 %t to bfloat
  ret bfloat %h
}
"""


def host_ir(text: str, name: str, threads_talk: bool) -> str:
    """``text`` (one kernel ``name``) for the host, with ``@launch(grid, block, args...)`` (its
    threads one after another). Where ``threads_talk``, the thread and block ids are instead
    Python's (``_Block``: MCJIT has no thread-local storage)."""
    text = re.sub(r'target (triple|datalayout) = ".*"\n', "", text)
    text = text.replace("ptx_kernel ", "").replace(" addrspace(1)", "").replace(" addrspace(3)", "")
    text = re.sub(r"declare .*@llvm\.nvvm\.(read\.ptx\.sreg|shfl|barrier0).*\n", "", text)
    text = text.replace("@llvm.nvvm.read.ptx.sreg.", "@sreg.")
    text = text.replace("@llvm.nvvm.barrier0()", "@emu.barrier()")
    text = SHUFFLE.sub(r"@emu.shfl.\1(\2 \3, i32 \4)", text)
    text = re.sub(r"  call void @llvm\.trap\(\)\n  br label %\w+",
                  "  store i32 1, ptr @trapped\n  ret void", text)
    text = re.sub(r"declare void @llvm\.trap\(\).*\n", "", text)
    args = re.search(rf"define void @{name}\((.*?)\)", text).group(1)
    names = args
    lines = [text, HALF_CONVERSIONS, "@trapped = global i32 0", "declare void @emu.barrier()",
             "declare float @emu.shfl.f32(float, i32)", "declare i32 @emu.shfl.i32(i32, i32)"]
    for reg in REGISTERS:
        lines.append(f"@v.{reg} = global i32 0")
        if threads_talk and reg in IDS:
            lines.append(f"declare i32 @sreg.{reg}()")
        else:
            lines.append(f"define i32 @sreg.{reg}() {{\n  %v = load i32, ptr @v.{reg}\n  ret i32 %v\n}}")
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
  br label %threads
threads:
  %t = phi i32 [0, %body], [%t1, %thread]
  %tmore = icmp ult i32 %t, %block
  br i1 %tmore, label %thread, label %next
thread:
  store i32 %g, ptr @v.ctaid.x
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


class _Block:
    """The threads of one block at a time, as OS threads: the barrier and the warp shuffles
    that the kernel calls back into."""

    def __init__(self):
        self.local = threading.local()
        self.barrier: threading.Barrier | None = None
        self.warps: list = []
        self.slots: list = []
        ids = ctypes.CFUNCTYPE(ctypes.c_int32)
        self.callbacks = {
            "emu.barrier": ctypes.CFUNCTYPE(None)(self._barrier),
            "emu.shfl.f32": ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float, ctypes.c_int32)(self._shuffle),
            "emu.shfl.i32": ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_int32)(self._shuffle),
            "sreg.tid.x": ids(lambda: self.local.tid),
            **{f"sreg.ctaid.{a}": ids(lambda i=i: self.local.ctaid[i]) for i, a in enumerate("xyz")}}

    def _barrier(self) -> None:
        self.barrier.wait()

    def _shuffle(self, value, lane_mask: int):
        """``value`` of lane ``lane ^ lane_mask`` of this thread's warp of 32."""
        tid = self.local.tid
        warp, lane = divmod(tid, 32)
        self.slots[warp][lane] = value
        self.warps[warp].wait()
        got = self.slots[warp][lane ^ lane_mask]
        self.warps[warp].wait()
        return got

    def run(self, kernel, grid: tuple, block: int, args: list) -> None:
        for g in np.ndindex(*reversed(grid)):
            g = tuple(reversed(g))
            self.barrier = threading.Barrier(block)
            self.warps = [threading.Barrier(min(32, block - w)) for w in range(0, block, 32)]
            self.slots = [[0] * 32 for _ in self.warps]

            def one(t, g=g):
                self.local.tid, self.local.ctaid = t, g
                kernel(*args)
            threads = [threading.Thread(target=one, args=(t,)) for t in range(block)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()


class Emulated:
    """One kernel compiled for cuda (its LLVM IR, as the target writes it) and run here."""

    def __init__(self, kernel: Kernel):
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        module = Module(data_layout(resolve_target("sm_80")), NVPTX)
        self.launch = emit_kernel(module, kernel, "k", resolve_target("sm_80"))
        self.kernel = kernel
        text = module.text()
        self.threads_talk = "barrier0" in text or "shfl" in text
        ir = host_ir(text, "k", self.threads_talk)
        self.block = _Block()
        for name, callback in self.block.callbacks.items():
            llvm.add_symbol(name, ctypes.cast(callback, ctypes.c_void_p).value)
        target = llvm.Target.from_default_triple().create_target_machine(opt=3)
        self.engine = llvm.create_mcjit_compiler(optimized(ir, target, "host"), target)
        self.engine.finalize_object()
        self.pushed = len(re.findall(r"i64 %pc\d+", ir.split("define void @k(")[1].split(")")[0]))
        params = [*[ctypes.c_void_p] * len(kernel.bindings), *[ctypes.c_uint64] * self.pushed]
        self.fn = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int32, *params)(
            self.engine.get_function_address("launch"))
        self.kernel_fn = ctypes.CFUNCTYPE(None, *params)(self.engine.get_function_address("k"))
        self.trapped = ctypes.c_int32.from_address(self.engine.get_global_value_address("trapped"))
        self.sizes = [ctypes.c_int32.from_address(self.engine.get_global_value_address(f"v.{r}"))
                      for r in ("ntid.x", "nctaid.x")]

    def grid(self, push_constants: list[int]) -> tuple[int, int, int]:
        """The blocks a launch takes, as the runtime evaluates the export's grid."""
        return tuple(evaluate(size_code(g), push_constants) for g in self.launch.grid)

    def __call__(self, buffers: list[np.ndarray], push_constants: list[int],
                 high_halves: int = 0) -> bool:
        """Runs the launch on ``buffers`` (in place); False where the kernel trapped.
        ``high_halves``: what the driver leaves in each slot's high half (ignored)."""
        self.trapped.value = 0
        grid = self.grid(push_constants)
        slots = [(high_halves << 32) | p for p in push_constants]
        args = [*[b.ctypes.data for b in buffers], *slots]
        if 0 in grid:
            pass  # the runtime launches nothing
        elif self.threads_talk:
            self.sizes[0].value, self.sizes[1].value = self.launch.block[0], grid[0]
            self.block.run(self.kernel_fn, grid, self.launch.block[0], args)
        else:
            assert grid[1:] == (1, 1)
            self.fn(grid[0], self.launch.block[0], *args)
        return not self.trapped.value
