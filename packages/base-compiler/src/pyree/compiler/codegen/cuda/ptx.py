"""LLVM IR -> PTX through llvmlite's NVPTX target (O3), and PTX -> cubin through ptxas when the
build machine has it (``PYREE_PTXAS`` names another ptxas; set it to an empty string to skip)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from pyree.compiler.codegen import llvm_gpu
from pyree.compiler.codegen.cuda.targets import CudaTarget
from pyree.compiler.errors import CompileError

_TRIPLE = "nvptx64-nvidia-cuda"


def target_machine(target: CudaTarget):
    return llvm_gpu.target_machine(_TRIPLE, target.arch, target.llvm_features)


def data_layout(target: CudaTarget) -> str:
    return str(target_machine(target).target_data)


def compile_to_ptx(ir_text: str, target: CudaTarget) -> str:
    tm = target_machine(target)
    return tm.emit_assembly(llvm_gpu.optimized(ir_text, tm, "NVPTX"))


def ptxas_path() -> str | None:
    override = os.environ.get("PYREE_PTXAS")
    if override is not None:
        return override or None
    return shutil.which("ptxas")


def assemble(ptx: str, target: CudaTarget, ptxas: str) -> bytes | None:
    """The cubin for exactly ``target.arch``, or None when this ptxas no longer knows the arch
    (CUDA 13 dropped sm_60..sm_72): the module then carries PTX only."""
    with tempfile.TemporaryDirectory(prefix="pyree-ptxas-") as tmp:
        src, out = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        proc = subprocess.run([ptxas, f"-arch={target.arch}", "-O3", src, "-o", out],
                              capture_output=True, text=True)
        if proc.returncode != 0 and "is not defined for option 'gpu-name'" in proc.stderr:
            return None
        if proc.returncode != 0:
            raise CompileError(f"internal error: ptxas rejected the generated PTX for "
                               f"{target.arch}: {proc.stderr.strip()}")
        with open(out, "rb") as f:
            return f.read()
