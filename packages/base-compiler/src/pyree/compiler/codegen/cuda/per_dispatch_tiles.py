"""A tensor-core template's tile chosen per dispatch, for a contraction with run-time sizes
(``run_time_mma.py``): the tile the static template would take for the dispatch's sizes (the
first of least ``matmul_mma.waves_cost``), among candidates that share one kernel. The kernel
holds a body per candidate behind a branch every thread of the dispatch takes alike, and the
grid is a SizeExpr that picks the same tile: the kernel compares the costs as i64 values and
the runtime evaluates the same comparisons (``sizes.compare``) on the same integers, so the two
agree. A kernel has one register budget and one shared-memory size, those of its largest
candidate, so the candidates are tiles of like budget (``matmul_mma.RUN_TIME_TILES``).
"""

from __future__ import annotations

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.llvm_gpu import dynamic
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function
from pyree.compiler.codegen.common.llvm_gpu.size_values import STATIC, SizeValues
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.sizes import compare, select


def sizes_of(fn: Function, kernel: K.Kernel, accesses: K.Kernel | None = None):
    """The kernel's sizes: ``STATIC``, or its push constants' values, with the checks that trap
    on sizes that would take an access outside its binding (``dynamic.check_sizes``) of the
    kernel, or of ``accesses``, a plain kernel reading what it reads (an attention kernel's)."""
    if not K.has_run_time_sizes(kernel):
        return STATIC
    sizes = SizeValues(fn, K.push_constant_count(kernel))
    dynamic.check_sizes(fn, normalize(accesses or kernel), sizes)
    return sizes


def _taken(costs: list) -> list:
    """Per candidate, a 0/1 size: 1 where it is the first of least cost (``min``'s choice)."""
    out = []
    for i, ci in enumerate(costs):
        taken = 1
        for j, cj in enumerate(costs):
            if j != i:
                held = compare("lt" if j < i else "le", ci, cj)
                taken = taken * (int(held) if isinstance(held, bool) else held)
        out.append(taken)
    return out


def per_dispatch(values: list, costs: list):
    """The size that is ``values[i]`` where candidate i is taken."""
    taken = _taken(costs)
    value = values[-1]
    for v, t in zip(values[-2::-1], taken[-2::-1]):
        value = select(t, v, value)
    return value


def emit_taken(fn: Function, sizes, costs: list, bodies: list) -> None:
    """Emits ``bodies[i]()`` behind the condition that candidate i is taken; one body, alone."""
    if len(bodies) == 1:
        bodies[0]()
        return
    values = [sizes(c) for c in costs]
    for i, body in enumerate(bodies):
        cond = "true"
        for j, vj in enumerate(values):
            if j != i:
                less = fn.op(f"icmp {'ult' if j < i else 'ule'} i64 {values[i]}, {vj}")
                cond = fn.op(f"and i1 {cond}, {less}")
        fn.if_then(cond, body)
