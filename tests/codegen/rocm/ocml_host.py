"""The rocm target's kernels under ``--iree-rocm-link-bc``, run on this x86-64 CPU: the only way
to see the numbers of the linked ocml here, where there is no AMD GPU.

The kernels' IR is exactly what ``generate_ir`` and ``device_libs.link`` make for the GPU (ocml
and pyree's oclc control constants linked in), retargeted to x86-64 and JIT-compiled by llvmlite,
with each AMDGPU-only intrinsic given a host definition, the only change to the code: thread and
block ids and the dispatch packet come from globals that a driver loop sets; ``class`` becomes
``llvm.is.fpclass`` (the same mask bits), ``frexp.mant/exp`` ``llvm.frexp``, ``fract``
min(x - floor(x), 1 - ulp) as LLVM's constant folder defines it, ``trig.preop`` the same 53-bit
windows of 2/pi computed here, and ``rcp``/``rsq``, about 1 ulp on the hardware, the correctly
rounded division (so do ``llvm.exp2``/``log2``, libm calls here). What this shows: the function
pyree names for each op computes that op, with the operands in order, converted as the kernel
converts them, and the control constants give IEEE special values. What it cannot show: the
GPU's own instructions, LLVM's AMDGPU code generation, and anything about wave/workgroup behaviour.
"""

from __future__ import annotations

import ctypes
import math
import re

import llvmlite.binding as llvm
import numpy as np
from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import llvm_type
from pyree.compiler.codegen.rocm import device_libs, generate_ir, resolve_target
from pyree.compiler.codegen.rocm.hsaco import target_machine

_ALMOST_ONE = {"half": "0xH3BFF", "float": "0x3FEFFFFFE0000000", "double": "0x3FEFFFFFFFFFFFFF"}
_PREOP_BITS = 2200  # 2/pi to this many bits: every segment (0-21) at every exponent


def _two_over_pi() -> int:
    """floor(2/pi 2^_PREOP_BITS), from Machin's formula in integers."""
    prec = _PREOP_BITS + 64

    def atan_inverse(k: int) -> int:
        total, term, n = 0, (1 << prec) // k, 1
        while term:
            total += term // n if n % 4 == 1 else -(term // n)
            term //= k * k
            n += 2
        return total
    pi = 16 * atan_inverse(5) - 4 * atan_inverse(239)
    return (1 << (2 * prec + 1)) // pi >> (prec - _PREOP_BITS)


_TWO_OVER_PI = _two_over_pi()


def _trig_preop(x: float, segment: int) -> float:
    """V_TRIG_PREOP_F64, as LLVM's constant folder models it: 53 bits of 2/pi from bit
    53 * segment (shifted further for large x), scaled to their place."""
    exponent = (int(np.float64(x).view(np.uint64)) >> 52) & 0x7FF
    shift = 53 * (segment & 31) + max(exponent - 1077, 0)
    bits = (_TWO_OVER_PI >> (_PREOP_BITS - shift - 53)) & ((1 << 53) - 1)
    return math.ldexp(float(bits), -53 - shift + (128 if exponent >= 1968 else 0))


_PREOP = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_int32)(_trig_preop)


def _math_emulation(name: str) -> str:
    op, suffix = re.fullmatch(r"llvm\.amdgcn\.([a-z.]+?)(?:\.i32)?\.(f16|f32|f64)", name).groups()
    t, e = llvm_type(suffix), "emu" + name[4:]
    head = f"define internal {t} @{e}({t} %x) {{\n"
    if op == "rcp":
        return head + f" %y = fdiv {t} 1.0, %x\n ret {t} %y\n}}"
    if op == "rsq":
        return head + f" %s = call {t} @llvm.sqrt.{suffix}({t} %x)\n %y = fdiv {t} 1.0, %s\n ret {t} %y\n}}"
    if op == "fract":
        return head + (f" %f = call {t} @llvm.floor.{suffix}({t} %x)\n %d = fsub {t} %x, %f\n"
                       f" %one = fcmp oge {t} %d, {_ALMOST_ONE[t]}\n"
                       f" %y = select i1 %one, {t} {_ALMOST_ONE[t]}, {t} %d\n ret {t} %y\n}}")
    frexp = f" %r = call {{{t}, i32}} @llvm.frexp.{suffix}.i32({t} %x)\n"
    if op == "frexp.mant":  # inf and NaN: themselves
        return head + frexp + f" %y = extractvalue {{{t}, i32}} %r, 0\n ret {t} %y\n}}"
    if op == "frexp.exp":  # inf and NaN: 0
        return (f"define internal i32 @{e}({t} %x) {{\n" + frexp
                + f" %y = extractvalue {{{t}, i32}} %r, 1\n %a = call {t} @llvm.fabs.{suffix}({t} %x)\n"
                f" %finite = fcmp olt {t} %a, 0x7FF0000000000000\n"
                f" %z = select i1 %finite, i32 %y, i32 0\n ret i32 %z\n}}")
    if op == "trig.preop":
        return f"declare double @{e}(double, i32)"
    raise NotImplementedError(f"no host emulation of {name}")


