"""Kernels with run-time sizes: the one template for every kernel whose loop ranges, binding dims
or indices are sizes known per dispatch only (``pyree.compiler.sizes``; symbol pk is push
constant k). Nothing is compiled per size.

Workgroups cut the outermost parallel loop into tiles whose size is itself a run-time size:
``max(ceildiv(extent, MAX_GROUPS), ceildiv(MIN_WORK_PER_GROUP, work per point of that loop))``
(rounded up to 64 where that loop is the only one, so vectorized tiles stay whole), the rule
the static tiling follows, evaluated per dispatch; the count is ``ceildiv(extent, tile)`` and
the last tile is cut at the extent, so a zero extent runs no workgroup. A static tile was the
alternative: it is right at one size only, too many tiny workgroups or too few big ones at others.

Each workgroup runs a scalar loop nest to run-time bounds (each size evaluated once, in the
body's entry block: ``size_values.py``), and LLVM vectorizes the innermost loop with a scalar
tail: normalization leaves elementwise ops of any rank as one loop wherever strides line up,
and keeps the loop the result is contiguous along innermost. Reductions take ``reduction.py``'s
orders with run-time extents: parallel-inner where more loads are contiguous along the innermost
parallel loop (column sums, and contractions such as a matmul, whose right operand is), else
reduction-inner, phases and row results included (softmax, layernorm), float folds whose loads
are contiguous or broadcast along the innermost reduction loop folding in vectors of
``FOLD_BITS`` with a scalar tail. Float folds are cascaded (``codegen/common/cascade.py``) in
blocks whose bounds are run-time, with levels enough for any uint32 extent; a run-time row of at
most ``SCALAR_LEAF`` terms branches to one plain loop. Not here yet: the static contraction
micro-kernel and window order, whose decisions need the extents at compile time.
"""

from __future__ import annotations

from llvmlite import ir
from pyree.compiler.codegen.common import cascade
from pyree.compiler.codegen.common.cascade import block_sizes
from pyree.compiler.codegen.common.normalize import loads
from pyree.compiler.codegen.llvm_cpu.loops import entry_alloca, for_range, i64, nest, umin
from pyree.compiler.codegen.llvm_cpu.reduction import (
    BLOCK,
    COLUMN_LEAF,
    FAN_IN,
    FOLD_BITS,
    LEAF,
    SCALAR_LEAF,
    combine_folds,
    contiguous_along_parallel,
    float_folds,
    fresh_folds,
    tree_fold,
)
from pyree.compiler.codegen.llvm_cpu.scalar import ExprEmitter, Point, bits, scalar_type, span_stride
from pyree.compiler.codegen.llvm_cpu.tiling import MAX_GROUPS, MIN_WORK_PER_GROUP
from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import (
    Gather,
    Kernel,
    Load,
    Result,
    has_run_time_sizes,
    is_row_kernel,
    phases,
    walk,
)
from pyree.compiler.sizes import align_up, is_static, num_elements, opaque

ALIGN = 64                 # elements: a tile of the innermost loop is a whole number of vectors
CASCADE_EXTENT = 1 << 32   # a run-time fold's cascade has levels for this many steps


def plan(kernel: Kernel, target) -> DynamicLowering | None:
    """The lowering of a kernel with run-time sizes; None for a static one."""
    return DynamicLowering(kernel, span_stride(target)) if has_run_time_sizes(kernel) else None


def tiles(kernel: Kernel) -> tuple:
    """(tile, workgroup count): sizes or ints; the tile of the outermost parallel loop."""
    if kernel.num_parallel == 0:
        return 1, 1
    extent = kernel.parallel_ranges[0]
    per_point = num_elements(kernel.loop_ranges[1:]) * max(1, len(loads(kernel)) + len(kernel.results))
    tile = opaque("max", opaque("ceildiv", extent, MAX_GROUPS),
                  opaque("ceildiv", MIN_WORK_PER_GROUP, opaque("max", per_point, 1)))
    if len(kernel.loop_ranges) == 1:
        tile = align_up(tile, ALIGN)
    return tile, opaque("ceildiv", extent, tile)


