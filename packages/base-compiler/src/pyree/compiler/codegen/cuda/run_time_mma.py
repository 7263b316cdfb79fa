"""Tensor-core contractions with run-time sizes (a prompt's length, a serving batch, attention over
a run-time sequence), ahead of ``common/llvm_gpu/dynamic.py``: ``matmul_wgmma`` (sm_90a) or
``matmul_mma`` (sm_80+), whose templates take M, N, K and the batch as ints or run-time values,
for operands that are loads whose indices are the loops' own (run-time strides are checked for
16-byte chunks per dispatch); the tile is chosen per dispatch (``per_dispatch_tiles``). Every
other kernel with run-time sizes goes on to ``dynamic``."""

from __future__ import annotations

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Module
from pyree.compiler.codegen.cuda import matmul_mma, matmul_wgmma


def plan(kernel: K.Kernel, target):
    """(template, its plan) for a kernel with run-time sizes that a tensor-core template takes."""
    if not K.has_run_time_sizes(kernel):
        return None
    for template in (matmul_wgmma, matmul_mma):
        found = template.plan(kernel, target)
        if found is not None:
            return template, found
    return None


def emit(module: Module, kernel: K.Kernel, name: str, plan) -> Launch:
    template, found = plan
    return template.emit(module, kernel, name, found)
