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
most ``SCALAR_LEAF`` terms branches to one plain loop. Contractions go to ``matmul.py``'s
micro-kernel, which takes run-time extents; not here yet: the window order.
"""

from __future__ import annotations

from llvmlite import ir
from pyree.compiler.codegen.common.cascade import block_sizes
from pyree.compiler.codegen.common.normalize import loads
from pyree.compiler.codegen.llvm_cpu import matmul
from pyree.compiler.codegen.llvm_cpu.loops import cascaded_run_time, entry_alloca, i64, nest, umin
from pyree.compiler.codegen.llvm_cpu.matmul import ContractionLowering
from pyree.compiler.codegen.llvm_cpu.reduction import (
    FAN_IN,
    SCALAR_LEAF,
    ReductionLowering,
    check_inits,
    float_folds,
    fresh_folds,
    tree_fold,
)
from pyree.compiler.codegen.llvm_cpu.scalar import (
    ExprEmitter,
    Point,
    bits,
    scalar_type,
    span_stride,
    sweep_vectors,
)
from pyree.compiler.codegen.llvm_cpu.tiling import MAX_GROUPS, MIN_WORK_PER_GROUP
from pyree.compiler.codegen.llvm_cpu.transpose import emit_transposed, plan_transpose
from pyree.compiler.kernel import (
    Binary,
    Gather,
    Kernel,
    Load,
    Result,
    contiguous_along_parallel,
    has_run_time_sizes,
    is_float,
    is_row_kernel,
    walk,
)
from pyree.compiler.sizes import align_up, is_static, num_elements, opaque

ALIGN = 64                 # elements: a tile of the innermost loop is a whole number of vectors
CASCADE_EXTENT = 1 << 32   # a run-time fold's cascade has levels for this many steps
# Bits of the masked vectors of a short fold and of a row's elements (``_fold_short``, ``_rows``):
# half of FOLD_BITS, since most of a short row's last vector is masked off (softmax over 7
# classes ran 2.0x its static kernel in 256-bit vectors, 2.8x in 512-bit ones).
SHORT_BITS = 256


def plan(kernel: Kernel, target) -> DynamicLowering | ContractionLowering | None:
    """The lowering of a kernel with run-time sizes: a contraction's micro-kernel with run-time
    extents (``matmul.py``), else this template's loops; None for a static kernel."""
    if not has_run_time_sizes(kernel):
        return None
    return matmul.plan(kernel, target) or DynamicLowering(kernel, span_stride(target),
                                                          strict=not target.reassociate,
                                                          vector_bits=target.vector_bits)


def tiles(kernel: Kernel, align: int = 1) -> tuple:
    """(tile, workgroup count): sizes or ints; the tile of the outermost parallel loop, a
    multiple of ``align`` (a transposed kernel's strips, when that loop is theirs)."""
    if kernel.num_parallel == 0:
        return 1, 1
    extent = kernel.parallel_ranges[0]
    per_point = num_elements(kernel.loop_ranges[1:]) * max(1, len(loads(kernel)) + len(kernel.results))
    tile = opaque("max", opaque("ceildiv", extent, MAX_GROUPS),
                  opaque("ceildiv", MIN_WORK_PER_GROUP, opaque("max", per_point, 1)))
    if len(kernel.loop_ranges) == 1:
        tile = align_up(tile, ALIGN)
    elif align > 1:
        tile = align_up(tile, align)
    return tile, opaque("ceildiv", extent, tile)


