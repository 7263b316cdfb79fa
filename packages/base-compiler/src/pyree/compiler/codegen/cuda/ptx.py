"""LLVM IR -> PTX through llvmlite's NVPTX target (O3), and PTX -> cubin through ptxas when the
build machine has it (``PYREE_PTXAS`` names another ptxas; set it to an empty string to skip)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import llvmlite.binding as llvm
from pyree.compiler.codegen.cuda.targets import CudaTarget
from pyree.compiler.errors import CompileError

_TRIPLE = "nvptx64-nvidia-cuda"
_initialized = False


def target_machine(target: CudaTarget):
    global _initialized
    if not _initialized:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _initialized = True
    return llvm.Target.from_triple(_TRIPLE).create_target_machine(
        cpu=target.arch, features=target.llvm_features, opt=3, reloc="pic", codemodel="default")


def data_layout(target: CudaTarget) -> str:
    return str(target_machine(target).target_data)


def compile_to_ptx(ir_text: str, target: CudaTarget) -> str:
    tm = target_machine(target)
    try:
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
    except RuntimeError as e:  # our own bug, reported with the IR that caused it
        raise CompileError(f"internal error: invalid NVPTX IR generated: {e}") from e
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return tm.emit_assembly(mod)


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
