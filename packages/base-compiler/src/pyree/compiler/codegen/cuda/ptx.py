"""LLVM IR -> PTX through llvmlite's NVPTX target (O3), and PTX -> cubin through ptxas when the
build machine has it (``PYREE_PTXAS`` names another ptxas; set it to an empty string to skip)."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile

from pyree.compiler.codegen.common.llvm_gpu import machine as llvm_gpu
from pyree.compiler.codegen.cuda.targets import CudaTarget
from pyree.compiler.errors import CompileError

_TRIPLE = "nvptx64-nvidia-cuda"
# A module-scope definition in PTX: a kernel, a function or a global/shared/const variable.
_DEFINED = re.compile(r"^(?:\.visible |\.extern |\.weak )?\.(?:entry|func|global|shared|const)\s+"
                      r"(?:(?:\.\S+|\d+)\s+)*(?:\([^)]*\)\s*)?([A-Za-z_$%][\w$]*)", re.M)


def target_machine(target: CudaTarget):
    return llvm_gpu.target_machine(_TRIPLE, target.arch, target.llvm_features)


def data_layout(target: CudaTarget) -> str:
    return str(target_machine(target).target_data)


def compile_to_ptx(ir_text: str, target: CudaTarget) -> str:
    return ptx_job(target)(ir_text)


def ptx_job(target: CudaTarget) -> functools.partial:
    """LLVM IR text -> PTX for ``target``, as a job for ``parallel.map_jobs``."""
    return functools.partial(llvm_gpu.assembly, triple=_TRIPLE, cpu=target.arch,
                             features=target.llvm_features, what="NVPTX")


def merge(ptx_texts: list[str]) -> str:
    """One PTX module from several that LLVM emitted for the same target: the first's header,
    then every module's body. Kernels, and the shared memory each declares, are named after
    the kernel, so bodies never clash; a name defined twice would be our bug, and is refused."""
    header, bodies, names = None, [], set()
    for text in ptx_texts:
        head, _, body = text.partition("\n.address_size 64\n")
        if not body or (header is not None and head != header):
            raise CompileError("internal error: PTX modules to merge differ in their headers")
        header = head
        for name in _DEFINED.findall(body):
            if name in names:
                raise CompileError(f"internal error: '{name}' is defined by two PTX modules")
            names.add(name)
        bodies.append(body)
    return header + "\n.address_size 64\n" + "".join(bodies)


def ptxas_path() -> str | None:
    override = os.environ.get("PYREE_PTXAS")
    if override is not None:
        return override or None
    return shutil.which("ptxas")


def assemble(ptx: str, target: CudaTarget, ptxas: str) -> bytes | None:
    """The cubin for exactly ``target.arch``, or None when this ptxas no longer knows the arch
    (CUDA 13 dropped sm_60..sm_72) or does not yet know the PTX version (sm_90a's 8.3 needs the
    ptxas of CUDA 12.3): the module then carries PTX only, for the driver to compile."""
    with tempfile.TemporaryDirectory(prefix="pyree-ptxas-") as tmp:
        src, out = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        proc = subprocess.run([ptxas, f"-arch={target.arch}", "-O3", src, "-o", out],
                              capture_output=True, text=True)
        if proc.returncode != 0 and ("is not defined for option 'gpu-name'" in proc.stderr
                                     or "Unsupported .version" in proc.stderr):
            return None
        if proc.returncode != 0:
            raise CompileError(f"internal error: ptxas rejected the generated PTX for "
                               f"{target.arch}: {proc.stderr.strip()}")
        with open(out, "rb") as f:
            return f.read()
