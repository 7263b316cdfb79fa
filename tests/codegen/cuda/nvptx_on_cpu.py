"""Runs the cuda target's LLVM IR on this CPU: the IR is retargeted to the host (the kernel
calling convention and address spaces dropped, so a block's shared memory is one global; the
thread and block ids read from thread-local globals; a trap recorded and the thread ended),
run through LLVM's O3 as the target's IR is, JIT-compiled by llvmlite, and launched on the grid and block that its Launch gives for the push
constants. A kernel whose threads do not talk to each other runs one thread after another in a
loop of its own; one with barriers and warp shuffles runs each block as that many OS threads,
the barrier and the shuffles being Python callbacks (``_Block``). The tensor-core templates'
instructions run too: ``cp.async`` as a copy queued per thread that lands, zero-filled past its
source size, at the ``cp.async.wait_group`` that waits for its group (a read before that sees
stale shared memory, as it may on the GPU; a thread's copies past 64 outstanding land at once), ``cvt.rna.tf32.f32`` in IR, and
the warp-collective ``ldmatrix`` and ``mma.sync`` (f16, bf16 m16n8k16; tf32 m16n8k8) as Python
callbacks that gather the warp's registers and apply the PTX ISA's fragment layouts, the
products summed in float64 and rounded to f32 once. It checks what a CPU-only machine can of
the kernels' arithmetic (sizes, indices, bounds, loop nests, block folds, fragment indexing);
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


# Tensor-core (and ex2.approx) intrinsics replaced by the definitions in EMULATED (``@llvm.nvvm.X`` -> ``@emu.X``).
TENSOR_CORE = re.compile(r"@llvm\.nvvm\.((?:cp\.async|ldmatrix|mma|f2tf32|ex2\.approx)[\w.]*)\(")
MMA_KINDS = {"m16n8k16.row.col.f32.f32": 0, "m16n8k16.row.col.bf16": 1, "m16n8k8.row.col.tf32": 2}
EMULATED = """
@emu.cpq = global [1024 x [64 x [4 x i64]]] zeroinitializer
@emu.cpk = global [1024 x i64] zeroinitializer
@emu.cpc = global [1024 x i64] zeroinitializer
define void @emu.cp.push(ptr %d, ptr %s, i64 %n) {
  %t = call i32 @sreg.tid.x()
  %kp = getelementptr [1024 x i64], ptr @emu.cpk, i32 0, i32 %t
  %k = load i64, ptr %kp
  %cp = getelementptr [1024 x i64], ptr @emu.cpc, i32 0, i32 %t
  %c = load i64, ptr %cp
  %full = icmp uge i64 %k, 64
  br i1 %full, label %now, label %queue
now:
  call void @llvm.memset.p0.i64(ptr %d, i8 0, i64 16, i1 false)
  call void @llvm.memcpy.p0.p0.i64(ptr %d, ptr %s, i64 %n, i1 false)
  ret void
queue:
  %e0 = getelementptr [1024 x [64 x [4 x i64]]], ptr @emu.cpq, i32 0, i32 %t, i64 %k, i32 0
  %e1 = getelementptr i64, ptr %e0, i32 1
  %e2 = getelementptr i64, ptr %e0, i32 2
  %e3 = getelementptr i64, ptr %e0, i32 3
  %di = ptrtoint ptr %d to i64
  %si = ptrtoint ptr %s to i64
  store i64 %di, ptr %e0
  store i64 %si, ptr %e1
  store i64 %n, ptr %e2
  store i64 %c, ptr %e3
  %k1 = add i64 %k, 1
  store i64 %k1, ptr %kp
  ret void
}
define void @emu.cp.async.cg.shared.global.16(ptr %d, ptr %s) {
  call void @emu.cp.push(ptr %d, ptr %s, i64 16)
  ret void
}
define void @emu.cp.async.cg.shared.global.16.s(ptr %d, ptr %s, i32 %n) {
  %n64 = zext i32 %n to i64
  call void @emu.cp.push(ptr %d, ptr %s, i64 %n64)
  ret void
}
define float @emu.ex2.approx.f(float %x) {
  %r = call float @llvm.exp2.f32(float %x)
  ret float %r
}
define void @emu.cp.async.commit.group() {
  %t = call i32 @sreg.tid.x()
  %cp = getelementptr [1024 x i64], ptr @emu.cpc, i32 0, i32 %t
  %c = load i64, ptr %cp
  %c1 = add i64 %c, 1
  store i64 %c1, ptr %cp
  ret void
}
define void @emu.cp.async.wait.group(i32 %n) {
  %t = call i32 @sreg.tid.x()
  %q = getelementptr [1024 x [64 x [4 x i64]]], ptr @emu.cpq, i32 0, i32 %t, i64 0, i32 0
  %kp = getelementptr [1024 x i64], ptr @emu.cpk, i32 0, i32 %t
  %cp = getelementptr [1024 x i64], ptr @emu.cpc, i32 0, i32 %t
  %c = load i64, ptr %cp
  call void @emu.cp.flush(ptr %q, ptr %kp, i64 %c, i32 %n)
  ret void
}
declare void @emu.cp.flush(ptr, ptr, i64, i32)
define i32 @emu.f2tf32.rna(float %x) {
  %b = bitcast float %x to i32
  %r = add i32 %b, 4096
  %t = and i32 %r, -8192
  %nan = fcmp uno float %x, %x
  %v = select i1 %nan, i32 %b, i32 %t
  ret i32 %v
}
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare void @emu.ldmatrix(ptr, ptr, i32)
declare void @emu.mma(ptr, ptr, i32)
"""


def _returned_four(ty: str, pointers: str) -> str:
    """IR that returns the four ``ty`` values at ``%out`` as a struct (what the emulated
    warp-collective call wrote there)."""
    struct = "{" + ", ".join([ty] * 4) + "}"
    lines = [f"  %s0 = insertvalue {struct} poison, {ty} {'0.0' if ty == 'float' else 0}, 0"]
    for i in range(4):
        lines += [f"  %{pointers}{i} = getelementptr {ty}, ptr %out, i32 {i}",
                  f"  %v{i} = load {ty}, ptr %{pointers}{i}",
                  f"  %s{i + 1} = insertvalue {struct} %s{i}, {ty} %v{i}, {i}"]
    return "\n".join(lines + [f"  ret {struct} %s4"])


def _ldmatrix_ir(trans: bool) -> str:
    name = f"x4.{'trans.' if trans else ''}b16"
    return (f"define {{i32, i32, i32, i32}} @emu.ldmatrix.sync.aligned.m8n8.{name}(ptr %a) {{\n"
            f"  %out = alloca [4 x i32]\n  call void @emu.ldmatrix(ptr %a, ptr %out, i32 {int(trans)})\n"
            f"{_returned_four('i32', 'p')}\n}}")


def _mma_ir(shape: str, kind: int) -> str:
    reg = "<2 x half>" if kind == 0 else "i32"
    params = ", ".join([f"{reg} %r{i}" for i in range(6)] + [f"float %r{i}" for i in range(6, 10)])
    stores = "\n".join(f"  %p{i} = getelementptr i32, ptr %in, i32 {i}\n"
                       f"  store {reg if i < 6 else 'float'} %r{i}, ptr %p{i}" for i in range(10))
    return (f"define {{float, float, float, float}} @emu.mma.{shape}({params}) {{\n"
            f"  %in = alloca [10 x i32]\n  %out = alloca [4 x float]\n{stores}\n"
            f"  call void @emu.mma(ptr %in, ptr %out, i32 {kind})\n"
            f"{_returned_four('float', 'q')}\n}}")


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


def host_ir(text: str, name: str, threads_talk: bool, shared_bytes: int = 0) -> str:
    """``text`` (one kernel ``name``) for the host, with ``@launch(grid, block, args...)`` (its
    threads one after another). Where ``threads_talk``, the thread and block ids are instead
    Python's (``_Block``: MCJIT has no thread-local storage). The dynamic shared memory is a
    global of ``shared_bytes``."""
    text = re.sub(r'target (triple|datalayout) = ".*"\n', "", text)
    text = re.sub(r"external addrspace\(3\) global \[0 x \w+\]",
                  f"global [{shared_bytes} x i8] zeroinitializer", text)
    text = re.sub(r"declare [^\n]*@llvm\.nvvm\.(cp\.async|ldmatrix|mma|f2tf32|ex2\.approx)[^\n]*\n", "", text)
    text = TENSOR_CORE.sub(r"@emu.\1(", text)
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
    lines = [text, HALF_CONVERSIONS, EMULATED, _ldmatrix_ir(False), _ldmatrix_ir(True),
             *(_mma_ir(shape, kind) for shape, kind in MMA_KINDS.items()),
             "@trapped = global i32 0", "declare void @emu.barrier()",
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


def _mma_product(r: np.ndarray, kind: int) -> np.ndarray:
    """D = A B + C (16 x 8, f32) of one warp's mma.sync from its registers ``r`` [lane, register]."""
    g, t = np.arange(32) // 4, np.arange(32) % 4
    k = 8 if kind == 2 else 16
    a, b, c = np.zeros((16, k)), np.zeros((k, 8)), np.zeros((16, 8))
    if kind == 2:  # one TF32 element a register; the low 13 bits are not read
        x = (r[:, :6] & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
        a[g, t], a[g + 8, t], a[g, t + 4], a[g + 8, t + 4] = x[:, :4].T
        b[t, g], b[t + 4, g] = x[:, 4:6].T
    else:          # two 16-bit elements a register, the lower one first
        halves = np.ascontiguousarray(r[:, :6]).view(np.uint16).reshape(32, 6, 2)
        x = (halves.view(np.float16).astype(np.float64) if kind == 0 else
             (halves.astype(np.uint32) << 16).view(np.float32).astype(np.float64))
        for i, (row, col) in enumerate(((g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8), (g + 8, 2 * t + 8))):
            a[row, col], a[row, col + 1] = x[:, i, 0], x[:, i, 1]
        b[2 * t, g], b[2 * t + 1, g], b[2 * t + 8, g], b[2 * t + 9, g] = x[:, 4:6].reshape(32, 4).T
    cf = np.ascontiguousarray(r[:, 6:]).view(np.float32)
    c[g, 2 * t], c[g, 2 * t + 1], c[g + 8, 2 * t], c[g + 8, 2 * t + 1] = cf.T
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN, as on the GPU
        d = (a @ b + c).astype(np.float32)
    return d


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
            "emu.cp.flush": ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                             ctypes.c_int32)(self._flush),
            "emu.shfl.f32": ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float, ctypes.c_int32)(self._shuffle),
            "emu.shfl.i32": ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_int32)(self._shuffle),
            "emu.ldmatrix": ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32)(self._ldmatrix),
            "emu.mma": ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32)(self._mma),
            "sreg.tid.x": ids(lambda: self.local.tid),
            **{f"sreg.ctaid.{a}": ids(lambda i=i: self.local.ctaid[i]) for i, a in enumerate("xyz")}}

    def _barrier(self) -> None:
        self.barrier.wait()

    @staticmethod
    def _flush(queue: int, count: int, commits: int, pending: int) -> None:
        """cp.async.wait_group ``pending``: this thread's copies of every group but the newest
        ``pending`` land now (the emulated cp.async only queues them, so that a read of shared
        memory before its wait sees stale data here as on the GPU). Copies not yet committed
        to a group stay queued."""
        k = ctypes.c_int64.from_address(count)
        entries = (ctypes.c_int64 * (4 * k.value)).from_address(queue)
        kept = []
        for i in range(k.value):
            dst, src, n, group = entries[4 * i:4 * i + 4]
            if group < commits - pending:
                ctypes.memset(dst, 0, 16)
                ctypes.memmove(dst, src, n)
            else:
                kept.append((dst, src, n, group))
        for i, entry in enumerate(kept):
            entries[4 * i:4 * i + 4] = entry
        k.value = len(kept)

    def _shuffle(self, value, lane_mask: int):
        """``value`` of lane ``lane ^ lane_mask`` of this thread's warp of 32."""
        values, lane = self._exchange(value)
        return values[lane ^ lane_mask]

    def _exchange(self, value):
        """Every lane's ``value`` of this thread's warp, and this thread's lane."""
        warp, lane = divmod(self.local.tid, 32)
        self.slots[warp][lane] = value
        self.warps[warp].wait()
        values = list(self.slots[warp])
        self.warps[warp].wait()
        return values, lane

    def _ldmatrix(self, address: int, out: int, trans: int) -> None:
        """ldmatrix.sync.aligned.m8n8.x4(.trans).b16: lanes 8j..8j+7 give the row addresses of
        matrix j; each lane gets the 32 bits at row lane / 4, b16 columns 2 (lane % 4) + 0, 1 of
        each matrix (transposed: rows 2 (lane % 4) + 0, 1 of column lane / 4)."""
        rows, lane = self._exchange(address)
        got = (ctypes.c_uint32 * 4).from_address(out)
        for j in range(4):
            if not trans:
                got[j] = ctypes.c_uint32.from_address(rows[8 * j + lane // 4] + 4 * (lane % 4)).value
                continue
            lo, hi = (ctypes.c_uint16.from_address(rows[8 * j + 2 * (lane % 4) + i] + 2 * (lane // 4)).value
                      for i in (0, 1))
            got[j] = lo | hi << 16

    def _mma(self, registers: int, out: int, kind: int) -> None:
        """mma.sync.aligned: D = A B + C for the warp, from each lane's 6 operand and 4
        accumulator registers (``MMA_KINDS``; PTX ISA, "Matrix fragments for mma.m16n8k16" and
        "... for mma.m16n8k8"). Lane 0 computes the warp's D; each lane takes its part."""
        regs, lane = self._exchange(np.frombuffer((ctypes.c_uint32 * 10).from_address(registers),
                                                  np.uint32).copy())
        warp = self.local.tid // 32
        if lane == 0:
            self.products[warp] = _mma_product(np.stack(regs), kind)
        self.warps[warp].wait()  # the next call's exchange comes before lane 0 writes again
        d, g, t = self.products[warp], lane // 4, lane % 4
        (ctypes.c_float * 4).from_address(out)[:] = [d[g, 2 * t], d[g, 2 * t + 1], d[g + 8, 2 * t],
                                                     d[g + 8, 2 * t + 1]]

    def run(self, kernel, grid: tuple, block: int, args: list) -> None:
        for g in np.ndindex(*reversed(grid)):
            g = tuple(reversed(g))
            self.barrier = threading.Barrier(block)
            self.warps = [threading.Barrier(min(32, block - w)) for w in range(0, block, 32)]
            self.slots = [[0] * 32 for _ in self.warps]
            self.products = [None] * len(self.warps)

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

    def __init__(self, kernel: Kernel, target=None):
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = target or resolve_target("sm_80")
        module = Module(data_layout(target), NVPTX)
        self.launch = emit_kernel(module, kernel, "k", target)
        self.kernel = kernel
        self.text = module.text()
        self.threads_talk = "barrier0" in self.text or "shfl" in self.text
        ir = host_ir(self.text, "k", self.threads_talk, self.launch.shared_memory_bytes)
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


def run_program(text: str, arguments: list[np.ndarray], scatter_atomics: bool = False,
                target=None, attention: bool = False) -> np.ndarray:
    """The one function of MLIR ``text`` compiled for cuda and its kernels run here in program
    order, as the host program runs them (a splat is a fill, a view the same bytes reshaped, a
    scatter's result starts as a copy of its starting value); its one result. ``attention``:
    the flow passes of a cuda module (fuse-attention and what it leaves)."""
    from pyree.compiler.flow.kernels import outline
    from pyree.compiler.flow.passes import flow_passes, run_flow
    from pyree.compiler.input import parse_mlir
    from pyree.compiler.input.lowering import lower_to_tensor_program
    from pyree.compiler.kernel import DTYPES
    from pyree.compiler.tensor_program import Constant, Generic, View

    program = lower_to_tensor_program(parse_mlir(text, "program.mlir"), scatter_atomics=scatter_atomics)
    function = run_flow(program, flow_passes(gpu=True, implicit_gemm=True,
                                             attention=attention)).functions[0]
    env = {id(v): a for v, a in zip(function.arguments, arguments)}
    for op in function.ops:
        if isinstance(op, Constant):
            env[id(op.result)] = op.data if op.data is not None else \
                np.full(op.result.shape, op.splat, DTYPES[op.result.dtype])
            continue
        if isinstance(op, View):
            flat = env[id(op.source)].reshape(-1).view(np.uint8)[op.byte_offset:]
            size = int(np.prod(op.result.shape)) * DTYPES[op.result.dtype].itemsize
            env[id(op.result)] = flat[:size].view(DTYPES[op.result.dtype]).reshape(op.result.shape)
            continue
        assert isinstance(op, Generic), type(op).__name__
        scatter = op.outputs[0].scatter
        outs = [env[id(op.inputs[scatter.start])].copy()] if scatter is not None else \
            [np.zeros(v.shape, DTYPES[v.dtype]) for v in op.results]
        assert Emulated(outline(op, "k"), target)([env[id(v)] for v in op.inputs] + outs, [])
        env.update((id(v), out) for v, out in zip(op.results, outs))
    return env[id(function.results[0])]
