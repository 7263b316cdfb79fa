"""Elementwise kernels over contiguous data (every load and store at the flat loop index plus a
constant, e.g. add, mul, activations): one 4-vector (16-byte) load per input and one store per
result per invocation, over a grid of as many workgroups as there are vectors to cover.

Memory-bound kernels need wide accesses to approach the memory bandwidth; one scalar per
invocation leaves a large GPU at a fraction of it. The full grid beat a grid-stride loop over a
fixed number of workgroups, and two or four vectors per invocation gained nothing (BENCHMARKS.md).
The kernel body is lowered once per lane on the loaded components, so every expression the scalar
lowering knows works here too. Kernels whose static size is not a multiple of 4, with
broadcasts, loop indices, gathers or guarded loads take the one-invocation-per-point template
instead. A run-time size (``dynamic.py``) takes this template too: the invocations of whole
vectors as above, and the one past them its 1-3 elements one at a time (one element an
invocation had run an elementwise kernel over 4096x4096 4.2x slower than the static module on
NVIDIA's Vulkan driver, BENCHMARKS.md).
"""

from __future__ import annotations

import math

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.normalize import unsafe_loads
from pyree.compiler.codegen.spirv import assembler as S
from pyree.compiler.codegen.spirv.scalar import ScalarLowering
from pyree.compiler.codegen.spirv.shader import Shader, grid_for
from pyree.compiler.sizes import is_static, num_elements, opaque

WIDTH = 4
BLOCK = 256   # invocations per workgroup where the target allows (256, 512, 1024 ran the same)


def _row_major_strides(ranges: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.prod(ranges[d + 1:]) for d in range(len(ranges)))


def plan(kernel: K.Kernel, target) -> bool | None:
    """True when this template takes the (normalized) ``kernel``, else None."""
    return True if _applies(kernel) else None


def _applies(kernel: K.Kernel) -> bool:
    if kernel.reduction_ranges or unsafe_loads(kernel):
        return False
    total = num_elements(kernel.parallel_ranges)
    if is_static(total) and (total == 0 or total % WIDTH):
        return False
    # a run-time size: the flat index of one loop (a normalized kernel's)
    flat = (1,) if len(kernel.parallel_ranges) == 1 else \
        _row_major_strides(kernel.parallel_ranges) if is_static(total) else None
    nodes = [n for r in kernel.results for n in K.walk(r.value)]
    indices = [r.index[0] for r in kernel.results] + [n.index[0] for n in nodes
                                                      if isinstance(n, K.Load)]
    if flat is None or any(ix.coeffs != flat or not is_static(ix.const) or ix.const % WIDTH
                           for ix in indices):  # (a run-time offset: its alignment unknown)
        return False
    if any(isinstance(n, (K.LoopIndex, K.Gather)) for n in nodes):
        return False  # a Gather reads its binding per element, not through the vector view
    # 32-bit elements: a 4-vector is one 16-byte access, and 8/16-bit storage-only types could
    # not be taken apart (SPIR-V forbids extracting from their vectors without arithmetic).
    return all(K.itemsize(b.dtype) == 4 for b in kernel.bindings)


def emit(sh: Shader, plan: bool) -> Launch:
    kernel, fn, asm, u32 = sh.kernel, sh.fn, sh.asm, sh.u32
    total = num_elements(kernel.parallel_ranges)
    vectors = opaque("floordiv", total, WIDTH)  # whole ones
    block = min(BLOCK, sh.target.max_workgroup_invocations)
    grid = grid_for(opaque("ceildiv", opaque("ceildiv", total, WIDTH), block))
    i = fn.op(S.OpIAdd, u32, fn.op(S.OpIMul, u32, sh.group_id(grid), asm.u32(block)), sh.local_id())
    loads = sorted({n for r in kernel.results for n in K.walk(r.value) if isinstance(n, K.Load)},
                   key=lambda ld: (ld.binding, ld.index[0].const))

    def at(ix: K.AffineExpr) -> int:
        return i if ix.const == 0 else fn.op(S.OpIAdd, u32, i, asm.u32(ix.const // WIDTH))

    def body() -> None:
        lanes = [ScalarLowering(sh, []) for _ in range(WIDTH)]
        for ld in loads:
            _, dtype = sh.buffers[ld.binding]
            vec = sh.load_vector(ld.binding, at(ld.index[0]), WIDTH)
            element = sh.storage_type(dtype)
            for lane, lower in enumerate(lanes):
                raw = fn.op(S.OpCompositeExtract, element, vec, lane)
                lower.memo[ld] = sh.widen(dtype, raw)
        for r in kernel.results:
            _, dtype = sh.buffers[r.binding]
            parts = [sh.narrow(dtype, lower(r.value)) for lower in lanes]
            vec_type = asm.t_vector(sh.storage_type(dtype), WIDTH)
            sh.store_vector(r.binding, at(r.index[0]), WIDTH,
                            fn.op(S.OpCompositeConstruct, vec_type, *parts))

    def tail() -> None:
        """The elements past the whole vectors, each behind its own bound (none past the
        first such invocation)."""
        for lane in range(WIDTH):
            e = fn.op(S.OpIAdd, u32, fn.op(S.OpIMul, u32, i, asm.u32(WIDTH)), asm.u32(lane))

            def element(e=e) -> None:
                lower = ScalarLowering(sh, [e])
                values = [lower(r.value) for r in kernel.results]
                for r, v in zip(kernel.results, values):
                    sh.store(r.binding, sh.address(r.index[0], [e]), v)
            fn.if_then(fn.op(S.OpULessThan, sh.bool, e, sh.size(total)), element)

    fn.if_then(fn.op(S.OpULessThan, sh.bool, i, sh.size(vectors)), body,
               None if is_static(total) else tail)
    return Launch(grid, (block, 1, 1))
