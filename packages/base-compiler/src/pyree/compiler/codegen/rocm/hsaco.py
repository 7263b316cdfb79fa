"""LLVM IR -> AMDGPU relocatable object (llvmlite's AMDGPU target, O3) -> code object (hsaco)
through ``ld.lld -shared``, the link every AMDGPU toolchain does.

ld.lld is found as ``$PYREE_LLD``, else ``ld.lld-22``/``ld.lld`` on PATH, else the one inside
pip's ``ziglang`` (``python -m ziglang ld.lld``). Only basic arithmetic and the intrinsics in
``_SAFE_INTRINSICS`` may reach LLVM: its AMDGPU backend aborts the whole process on math it cannot
select (f32 tanh, f64 exp, ...), so anything else is refused by name first. Under
``--iree-rocm-link-bc`` calls to AMD's ocml are allowed too: ``device_libs.link`` resolves them
before O3.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

from pyree.compiler.codegen.common.llvm_gpu import machine as llvm_gpu
from pyree.compiler.codegen.rocm import device_libs
from pyree.compiler.codegen.rocm.targets import RocmTarget
from pyree.compiler.errors import CompileError

TRIPLE = "amdgcn-amd-amdhsa"
_SAFE_INTRINSICS = ("llvm.amdgcn.", "llvm.fabs.", "llvm.floor.", "llvm.ceil.", "llvm.round.",
                    "llvm.roundeven.", "llvm.trunc.", "llvm.sqrt.", "llvm.copysign.",
                    "llvm.maximum.", "llvm.minimum.", "llvm.abs.", "llvm.smin.", "llvm.smax.",
                    "llvm.umin.", "llvm.umax.", "llvm.fma.", "llvm.fmuladd.", "llvm.trap")
# What AMD's ocml (ROCm 5.2) leaves after O3 and LLVM selects: every op of
# math_expansion.GPU_EXPANDED in f32 and f64 (tests/codegen/rocm/test_rocm_device_libs.py); exp2 and log2
# have no f64 instruction.
_DEVICE_LIB_INTRINSICS = ("llvm.ctlz.", "llvm.fshl.", "llvm.fshr.", "llvm.is.fpclass.",
                          "llvm.ldexp.", "llvm.maxnum.", "llvm.minnum.", "llvm.rint.",
                          "llvm.exp2.f32", "llvm.log2.f32")


def target_machine(target: RocmTarget):
    return llvm_gpu.target_machine(TRIPLE, target.chip, target.llvm_features)


def data_layout(target: RocmTarget) -> str:
    return str(target_machine(target).target_data)


def check_intrinsics(declared, link_bc: bool = False) -> None:
    """Refuses what LLVM would abort on. ``link_bc``: calls to ocml are allowed (``device_libs.link``
    resolves them) and so are the intrinsics that ocml's code leaves."""
    allowed = _SAFE_INTRINSICS + (("__ocml_", *_DEVICE_LIB_INTRINSICS) if link_bc else ())
    for name in declared:
        if not name.startswith(allowed):
            origin = "; with --iree-rocm-link-bc it may come from AMD's device libraries" if link_bc else ""
            raise CompileError(f"the rocm backend cannot lower '{name}' for AMDGPU (LLVM's AMDGPU "
                               f"backend has no lowering for it{origin})")


def compile_to_object(ir_text: str, target: RocmTarget, bc_dir: str = "") -> bytes:
    """``bc_dir``: link AMD's device libraries from there first (``--iree-rocm-link-bc``)."""
    tm = target_machine(target)
    if bc_dir:
        ir_text = device_libs.link(ir_text, target, tm, bc_dir)
    module = llvm_gpu.optimized(ir_text, tm, "AMDGPU")
    if bc_dir:  # the libraries' code, before instruction selection sees it
        check_intrinsics([f.name for f in module.functions if f.is_declaration], link_bc=True)
    return tm.emit_object(module)


def lld_command() -> list[str]:
    """The argv prefix that runs ld.lld; a CompileError says what to install when none exists."""
    override = os.environ.get("PYREE_LLD")
    if override:
        return [override]
    for name in ("ld.lld-22", "ld.lld"):
        path = shutil.which(name)
        if path:
            return [path]
    if importlib.util.find_spec("ziglang") is not None:
        return [sys.executable, "-m", "ziglang", "ld.lld"]
    raise CompileError("the rocm backend links AMDGPU code objects with ld.lld, which was not "
                       "found: install LLVM's lld (Debian/Ubuntu: apt-get install lld-22; or "
                       "pip install ziglang), or set PYREE_LLD to an ld.lld executable")


def link(obj: bytes) -> bytes:
    cmd = lld_command()
    with tempfile.TemporaryDirectory(prefix="pyree-lld-") as tmp:
        src, out = os.path.join(tmp, "k.o"), os.path.join(tmp, "k.hsaco")
        with open(src, "wb") as f:
            f.write(obj)
        proc = subprocess.run([*cmd, "-shared", src, "-o", out], capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(f"internal error: ld.lld ({' '.join(cmd)}) failed to link the "
                               f"AMDGPU code object: {proc.stderr.strip()}")
        with open(out, "rb") as f:
            return f.read()