class DynamicLowering:
    def __init__(self, kernel: Kernel, span: int = 1):
        """``span``: the longest lane step loaded as a span (scalar.span_stride)."""
        for k, r in enumerate(kernel.reductions):
            if kernel.reduction_ranges and r.init is None:
                raise CompileError(f"result {k} of reduction kernel '{kernel.name}' has no init")
        self.kernel, self.span = kernel, span
        self.tile, self.workgroup_count = tiles(kernel)
        self.parallel_inner = not is_row_kernel(kernel.results) and contiguous_along_parallel(kernel)

    def emit(self, b: ir.IRBuilder, ptrs: list[ir.Value], wg: ir.Value, sizes) -> None:
        """One workgroup; ``sizes``: the body's ``size_values.SizeValues``."""
        kernel = self.kernel
        em = ExprEmitter(b, ptrs, kernel, sizes=sizes)
        bounds = [(i64(0), sizes(n)) for n in kernel.parallel_ranges]
        if bounds:
            lo = b.mul(wg, sizes(self.tile))
            bounds[0] = (lo, umin(b, b.add(lo, sizes(self.tile)), bounds[0][1]))
        if kernel.reduction_ranges and self.parallel_inner:
            nest(b, bounds[:-1], lambda ix: self._column_blocks(b, em, sizes, ix, bounds[-1]))
        elif kernel.reduction_ranges:
            nest(b, bounds, lambda ix: _Point(self, b, ptrs, sizes, em, ix).emit())
        else:
            nest(b, bounds, lambda ix: store(em, Point(ix), kernel.results))


    def _column_blocks(self, b: ir.IRBuilder, em: ExprEmitter, sizes, ix: list[ir.Value], inner) -> None:
        """``reduction.py``'s parallel-inner order: per block of ``BLOCK`` outputs along the
        innermost parallel loop, accumulator arrays swept once per reduction point (vectorized
        along that loop), float folds cascaded along the outermost reduction loop."""
        results = self.kernel.results
        types = [scalar_type(r.value.dtype) for r in results]
        folds = float_folds(results, range(len(results)))
        levels_at = fold_levels(self.kernel.reduction_ranges[0], COLUMN_LEAF) if folds else []
        levels = [[entry_alloca(b, t, BLOCK) for t in types] for _ in range(len(levels_at) + 1)]
        top, zeros = len(levels_at), [i64(0)] * len(self.kernel.reduction_ranges)
        red = [(i64(0), sizes(n)) for n in self.kernel.reduction_ranges]
        with for_range(b, *inner, step=BLOCK, name="block") as start:
            stop = umin(b, b.add(start, i64(BLOCK)), inner[1])

            def sweep(rest: list[ir.Value], update) -> None:
                """``update(point, slots)``, ``slots(level)`` being the column's accumulators."""
                with for_range(b, start, stop, name="c") as c:
                    at = b.sub(c, start)
                    update(ix + [c] + rest, lambda level: [
                        b.gep(a, [at], source_etype=t) for a, t in zip(levels[level], types)])

            def init(at, slots):
                for v, slot in zip([em.emit(r.init, Point(at)) for r in results], slots(top)):
                    b.store(v, slot)

            def step(at, slots):
                pt = Point(at, accs=[b.load(slot, typ=t) for slot, t in zip(slots(0), types)])
                for v, slot in zip([em.emit(r.value, pt, fast=True) for r in results], slots(0)):
                    b.store(v, slot)

            def finish(at, slots):
                pt = Point(at, accs=[b.load(slot, typ=t) for slot, t in zip(slots(top), types)])
                values = [em.emit(r.epilogue, pt) if r.epilogue is not None else pt.accs[k]
                          for k, r in enumerate(results)]
                for r, v in zip(results, values):
                    em.store(r.binding, r.index[0], v, pt)

            sweep(zeros, init)
            run_time_cascade(
                b, i64(0), red[0][1], levels_at,
                lambda r: nest(b, red[1:], lambda rix: sweep([r] + rix, step)),
                lambda j: sweep(zeros, lambda at, slots: fresh_folds(b, em, folds, dict(enumerate(slots(j))))),
                lambda j: sweep(zeros, lambda at, slots: combine_folds(
                    b, em, folds, dict(enumerate(slots(j + 1))), dict(enumerate(slots(j))))))
            sweep(zeros, finish)


