"""Kernels with run-time sizes (loop ranges, binding dims or strides known per dispatch only:
``pyree.compiler.sizes``, symbol pk push constant k): the first template, taking exactly those
kernels, so every static kernel's shader stays as the static templates write it.

It hands a kernel to the static template that takes it with its extents as emitted values
(``Shader.size``, ``sizes.py``): the cooperative-matrix matmul for a contraction of f16/bf16
operands on a target with them (a run-time side on 64-wide tiles), the tiled matmul for any
other contraction (its fixed 64x64 tiling, which suits any M and N), the workgroup tree for a
fold whose reduction is run-time or long, and else one invocation per output point
(elementwise, broadcast, transpose, gather, short and non-fold reductions, phased row kernels),
or, for a contiguous elementwise kernel, the 4-vector template with its last 1-3 elements one at
a time. Each bounds its work by the evaluated
extents, and its grid is a run-time size (``shader.grid_for``), 0 workgroups where the extent
is 0.

A contraction whose M or N is a run-time size holds several bodies on one workgroup size,
chosen per dispatch by uniform branches on the sizes, the grid chosen alike: the fold a static
kernel of one row (or column) takes (its unit loop dropped, no contraction is left to tile; at
one row the 64x64 tile computes 63 rows of zeros, and a transformer block's linears at one
token ran 12.4-13 us on NVIDIA's Vulkan driver where the static module's fold ran 8.8-9.1), the
SIMT template's 128x128 tiling where M and N reach its static rule's 512 (a 1024^3 f32 product
on 64x64 tiles ran 1.3x the static module's time), and its tiled body (BENCHMARKS.md).
"""

from __future__ import annotations

import dataclasses

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.interface import choose
from pyree.compiler.codegen.spirv import assembler as S
from pyree.compiler.codegen.spirv import coopmat, elementwise, matmul, reduction, vectorized
from pyree.compiler.codegen.spirv.shader import Shader
from pyree.compiler.sizes import Size, compare, is_static, select

TEMPLATES = (coopmat, matmul, reduction, vectorized, elementwise)
TILED = (coopmat, matmul)  # the contraction templates, whose one-row dispatches take a fold
FOLDS = (reduction, elementwise)  # what a contraction of one row or column takes (vectorized
# takes no kernel with a reduction)


def plan(kernel: K.Kernel, target):
    """(template, its plan) for a kernel with run-time sizes, else None."""
    return choose(TEMPLATES, kernel, target) if K.has_run_time_sizes(kernel) else None


def emit(sh: Shader, plan) -> Launch:
    template, inner = plan
    bodies = [(None, lambda: template.emit(sh, inner))]  # (condition, emit), the first that holds
    if template is matmul and inner[1] is matmul.SMALL:
        large = matmul.large(sh.kernel)
        tiles = (inner[0], matmul.LARGE)
        if isinstance(large, Size) and sh.target.max_shared_memory_bytes >= sum(
                matmul.shared_bytes(inner[0], t, sh.target) for t in (matmul.SMALL, matmul.LARGE)):
            bodies.insert(0, (large, lambda: matmul.emit(sh, tiles)))
    one = _one_row_or_column(sh.kernel) if template in TILED else False
    if isinstance(one, Size):
        threads = inner[1].threads if template is matmul else \
            inner.tile.threads(sh.target.subgroup_size)
        fold = _fold_on(choose(FOLDS, sh.kernel, sh.target), threads, sh.target)
        if fold is not None:
            bodies.insert(0, (one, lambda: fold(sh)))
    return _first_that_holds(sh, bodies)


def _fold_on(fold, threads: int, target):
    """``emit(sh)`` of the fold on ``threads`` invocations a workgroup, or None where it cannot
    take that many (either fold takes any power of two up to its most)."""
    template, plan = fold
    if threads > template.block_size(target) or threads & (threads - 1):
        return None
    if template is reduction:
        return lambda sh: reduction.emit(sh, dataclasses.replace(plan, block=threads))
    return lambda sh: elementwise.emit(sh, plan, block=threads)


def _one_row_or_column(kernel: K.Kernel):
    """1 where the dispatch's M or N is 1, else 0 (a Size), or a bool where the sizes decide."""
    m, n = kernel.parallel_ranges[-2:]
    held = [compare("eq", e, 1) for e in (m, n) if not is_static(e)]
    if not held or True in held:
        return bool(held)
    sizes = [h for h in held if h is not False]
    if not sizes:
        return False
    return sizes[0] if len(sizes) == 1 else select(sizes[0], 1, sizes[1])


def _first_that_holds(sh: Shader, bodies: list) -> Launch:
    """One launch of several bodies on one workgroup size, each run where its condition (a 0/1
    Size; None: always) is the first that holds, by uniform branches; the grid chosen alike.
    No two bodies run in one dispatch, so they take the same workgroup arrays (a driver may
    reserve a module's arrays for each of its kernels: assembler.shared_array)."""
    (held, first), rest = bodies[0], bodies[1:]
    if not rest:
        return first()
    launches, mark = {}, sh.asm.shared_mark()

    def others():
        sh.asm.shared_rewind(mark)
        launches["rest"] = _first_that_holds(sh, rest)
    sh.fn.if_then(sh.fn.op(S.OpULessThan, sh.bool, sh.asm.u32(0), sh.size(held)),
                  lambda: launches.setdefault("first", first()), others)
    a, b = launches["first"], launches["rest"]
    assert a.block == b.block, (a.block, b.block)
    grid = tuple(select(held, x, y) for x, y in zip(a.grid, b.grid))
    return Launch(grid, a.block, sh.asm.kernel_shared_bytes())
