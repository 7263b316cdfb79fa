"""LLVM IR text -> optimized x86-64 object code -> shared object (via the system linker)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import llvmlite.binding as llvm
from pyree.compiler.codegen.llvm_cpu.targets import TRIPLE, CpuTarget
from pyree.compiler.errors import CompileError


def optimize(ir_text: str, target: CpuTarget) -> llvm.ModuleRef:
    """Parses and verifies the module, then runs LLVM's O3 pipeline with both vectorizers."""
    module = parse(ir_text, target)
    run_passes(module, target)
    return module


def parse(ir_text: str, target: CpuTarget) -> llvm.ModuleRef:
    """The module of ``ir_text``, verified, with the target's triple and data layout."""
    module = llvm.parse_assembly(ir_text)
    module.triple = TRIPLE
    module.data_layout = str(target.machine.target_data)
    module.verify()
    return module


def run_passes(module: llvm.ModuleRef, target: CpuTarget) -> None:
    """LLVM's O3 pipeline with both vectorizers, in place."""
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(target.machine, pto)
    pb.getModulePassManager().run(module, pb)


def compile_object(ir_text: str, target: CpuTarget, listings: bool = False):
    """One module's object code: a code-generation job (``codegen/common/parallel.py``). With
    ``listings``: (object code, the optimized IR, its assembly), for the executable dump; the
    assembly comes from the optimized IR parsed again, as emitting code may change the module."""
    module = optimize(ir_text, target)
    if not listings:
        return target.machine.emit_object(module)
    optimized = str(module)
    return (target.machine.emit_object(module), optimized,
            target.machine.emit_assembly(llvm.parse_assembly(optimized)))


def link_shared_object(objects: list[bytes]) -> bytes:
    """Links object files, in order, into a shared object with whichever system linker exists."""
    linker = _find_linker()
    with tempfile.TemporaryDirectory(prefix="pyree-llvmcpu-") as tmp:
        sources, out = [Path(tmp, f"kernels{i}.o") for i in range(len(objects))], Path(tmp, "kernels.so")
        for src, obj in zip(sources, objects):
            src.write_bytes(obj)
        # libm by its runtime name: "-lm" needs the libm.so development link (libc6-dev), which
        # a machine with only binutils lacks
        cmd = [*linker, "-o", str(out), *map(str, sources), "-l:libm.so.6"]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise CompileError(f"llvm-cpu: linking the kernel library failed ({' '.join(cmd)}): "
                               f"{proc.stderr.strip()}")
        return out.read_bytes()


def _find_linker() -> list[str]:
    for tool, args in (("cc", ["-shared"]), ("ld.lld", ["-shared"]), ("ld", ["-shared"])):
        path = shutil.which(tool)
        if path:
            return [path, *args]
    raise CompileError("llvm-cpu: no system linker found (looked for cc, ld.lld and ld); "
                       "install binutils (e.g. `apt-get install binutils`) to compile for llvm-cpu")
