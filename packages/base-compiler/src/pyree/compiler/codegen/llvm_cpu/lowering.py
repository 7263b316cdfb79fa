"""Kernel IR -> one LLVM module holding every kernel's exported entry point."""

from __future__ import annotations

import re
from dataclasses import dataclass

from llvmlite import ir
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.codegen.interface import choose
from pyree.compiler.codegen.llvm_cpu import (
    amx,
    dynamic,
    elementwise,
    line_scan,
    line_sort,
    matmul,
    reduction,
    scatter,
)
from pyree.compiler.codegen.llvm_cpu.entry import emit_kernel
from pyree.compiler.codegen.llvm_cpu.targets import TRIPLE, CpuTarget
from pyree.compiler.kernel import Kernel

# The kernel templates in priority order (interface.choose). A plan is the template's lowering
# object, whose ``emit`` writes the kernel's body inside its entry point (entry.py). ``dynamic``
# takes exactly the kernels with run-time sizes and ``scatter`` those with a scatter result
# (static only: input/scatter.py keeps a dynamic scatter a fold), so no other template ever
# sees one; ``line_sort`` and ``line_scan`` exactly those holding a ``kernel.LineSort`` or a
# ``kernel.LineScan`` (static: input/sort_scan.py forms them only for static shapes).
TEMPLATES = (line_sort, line_scan, scatter, dynamic, amx, matmul, reduction, elementwise)


@dataclass(frozen=True)
class LoweredKernel:
    symbol: str
    workgroup_count: object  # an int, or a run-time size over the push constants


def lower_kernels(kernels: list[Kernel], target: CpuTarget) -> tuple[ir.Module, list[LoweredKernel]]:
    """Every kernel in one LLVM module."""
    return lower_part(kernels, target, 1, 0)


def part_count(kernels: list[Kernel], parts: int) -> int:
    """The LLVM modules ``parts`` asks for, at most one per kernel."""
    return max(1, min(parts, len(kernels)))


def lower_part(kernels: list[Kernel], target: CpuTarget, count: int,
               p: int) -> tuple[ir.Module, list[LoweredKernel]]:
    """Module ``p`` of ``count`` (``part_count``): kernels p, p + count, p + 2 count... (the
    same split on every machine), which LLVM then optimizes and emits on several cores
    (``codegen/common/parallel.py``); the module declares the helpers its own kernels call.
    Each part is lowered on its own, so the parent builds one while workers compile others."""
    module = ir.Module(name="pyree_llvm_cpu")
    module.triple = TRIPLE
    lowered = []
    for k in range(p, len(kernels), count):
        flat = normalize(kernels[k])
        _, plan = choose(TEMPLATES, flat, target)
        symbol = f"pyree_k{k}_{re.sub(r'[^A-Za-z0-9_]', '_', kernels[k].name)}"
        emit_kernel(module, symbol, flat, plan.workgroup_count, plan.emit)
        lowered.append(LoweredKernel(symbol, plan.workgroup_count))
    return module, lowered