def run_time_cascade(b: ir.IRBuilder, lo, hi, levels: list[int], body, fresh, combine,
                     step: int = 1) -> None:
    """``cascade.cascade`` with run-time bounds; the block loops are not unrolled."""
    def loop(start, stop, by, fn):
        with for_range(b, start, stop, step=by, name="fold", unroll=by == step) as i:
            fn(i)
    cascade.cascade(loop, lambda s, size, stop: umin(b, b.add(s, i64(size)), stop),
                    lo, hi, levels, body, fresh, combine, step)


def fold_levels(extent, leaf: int, per_step: int = 1) -> list[int]:
    """The cascade's block sizes for a fold over ``extent`` in steps of ``per_step``: for a
    run-time extent, enough levels for any uint32 one."""
    return block_sizes(extent // per_step if is_static(extent) else CASCADE_EXTENT, leaf, FAN_IN)


def store(em: ExprEmitter, pt: Point, results: tuple[Result, ...]) -> None:
    """Stores each of ``results`` at ``pt``, all values computed first."""
    values = [em.emit(r.value, pt) for r in results]
    for r, v in zip(results, values):
        em.store(r.binding, r.index[0], v, pt)


class _Point:
    """One output point of a reduction kernel: its phases folded over the reduction loops, then
    its row results."""

    def __init__(self, low: DynamicLowering, b: ir.IRBuilder, ptrs, sizes, em: ExprEmitter, ix):
        self.kernel, self.span, self.b, self.ptrs, self.sizes, self.em = \
            low.kernel, low.span, b, ptrs, sizes, em
        self.ix = ix
        self.zeros = [i64(0)] * len(self.kernel.reduction_ranges)
        self.bounds = [(i64(0), sizes(n)) for n in self.kernel.reduction_ranges]

    def emit(self) -> None:
        results, b, em = self.kernel.results, self.b, self.em
        finals: dict[int, ir.Value] = {}
        for phase in phases(results):
            accs = self._fold(phase, finals)
            pt = Point(self.ix + self.zeros, accs=accs, finals=finals)
            done = {k: em.emit(results[k].epilogue, pt) if results[k].epilogue is not None
                    else accs[k] for k in phase}
            for k, v in done.items():
                em.store(results[k].binding, results[k].index[0], v, pt)
            finals.update(done)
        rows = self.kernel.row_results
        if rows:
            nest(b, self.bounds, lambda rix: store(em, Point(self.ix + rix, finals=finals), rows))

    def _fold(self, phase: list[int], finals) -> dict:
        """The phase's final accumulators. A float fold of a run-time extent branches on it: up
        to ``SCALAR_LEAF`` steps, one plain loop (a cascade's levels and a vector fold's tree
        cost more than such a row); beyond, the cascaded fold, in vectors where loads allow."""
        results, b = self.kernel.results, self.b
        folds = float_folds(results, phase)
        lanes = self._lanes(folds)
        extent = self.kernel.reduction_ranges[-1]
        if folds is None or is_static(extent):
            return self._fold_vectors(folds, lanes, finals) if lanes \
                else self._fold_scalars(phase, folds, finals)
        slots = {k: entry_alloca(b, scalar_type(results[k].value.dtype)) for k in phase}
        short = b.icmp_signed("<=", self.bounds[-1][1], i64(SCALAR_LEAF))
        with b.if_else(short) as (plain, cascaded):
            for branch, fold in ((plain, lambda: self._fold_scalars(phase, None, finals)),
                                 (cascaded, lambda: self._fold_vectors(folds, lanes, finals) if lanes
                                  else self._fold_scalars(phase, folds, finals))):
                with branch:
                    for k, v in fold().items():
                        b.store(v, slots[k])
        return {k: b.load(slot, typ=scalar_type(results[k].value.dtype)) for k, slot in slots.items()}

    def _lanes(self, folds) -> int:
        """Lanes of a vector fold of ``folds``, or 0 where a load is not contiguous or broadcast
        by a static step along the innermost reduction loop (or that loop is statically short)."""
        if folds is None:
            return 0
        lanes = FOLD_BITS // max(bits(f.dtype) for _, f in folds.values())
        inner, extent = len(self.kernel.loop_ranges) - 1, self.kernel.reduction_ranges[-1]
        reads = [e for _, f in folds.values() for e in walk(f) if isinstance(e, (Load, Gather))]
        if (is_static(extent) and extent < lanes) or any(
                isinstance(e, Gather) or not is_static(e.index[0].coeffs[inner])
                or not 0 <= e.index[0].coeffs[inner] <= max(1, self.span) for e in reads):
            return 0
        return lanes

    def _fold_scalars(self, phase: list[int], folds, finals) -> dict:
        """The phase's accumulators, folded one reduction point after another; float folds
        cascaded along the innermost reduction loop."""
        results, b, em = self.kernel.results, self.b, self.em
        types = {k: scalar_type(results[k].value.dtype) for k in phase}
        sizes = fold_levels(self.kernel.reduction_ranges[-1], SCALAR_LEAF) if folds else []
        levels = [{k: entry_alloca(b, types[k]) for k in phase} for _ in range(len(sizes) + 1)]
        at_init = Point(self.ix + self.zeros, finals=finals)
        inits = {k: em.emit(results[k].init, at_init) for k in phase}
        for k in phase:
            b.store(inits[k], levels[-1][k])

        def step(rix):
            pt = Point(self.ix + rix, accs={k: b.load(levels[0][k], typ=types[k]) for k in phase},
                       finals=finals)
            values = {k: em.emit(results[k].value, pt, fast=True) for k in phase}
            for k in phase:
                b.store(values[k], levels[0][k])

        nest(b, self.bounds[:-1], lambda rix: run_time_cascade(
            b, i64(0), self.bounds[-1][1], sizes, lambda i: step(rix + [i]),
            lambda j: fresh_folds(b, em, folds, levels[j]),
            lambda j: combine_folds(b, em, folds, levels[j + 1], levels[j])))
        return {k: b.load(levels[-1][k], typ=types[k]) for k in phase}

    def _fold_vectors(self, folds: dict, lanes: int, finals) -> dict:
        """The phase's accumulators as lanes along the innermost reduction loop: whole vectors
        cascaded, then the lanes folded as a tree into a scalar fold of the init and the
        elements past the last whole vector."""
        results, b, em = self.kernel.results, self.b, self.em
        vec = ExprEmitter(b, self.ptrs, self.kernel, width=lanes, span=self.span, sizes=self.sizes)
        extent = self.bounds[-1][1]
        full = b.sub(extent, b.urem(extent, i64(lanes)))
        sizes = fold_levels(self.kernel.reduction_ranges[-1], LEAF, lanes)
        levels = [{k: entry_alloca(b, vec.ty(f.dtype)) for k, (_, f) in folds.items()}
                  for _ in range(len(sizes) + 1)]
        fresh_folds(b, vec, folds, levels[-1])
        rest = {k: entry_alloca(b, scalar_type(f.dtype)) for k, (_, f) in folds.items()}
        for k in folds:
            b.store(em.emit(results[k].init, Point(self.ix + self.zeros, finals=finals)), rest[k])

        def step(emitter: ExprEmitter, rix, level):
            pt = Point(self.ix + rix, lane_dim=len(self.kernel.loop_ranges) - 1, finals=finals,
                       accs={k: b.load(level[k], typ=emitter.ty(f.dtype)) for k, (_, f) in folds.items()})
            values = {k: emitter.emit(results[k].value, pt, fast=True) for k in folds}
            for k in folds:
                b.store(values[k], level[k])

        def row(rix):
            run_time_cascade(b, i64(0), full, sizes, lambda i: step(vec, rix + [i], levels[0]),
                          lambda j: fresh_folds(b, vec, folds, levels[j]),
                          lambda j: combine_folds(b, vec, folds, levels[j + 1], levels[j]), step=lanes)
            with for_range(b, full, extent, name="rest") as i:
                step(em, rix + [i], rest)

        nest(b, self.bounds[:-1], row)
        return {k: em.binary(op, b.load(rest[k], typ=scalar_type(f.dtype)),
                             tree_fold(b, vec, op, b.load(levels[-1][k], typ=vec.ty(f.dtype)), f.dtype),
                             f.dtype, fast=True)
                for k, (op, f) in folds.items()}
