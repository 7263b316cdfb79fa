"""LLVM IR -> AMDGPU relocatable object (llvmlite's AMDGPU target, O3) -> code object (hsaco)
through ``ld.lld -shared``, the link every AMDGPU toolchain does.

ld.lld is found as ``$PYREE_LLD``, else ``ld.lld-22``/``ld.lld`` on PATH, else the one inside
pip's ``ziglang`` (``python -m ziglang ld.lld``). Only basic arithmetic and the intrinsics in
``_SAFE_INTRINSICS`` may reach LLVM: its AMDGPU backend aborts the whole process on math it cannot
select (f32 tanh, f64 exp, ...), so anything else is refused by name first.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

from pyree.compiler.codegen import llvm_gpu
from pyree.compiler.codegen.rocm.targets import RocmTarget
from pyree.compiler.errors import CompileError

TRIPLE = "amdgcn-amd-amdhsa"
_SAFE_INTRINSICS = ("llvm.amdgcn.", "llvm.fabs.", "llvm.floor.", "llvm.ceil.", "llvm.round.",
                    "llvm.roundeven.", "llvm.trunc.", "llvm.sqrt.", "llvm.copysign.",
                    "llvm.maximum.", "llvm.minimum.", "llvm.abs.", "llvm.smin.", "llvm.smax.",
                    "llvm.umin.", "llvm.umax.", "llvm.fma.", "llvm.fmuladd.")


def target_machine(target: RocmTarget):
    return llvm_gpu.target_machine(TRIPLE, target.chip, target.llvm_features)


def data_layout(target: RocmTarget) -> str:
    return str(target_machine(target).target_data)


def check_intrinsics(declared) -> None:
    for name in declared:
        if not name.startswith(_SAFE_INTRINSICS):
            raise CompileError(f"the rocm backend cannot lower '{name}' for AMDGPU (LLVM's AMDGPU "
                               f"backend has no lowering for it)")


def compile_to_object(ir_text: str, target: RocmTarget) -> bytes:
    tm = target_machine(target)
    return tm.emit_object(llvm_gpu.optimized(ir_text, tm, "AMDGPU"))


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
