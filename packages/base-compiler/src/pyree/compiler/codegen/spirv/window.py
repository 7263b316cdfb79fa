"""The sliding-window template of the vulkan-spirv target: a tile of outputs per workgroup, the
window's input footprint staged in workgroup memory (``codegen/common/window.py`` says which
kernels, what the window is, and the tiling).

It plans on the kernel as outlined, whose loads index by dim (where the windowed loops pair),
and writes the flattened kernel, whose loads are one linear index each; the window is found
again there. Its workgroup array takes at most a quarter of the target's shared memory: a
driver may reserve every kernel's arrays for each kernel (``assembler.shared_array``), so a
module's arrays together must fit.
"""

from __future__ import annotations

import dataclasses
import math

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common import window as W
from pyree.compiler.codegen.common.addressing import ceil_div
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.normalize import check_accesses, flatten, unsafe_loads
from pyree.compiler.codegen.spirv import assembler as S
from pyree.compiler.codegen.spirv.elementwise import result_values, store_values
from pyree.compiler.codegen.spirv.scalar import G_UMIN, ScalarLowering
from pyree.compiler.codegen.spirv.shader import Shader, grid_for


def plan_flat(kernel: K.Kernel, target) -> tuple[K.Kernel, W.Plan] | None:
    """(the flattened kernel, its plan) where the template takes ``kernel``, else None."""
    threads = 1 << int(math.log2(min(W.THREADS, target.max_workgroup_invocations)))
    plan = W.plan(kernel, threads, target.max_shared_memory_bytes // 4)
    if plan is None:
        return None
    check_accesses(kernel)
    flat = flatten(kernel)
    fold = K.fold_pattern(flat.results)[0]
    window = W.window_of(flat, fold[1], plan.pairs)
    if window is None:
        return None
    return flat, dataclasses.replace(plan, fold=fold, window=window)


class _Clamped(ScalarLowering):
    """Loads kept inside their bindings: staging evaluates the window at stand-in loop values."""

    def _lower(self, e: K.Expr) -> int:
        if not isinstance(e, K.Load):
            return super()._lower(e)
        sh = self.sh
        last = sh.size(math.prod(sh.kernel.bindings[e.binding].shape) - 1)
        at = self.fn.ext(sh.u32, G_UMIN, sh.address(e.index[0], self.point), last)
        return sh.load(e.binding, at)


def emit(sh: Shader, plan: W.Plan) -> Launch:
    kernel, fn, asm, u32 = sh.kernel, sh.fn, sh.asm, sh.u32
    ranges, npar = kernel.loop_ranges, kernel.num_parallel
    pairs, tiles = plan.pairs, plan.tiles
    paired = {p.parallel for p in pairs}
    fixed = [d for d in range(npar) if d not in paired]
    counts = [ceil_div(ranges[p.parallel], t) for p, t in zip(pairs, tiles)]
    groups = math.prod(ranges[d] for d in fixed) * math.prod(counts)
    grid = grid_for(groups)
    group, lid = sh.group_id(grid), sh.local_id()
    unsafe = frozenset(unsafe_loads(kernel))
    op, f = plan.fold
    ty = sh.compute_type(f.dtype)
    wt = sh.compute_type(plan.window.dtype)
    positions = math.prod(plan.footprint)
    shared = asm.shared_array(wt, positions)
    cell = lambda index: fn.op(S.OpAccessChain, asm.t_pointer(S.WORKGROUP, wt), shared, index)
    combine = ScalarLowering(sh, [])
    red = list(range(npar, len(ranges)))

    def body():
        coords = sh.delinearize(group, tuple(ranges[d] for d in fixed) + tuple(counts))
        fixed_values = dict(zip(fixed, coords))
        origin = [fn.op(S.OpIMul, u32, c, asm.u32(t)) for c, t in zip(coords[len(fixed):], tiles)]

        def stage(q):
            v = sh.delinearize(q, plan.footprint)
            point = [fixed_values.get(d, asm.u32(0)) for d in range(len(ranges))]
            for i, p in enumerate(pairs):
                if p.cp == 1:
                    point[p.parallel] = fn.op(S.OpIAdd, u32, origin[i], v[i])
                else:
                    point[p.parallel], point[p.reduction] = origin[i], v[i]
            value = _Clamped(sh, point)(plan.window)
            fn.do(S.OpStore, cell(q), value)

        fn.for_range(lid, asm.u32(positions), asm.u32(plan.threads), stage)
        fn.barrier()

        along = [[asm.u32(0)] for _ in pairs]
        along[-1] = [fn.op(S.OpUMod, u32, lid, asm.u32(plan.width))]
        if len(pairs) > 1:
            row = fn.op(S.OpUDiv, u32, lid, asm.u32(plan.width))
            along[-2] = [fn.op(S.OpIAdd, u32, row, asm.u32(j * plan.stack)) for j in range(plan.rows)]
        outputs = []  # per output row: its parallel loop values clamped into range, inside?, offsets
        for j in range(plan.rows):
            p, inside, offs = [fixed_values.get(d) for d in range(npar)], asm.const_bool(True), []
            for i, pair in enumerate(pairs):
                value = fn.op(S.OpIAdd, u32, origin[i], along[i][min(j, len(along[i]) - 1)])
                inside = fn.op(S.OpLogicalAnd, sh.bool, inside,
                               fn.op(S.OpULessThan, sh.bool, value, asm.u32(ranges[pair.parallel])))
                p[pair.parallel] = fn.ext(u32, G_UMIN, value, asm.u32(ranges[pair.parallel] - 1))
                offs.append(fn.op(S.OpISub, u32, p[pair.parallel], origin[i]))
            outputs.append((p, inside, offs))
        zeros = [asm.u32(0)] * len(red)
        totals = []
        for p, _, _ in outputs:
            total = fn.variable(ty)
            fn.do(S.OpStore, total, ScalarLowering(sh, p + zeros, [], unsafe)(kernel.results[0].init))
            totals.append(total)
        partials = [fn.variable(ty) for _ in outputs]
        strides = [math.prod(plan.footprint[i + 1:]) for i in range(len(pairs))]

        def taps(level: int, r: list):
            if level < len(red) - 1:
                fn.for_range(asm.u32(0), asm.u32(ranges[red[level]]), asm.u32(1),
                             lambda i: taps(level + 1, r + [i]))
                return
            for partial in partials:
                fn.do(S.OpStore, partial, combine.const(K.fold_identity(op, f.dtype), f.dtype))

            def tap(i):
                rs = r + [i]
                for (p, _, offs), partial in zip(outputs, partials):
                    at = asm.u32(0)
                    for k, pair in enumerate(pairs):
                        pos = fn.op(S.OpIAdd, u32, fn.op(S.OpIMul, u32, offs[k], asm.u32(pair.cp)),
                                    fn.op(S.OpIMul, u32, rs[pair.reduction - npar], asm.u32(pair.cr)))
                        at = fn.op(S.OpIAdd, u32, at, fn.op(S.OpIMul, u32, pos, asm.u32(strides[k])))
                    lower = ScalarLowering(sh, p + rs, [], unsafe)
                    lower.memo[plan.window] = fn.op(S.OpLoad, wt, cell(at))
                    value = lower(f)
                    old = fn.op(S.OpLoad, ty, partial)
                    fn.do(S.OpStore, partial, combine.binary(op, old, value, f.dtype))

            fn.for_range(asm.u32(0), asm.u32(ranges[red[-1]]), asm.u32(1), tap)
            for partial, total in zip(partials, totals):
                both = combine.binary(op, fn.op(S.OpLoad, ty, total), fn.op(S.OpLoad, ty, partial),
                                      f.dtype)
                fn.do(S.OpStore, total, both)

        taps(0, [])
        for (p, inside, _), total in zip(outputs, totals):
            fn.if_then(inside, lambda p=p, total=total: store_values(
                sh, p + zeros, result_values(sh, p + zeros, [total], unsafe, [0])))

    fn.if_then(fn.op(S.OpULessThan, sh.bool, group, asm.u32(groups)), body)
    return Launch(grid, (plan.threads, 1, 1), positions * sh.compute_bits(plan.window.dtype) // 8)
