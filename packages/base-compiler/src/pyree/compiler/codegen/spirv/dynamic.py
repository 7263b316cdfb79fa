"""Kernels with run-time sizes (loop ranges, binding dims or strides known per dispatch only:
``pyree.compiler.sizes``, symbol pk push constant k): the first template, taking exactly those
kernels, so every static kernel's shader stays as the static templates write it.

It hands a kernel to the static template that takes it with its extents as emitted values
(``Shader.size``, ``sizes.py``): the tiled matmul for a contraction (its fixed 64x64 tiling,
which suits any M and N), the workgroup tree for a fold whose reduction is run-time or long, and
else one invocation per output point (elementwise, broadcast, transpose, gather, short and
non-fold reductions, phased row kernels), or, for a contiguous elementwise kernel, the 4-vector
template with its last 1-3 elements one at a time. Each bounds its work by the evaluated
extents, and its grid is a run-time size (``shader.grid_for``), 0 workgroups where the extent
is 0. The cooperative-matrix matmul, whose shape is decided by the static extents (whole
tiles), stays static-only.
"""

from __future__ import annotations

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.interface import choose
from pyree.compiler.codegen.spirv import elementwise, matmul, reduction, vectorized
from pyree.compiler.codegen.spirv.shader import Shader

TEMPLATES = (matmul, reduction, vectorized, elementwise)


def plan(kernel: K.Kernel, target):
    """(template, its plan) for a kernel with run-time sizes, else None."""
    return choose(TEMPLATES, kernel, target) if K.has_run_time_sizes(kernel) else None


def emit(sh: Shader, plan) -> Launch:
    template, inner = plan
    return template.emit(sh, inner)
