"""The sliding-window template of the LLVM GPU targets (cuda, rocm): a tile of outputs per
block, the window's input footprint staged in shared memory (``codegen/common/window.py`` says
which kernels, what the window is, and the tiling)."""

from __future__ import annotations

import math

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common import window as W
from pyree.compiler.codegen.common.addressing import ceil_div
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.llvm_gpu import addressing as A
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function, Module, llvm_type, storage_type
from pyree.compiler.codegen.common.llvm_gpu.reduction import (
    identity,
    lowering,
    offsets,
    phase_finals,
    store_results,
)
from pyree.compiler.codegen.common.llvm_gpu.scalar import ScalarLowering
from pyree.compiler.codegen.common.llvm_gpu.size_values import STATIC

UNROLL = 4


def plan(kernel: K.Kernel, target) -> W.Plan | None:
    return W.plan(kernel)


def emit(module: Module, kernel: K.Kernel, name: str, plan: W.Plan) -> Launch:
    fn = Function(module)
    ranges, npar = kernel.loop_ranges, kernel.num_parallel
    pairs, tiles = plan.pairs, plan.tiles
    by_loop = {p.parallel: i for i, p in enumerate(pairs)}
    fixed = [d for d in range(npar) if d not in by_loop]
    counts = [ceil_div(ranges[p.parallel], t) for p, t in zip(pairs, tiles)]
    block = fn.op(f"zext i32 {fn.special('ctaid.x')} to i64")
    coords = A.decompose(fn, block, tuple(ranges[d] for d in fixed) + tuple(counts))
    fixed_values = dict(zip(fixed, coords))
    origin = [fn.op(f"mul i64 {c}, {t}") for c, t in zip(coords[len(fixed):], tiles)]
    tid = fn.op(f"zext i32 {fn.special('tid.x')} to i64")
    threads = plan.threads
    lin = offsets(kernel, STATIC)
    op, f = plan.fold
    ty = llvm_type(f.dtype)

    # Stage: the window at every footprint position.
    st = storage_type(plan.window.dtype)
    shared = module.shared_array(f"{name}_window", st, math.prod(plan.footprint), 16)

    def stage(q):
        v = A.decompose(fn, q, plan.footprint)
        loop = [fixed_values.get(d, "0") for d in range(len(ranges))]
        for i, p in enumerate(pairs):
            if p.cp == 1:
                loop[p.parallel] = fn.op(f"add i64 {origin[i]}, {v[i]}")
            else:
                loop[p.parallel], loop[p.reduction] = origin[i], v[i]
        value = _clamped(fn, kernel, loop, lin)(plan.window)
        cell = fn.op(f"getelementptr {st}, ptr addrspace(3) {shared}, i64 {q}")
        fn.raw(f"store {st} {value}, ptr addrspace(3) {cell}")

    fn.loop(tid, str(math.prod(plan.footprint)), str(threads), stage)
    fn.barrier()

    # Fold: each thread's outputs, nested loops over the taps.
    along = [None] * len(pairs)  # each pair's offset in the tile, per output row
    along[-1] = [fn.op(f"urem i64 {tid}, {plan.width}")]
    if len(pairs) > 1:
        row = fn.op(f"udiv i64 {tid}, {plan.width}")
        along[-2] = [fn.op(f"add i64 {row}, {j * plan.stack}") for j in range(plan.rows)]
    outputs = []  # per output row: (parallel loop values clamped into range, inside?)
    for j in range(plan.rows):
        p, inside = [None] * npar, "true"
        for d in fixed:
            p[d] = fixed_values[d]
        offs = []
        for i, pair in enumerate(pairs):
            t = along[i][j if i == len(pairs) - 2 else 0] if along[i] is not None else "0"
            value = fn.op(f"add i64 {origin[i]}, {t}")
            inside = fn.op(f"and i1 {inside}, {fn.op(f'icmp ult i64 {value}, {ranges[pair.parallel]}')}")
            last = str(ranges[pair.parallel] - 1)
            p[pair.parallel] = fn.call("i64", "llvm.umin.i64", [("i64", value), ("i64", last)])
            offs.append(fn.op(f"sub i64 {p[pair.parallel]}, {origin[i]}"))
        outputs.append((p, inside, offs))

    strides = [math.prod(plan.footprint[i + 1:]) for i in range(len(pairs))]
    red = list(range(npar, len(ranges)))
    totals = []
    for p, _, _ in outputs:
        slot = fn.alloca(ty)
        init = lowering(fn, kernel, p + [0] * len(red), lin)(kernel.results[0].init)
        fn.raw(f"store {ty} {init}, ptr {slot}")
        totals.append(slot)
    combine = ScalarLowering(fn, None, None, location=kernel.location)._binary

    def taps(level: int, r: list):
        if level < len(red) - 1:
            fn.loop("0", str(ranges[red[level]]), "1", lambda i: taps(level + 1, r + [i]))
            return
        partials = [fn.alloca(ty) for _ in outputs]
        for slot in partials:
            fn.raw(f"store {ty} {identity(op, f.dtype)}, ptr {slot}")

        def tap(i):
            rs = r + [i]
            for (p, _, offs), slot in zip(outputs, partials):
                off = "0"
                for k, pair in enumerate(pairs):
                    pos = fn.op(f"add i64 {fn.op(f'mul i64 {offs[k]}, {pair.cp}')}, "
                                f"{fn.op(f'mul i64 {rs[pair.reduction - npar]}, {pair.cr}')}")
                    off = fn.op(f"add i64 {off}, {fn.op(f'mul i64 {pos}, {strides[k]}')}")
                cell = fn.op(f"getelementptr {st}, ptr addrspace(3) {shared}, i64 {off}")
                lower = lowering(fn, kernel, p + rs, lin)
                lower.cache[plan.window] = fn.op(f"load {st}, ptr addrspace(3) {cell}")
                old = fn.op(f"load {ty}, ptr {slot}")
                fn.raw(f"store {ty} {combine(op, old, lower(f), f.dtype)}, ptr {slot}")

        fn.loop("0", str(ranges[red[-1]]), "1", tap, unroll=UNROLL)
        for slot, total in zip(partials, totals):
            both = combine(op, fn.op(f"load {ty}, ptr {total}"), fn.op(f"load {ty}, ptr {slot}"), f.dtype)
            fn.raw(f"store {ty} {both}, ptr {total}")

    taps(0, [])
    for (p, inside, _), total in zip(outputs, totals):
        zeros = p + [0] * len(red)
        acc = fn.op(f"load {ty}, ptr {total}")
        fn.if_then(inside, lambda zeros=zeros, p=p, acc=acc: store_results(
            fn, kernel, zeros, lin, phase_finals(fn, kernel, p, lin, {0: acc}, [0])))
    module.add_kernel(name, A.kernel_params(kernel), fn, block_size=threads)
    return Launch((math.prod(ranges[d] for d in fixed) * math.prod(counts), 1, 1), (threads, 1, 1))


def _clamped(fn: Function, kernel: K.Kernel, loop: list, lin) -> ScalarLowering:
    """A lowering at stand-in loop values whose loads stay inside their bindings."""
    def load(e: K.Load):
        size = math.prod(kernel.bindings[e.binding].shape)
        off = A.clamp(fn, A.offset(fn, lin(e.binding, e.index), loop), size)
        return A.load(fn, A.element_ptr(fn, f"%b{e.binding}", e.dtype, off), e.dtype)
    return ScalarLowering(fn, load, lambda d: loop[d], None, kernel.location, kernel)