_IDS = {"workitem": "tid", "workgroup": "ctaid"}


def _emulation(name: str) -> str:
    """An x86-64 definition of the AMDGPU intrinsic ``name``, renamed ``emu.amdgcn.*``: the
    thread and block ids read globals that ``_driver`` sets, the dispatch packet is a global."""
    e = "emu" + name[4:]
    ids = re.fullmatch(r"llvm\.amdgcn\.(workitem|workgroup)\.id\.([xyz])", name)
    if ids:
        return (f"define internal i32 @{e}() {{\n %v = load i32, ptr @emu.{_IDS[ids[1]]}.{ids[2]}\n"
                f" ret i32 %v\n}}")
    if name == "llvm.amdgcn.dispatch.ptr":
        return (f"define internal ptr addrspace(4) @{e}() {{\n"
                f" %p = addrspacecast ptr @emu.packet to ptr addrspace(4)\n ret ptr addrspace(4) %p\n}}")
    return _math_emulation(name)


def _driver(name: str, launch, n_bindings: int) -> str:
    """``void @run_<kernel>(ptr, ...)``: every thread of ``launch``'s grid (x only), in turn."""
    params = ", ".join(f"ptr addrspace(1) %b{i}" for i in range(n_bindings))
    (gx, gy, gz), (bx, by, bz) = launch.grid, launch.block
    assert gy == gz == by == bz == 1, "the host driver runs one-dimensional launches"
    return f"""define void @run_{name}({params}) {{
entry:
  store i16 {bx}, ptr getelementptr (i8, ptr @emu.packet, i64 4)
  br label %block
block:
  %g = phi i32 [0, %entry], [%g1, %next]
  store i32 %g, ptr @emu.ctaid.x
  br label %thread
thread:
  %t = phi i32 [0, %block], [%t1, %thread]
  store i32 %t, ptr @emu.tid.x
  call void @{name}({params})
  %t1 = add i32 %t, 1
  %more = icmp ult i32 %t1, {bx}
  br i1 %more, label %thread, label %next
next:
  %g1 = add i32 %g, 1
  %again = icmp ult i32 %g1, {gx}
  br i1 %again, label %block, label %done
done:
  ret void
}}"""


_GLOBALS = "\n".join(f"@emu.{v}.{d} = internal global i32 0" for v in ("tid", "ctaid") for d in "xyz") + \
    "\n@emu.packet = internal global [64 x i8] zeroinitializer, align 8"


def host_ir(kernels: list[K.Kernel], bc_dir: str) -> tuple[str, list[str]]:
    """(x86-64 LLVM IR, kernel names): ``kernels`` as the rocm target emits them under
    link-bc and ``device_libs.link`` links them, plus a ``run_<name>`` driver for each."""
    target = resolve_target("gfx90a")
    ir, launches = generate_ir(kernels, target, link_bc=True)
    text = device_libs.link(ir, target, target_machine(target), bc_dir)
    text = re.sub(r"^target (triple|datalayout) = .*$", "", text, flags=re.M)
    text = re.sub(r' "(target-features|amdgpu-[\w-]+)"="[^"]*"', "", text)
    text = text.replace("{ }", "{ nounwind }")  # a kernel's group held only AMDGPU attributes
    text = text.replace("define amdgpu_kernel void", "define void")
    text = re.sub(r"@llvm\.amdgcn\.class\.(f16|f32|f64)\(", r"@llvm.is.fpclass.\1(", text)
    text = re.sub(r"^declare .*@llvm\.amdgcn\..*$", "", text, flags=re.M)
    used = sorted(set(re.findall(r"@(llvm\.amdgcn\.[\w.]+)", text)))
    drivers = [_driver(name, launch, len(k.bindings)) for (name, launch), k in zip(launches, kernels)]
    text = text.replace("@llvm.amdgcn.", "@emu.amdgcn.")
    return "\n".join([text, _GLOBALS, *map(_emulation, used), *drivers]), [n for n, _ in launches]


class HostKernels:
    """``kernels`` (elementwise, one-dimensional) compiled as ``host_ir`` makes them for this CPU;
    ``self(i, *arrays)`` runs kernel ``i`` over numpy arrays, one per binding, in place."""

    def __init__(self, kernels: list[K.Kernel], bc_dir: str):
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.add_symbol("emu.amdgcn.trig.preop.f64", ctypes.cast(_PREOP, ctypes.c_void_p).value)
        tm = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=2)
        text, self.names = host_ir(kernels, bc_dir)
        module = llvm.parse_assembly(text)
        module.triple, module.data_layout = llvm.get_default_triple(), str(tm.target_data)
        module.verify()
        self._engine = llvm.create_mcjit_compiler(module, tm)
        self._engine.finalize_object()

    def __call__(self, index: int, *arrays: np.ndarray) -> None:
        run = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(arrays))(
            self._engine.get_function_address(f"run_{self.names[index]}"))
        run(*[a.ctypes.data for a in arrays])
