"""Kernel IR -> one LLVM module holding every kernel's exported entry point."""

from __future__ import annotations

import re
from dataclasses import dataclass

from llvmlite import ir
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.codegen.interface import choose
from pyree.compiler.codegen.llvm_cpu import dynamic, elementwise, matmul, reduction
from pyree.compiler.codegen.llvm_cpu.entry import emit_kernel
from pyree.compiler.codegen.llvm_cpu.targets import TRIPLE, CpuTarget
from pyree.compiler.kernel import Kernel

# The kernel templates in priority order (interface.choose). A plan is the template's lowering
# object, whose ``emit`` writes the kernel's body inside its entry point (entry.py). ``dynamic``
# takes exactly the kernels with run-time sizes, so no other template ever sees one.
TEMPLATES = (dynamic, matmul, reduction, elementwise)


@dataclass(frozen=True)
class LoweredKernel:
    symbol: str
    workgroup_count: object  # an int, or a run-time size over the push constants


def lower_kernels(kernels: list[Kernel], target: CpuTarget) -> tuple[ir.Module, list[LoweredKernel]]:
    (module,), lowered = lower_parts(kernels, target, 1)
    return module, lowered


def lower_parts(kernels: list[Kernel], target: CpuTarget,
                parts: int) -> tuple[list[ir.Module], list[LoweredKernel]]:
    """The kernels as at most ``parts`` LLVM modules, kernel k in module k % parts (the same
    split on every machine), which LLVM then optimizes and emits on several cores
    (``codegen/common/parallel.py``); each module declares the helpers its own kernels call."""
    modules = [ir.Module(name="pyree_llvm_cpu") for _ in range(max(1, min(parts, len(kernels))))]
    for module in modules:
        module.triple = TRIPLE
    lowered = []
    for k, kernel in enumerate(kernels):
        module = modules[k % len(modules)]
        flat = normalize(kernel)
        _, plan = choose(TEMPLATES, flat, target)
        symbol = f"pyree_k{k}_{re.sub(r'[^A-Za-z0-9_]', '_', kernel.name)}"
        emit_kernel(module, symbol, flat, plan.workgroup_count, plan.emit)
        lowered.append(LoweredKernel(symbol, plan.workgroup_count))
    return modules, lowered
