"""LLVM for the GPU targets (NVPTX for cuda, AMDGPU for rocm) through llvmlite: one target machine
per (triple, chip, features), and the kernels' IR parsed, verified and run through O3."""

from __future__ import annotations

import functools

import llvmlite.binding as llvm
from pyree.compiler.errors import CompileError


@functools.cache
def target_machine(triple: str, cpu: str, features: str):
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=3, reloc="pic", codemodel="default")


def optimized(ir_text: str, tm, what: str) -> llvm.ModuleRef:
    """``ir_text`` after LLVM's O3 pipeline for ``tm``; invalid IR is our own bug, reported
    with LLVM's message (``what``: "NVPTX", "AMDGPU")."""
    try:
        module = llvm.parse_assembly(ir_text)
        module.verify()
    except RuntimeError as e:
        raise CompileError(f"internal error: invalid {what} IR generated: {e}") from e
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(module, pb)
    return module


def assembly(ir_text: str, triple: str, cpu: str, features: str, what: str) -> str:
    """The optimized module's assembly (PTX for NVPTX): a code-generation job
    (``codegen/common/parallel.py``), kept here rather than in a backend's package so that a spawned
    worker imports llvmlite for it and not a backend's templates."""
    tm = target_machine(triple, cpu, features)
    return tm.emit_assembly(optimized(ir_text, tm, what))