class DynamicLowering(ReductionLowering):
    """``ReductionLowering``'s parallel-inner and reduction-inner orders with run-time extents,
    and elementwise kernels as one loop nest."""

    def __init__(self, kernel: Kernel, span: int = 1, strict: bool = False, vector_bits: int = 128):
        """``span``: the longest lane step loaded as a span (scalar.span_stride); ``strict``:
        float folds in loop order (``ReductionLowering``); ``vector_bits``: the target's, for the
        blocks of a transposed load (transpose.py)."""
        if kernel.reduction_ranges:
            check_inits(kernel)
        self.kernel, self.span, self.ptrs, self.lanes = kernel, span, [], 0
        self.strict, self.fast = strict, not strict
        self.parallel_inner = bool(kernel.reduction_ranges) and not is_row_kernel(kernel.results) \
            and contiguous_along_parallel(kernel)
        self.transposed = plan_transpose(kernel, vector_bits, span)
        strips = self.transposed.rows if self.transposed and self.transposed.q == 0 else 1
        self.tile, self.count = tiles(kernel, strips)

    @property
    def workgroup_count(self):
        return self.count

    def emit(self, b: ir.IRBuilder, ptrs: list[ir.Value], wg: ir.Value, sizes) -> None:
        """One workgroup; ``sizes``: the body's ``size_values.SizeValues``."""
        self.ptrs, self.sizes = ptrs, sizes
        kernel = self.kernel
        em = ExprEmitter(b, ptrs, kernel, sizes=sizes)
        bounds = [(i64(0), sizes(n)) for n in kernel.parallel_ranges]
        if bounds:
            lo = b.mul(wg, sizes(self.tile))
            bounds[0] = (lo, umin(b, b.add(lo, sizes(self.tile)), bounds[0][1]))
        if self.transposed:
            vec = ExprEmitter(b, ptrs, kernel, width=self.transposed.lanes, span=self.span, sizes=sizes)
            emit_transposed(b, self.transposed, vec, em, bounds)
        elif not kernel.reduction_ranges:
            nest(b, bounds, lambda ix: store(em, Point(ix), kernel.results))
        elif self.parallel_inner:
            nest(b, bounds[:-1], lambda ix: self._column_blocks(b, em, ix, bounds[-1]))
        else:
            nest(b, bounds, lambda ix: self._point(b, em, ix))

    def _fold(self, b, em: ExprEmitter, ix, phase: list[int], finals) -> dict:
        """A float fold of a run-time extent branches on it: up to ``SCALAR_LEAF`` steps, no
        cascade (its levels cost more than such a row): masked vectors where loads allow
        (``_fold_short``), else one plain loop; beyond, the cascaded fold, in vectors where
        loads allow."""
        results = self.kernel.results
        folds = float_folds(results, phase)
        if self.strict or folds is None or is_static(self.kernel.reduction_ranges[-1]):
            return super()._fold(b, em, ix, phase, finals)
        types = {k: scalar_type(results[k].value.dtype) for k in phase}
        slots = {k: entry_alloca(b, types[k]) for k in phase}
        with b.if_else(b.icmp_signed("<=", self._extent(-1), i64(SCALAR_LEAF))) as (plain, cascaded):
            short = (lambda: self._fold_short(b, em, ix, folds, finals)) if self._vector_lanes(folds) \
                else (lambda: self._fold_scalars(b, em, ix, phase, None, finals))
            for branch, fold in ((plain, short),
                                 (cascaded, lambda: super(DynamicLowering, self)._fold(
                                     b, em, ix, phase, finals))):
                with branch:
                    for k, v in fold().items():
                        b.store(v, slots[k])
        return {k: b.load(slot, typ=types[k]) for k, slot in slots.items()}

    def _fold_short(self, b, em: ExprEmitter, ix, folds: dict, finals) -> dict:
        """A short row's float folds in vectors along the innermost reduction loop, the last
        one masked (its off lanes keep their accumulators), then the lanes folded as a tree
        into the init: a plain loop of unknown trip count stays scalar (LLVM's vector body needs
        a whole vector of steps), where the static kernel unrolls the row and vectorizes it."""
        results = self.kernel.results
        lanes = SHORT_BITS // max(bits(f.dtype) for _, f in folds.values())
        vec = ExprEmitter(b, self.ptrs, self.kernel, width=lanes, span=self.span, sizes=self.sizes)
        types = {k: vec.ty(f.dtype) for k, (_, f) in folds.items()}
        accs = {k: entry_alloca(b, t) for k, t in types.items()}
        inner = len(self.kernel.loop_ranges) - 1
        fresh_folds(b, vec, folds, accs)

        def row(rix):
            def body(start, mask):
                old = {k: b.load(accs[k], typ=types[k]) for k in folds}
                pt = Point(ix + rix + [start], lane_dim=inner, mask=mask, finals=finals, accs=old)
                new = {k: vec.emit(results[k].value, pt, fast=self.fast) for k in folds}
                for k, v in new.items():
                    b.store(v if mask is None else b.select(mask, v, old[k]), accs[k])
            sweep_vectors(b, vec, i64(0), self._extent(-1), body)
        nest(b, self._red_bounds()[:-1], row)
        at_init = Point(ix + self._zeros(), finals=finals)
        return {k: em.binary(op, em.emit(results[k].init, at_init),
                             tree_fold(b, vec, op, b.load(accs[k], typ=types[k]), f.dtype),
                             f.dtype, fast=self.fast)
                for k, (op, f) in folds.items()}

    def _rows(self, b, em: ExprEmitter, ix, rows: list[Result], finals) -> None:
        """A row of run-time length in explicit vectors, the last one masked: LLVM vectorizes a
        loop of unknown trip count with a scalar remainder, so a short row (softmax over 7
        classes) ran entirely in that remainder, where the static kernel, its 7 steps known,
        runs them straight and vectorized. Rows whose reads or writes are not contiguous or
        broadcast along the innermost reduction loop, or that divide integers (a masked-off
        lane could divide by zero), keep the scalar loop."""
        lanes = _row_lanes(self.kernel, rows)
        if not lanes:
            return super()._rows(b, em, ix, rows, finals)
        vec = ExprEmitter(b, self.ptrs, self.kernel, width=lanes, span=self.span, sizes=self.sizes)
        inner = len(self.kernel.loop_ranges) - 1

        def sweep(rix):
            def body(start, mask):
                pt = Point(ix + rix + [start], lane_dim=inner, mask=mask, finals=finals)
                for r, v in zip(rows, [vec.emit(r.value, pt) for r in rows]):
                    vec.store(r.binding, r.index[0], v, pt)
            sweep_vectors(b, vec, i64(0), self._extent(-1), body)
        nest(b, self._red_bounds()[:-1], sweep)

    # ---- run-time extents (ReductionLowering's compile-time ones) ----

    def _red_bounds(self):
        return [(i64(0), self.sizes(n)) for n in self.kernel.reduction_ranges]

    def _extent(self, d: int):
        return self.sizes(self.kernel.reduction_ranges[d])

    def _levels(self, d: int, leaf: int, per_step: int = 1) -> list[int]:
        """Levels for the extent where it is static, else for any uint32 extent."""
        extent = self.kernel.reduction_ranges[d]
        return block_sizes(extent // per_step if is_static(extent) else CASCADE_EXTENT, leaf, FAN_IN)

    def _cascade(self, b, stop, sizes: list[int], body, fresh, combine, step: int = 1) -> None:
        """``loops.cascaded_run_time``, its leaves one loop each (a row's body can be large)."""
        cascaded_run_time(b, stop, sizes, body, fresh, combine, step, whole_leaves=False)

    def _whole(self, b, extent, lanes: int):
        return b.sub(extent, b.urem(extent, i64(lanes)))


def _row_lanes(kernel: Kernel, rows: list[Result]) -> int:
    """Lanes of ``DynamicLowering._rows``' vectors for ``rows``, or 0 where they do not apply."""
    inner = len(kernel.loop_ranges) - 1
    nodes = [e for r in rows for e in walk(r.value)]
    reads = [e.index[0].coeffs[inner] for e in nodes if isinstance(e, Load)]
    writes = [r.index[0].coeffs[inner] for r in rows]
    if any(isinstance(e, Gather) or (isinstance(e, Binary) and e.op in ("div", "rem")
                                     and not is_float(e.dtype)) for e in nodes) \
            or not all(is_static(c) and c in (0, 1) for c in reads) \
            or not all(is_static(c) and c == 1 for c in writes):
        return 0
    return SHORT_BITS // max(bits(r.value.dtype) for r in rows)


def store(em: ExprEmitter, pt: Point, results: tuple[Result, ...]) -> None:
    """Stores each of ``results`` at ``pt``, all values computed first."""
    values = [em.emit(r.value, pt) for r in results]
    for r, v in zip(results, values):
        em.store(r.binding, r.index[0], v, pt)
