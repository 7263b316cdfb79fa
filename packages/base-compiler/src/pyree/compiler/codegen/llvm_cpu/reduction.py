"""Kernels with reduction loops (other than the contractions that contraction.py takes).

Three loop orders, picked by which loop the loads are contiguous along:
- reduction-inner: per output point, accumulators in registers over the reduction loops; the
  innermost reduction loop vectorizes because its ops may be reassociated (row sums, matvec).
- parallel-inner: a block of outputs along the innermost parallel loop keeps one accumulator
  each in a small stack array; every reduction step sweeps the block, which vectorizes along
  the contiguous parallel loop (column sums, reductions over outer dims).
- window: a short reduction, or one whose window slides with the outputs (a depthwise
  convolution's or a pooling's kh x kw taps), whose result is contiguous along the innermost
  parallel loop and whose loads are contiguous, broadcast or (with AVX) strided by up to 4
  along it. A block of vectors of outputs along that loop, over up to ``WINDOW_ROWS`` rows of
  the loop before it, keeps its accumulators in registers while the taps run unrolled (up to
  ``WINDOW_TAPS``; the leading reduction loops of larger windows as loops), each one vector
  load (masked on the row's tail; a span load and a shuffle where strided) per operand; lanes
  are distinct outputs, so each one still accumulates in order and nothing is reassociated,
  and the block's separate accumulator chains keep the FMA units busy. Where the window's
  input expression computes more than a load (a fused padding's guard), ``window.py`` stages it
  per row of outputs on the stack first and the taps read it back with plain loads.
The epilogue is applied to the final accumulators before the store.

Long float folds keep their rounding error near numpy's pairwise sum (``codegen/common/cascade.py``):
in the reduction-inner order a float fold whose loads are contiguous (or broadcast) along the
innermost reduction loop runs as ``FOLD_BITS``-wide vectors of lanes, each lane a partial fold of
every lanes-th element, in blocks of ``LEAF`` vector steps cascaded by ``FAN_IN``; the lanes are
then folded as a tree into a scalar fold of the init and the elements past the last whole
vector. Other float folds cascade their scalar accumulators in blocks of ``SCALAR_LEAF`` steps
(LLVM vectorizes inside a block), and parallel-inner blocks their accumulator arrays every
``COLUMN_LEAF`` reduction steps.

A row kernel (``kernel.phases``; softmax, layernorm) runs reduction-inner: per output point, each
phase folds over the row in turn (its Finals are the earlier phases' stored values, in
registers), then one more sweep stores the row results; the row is re-read from cache. Where its
loads run along the outputs instead (a softmax over the first axis) it runs parallel-inner: each
phase sweeps the block's accumulator arrays, its finished values kept in an array per result for
the later phases and the row results (one element a column a row was 12x slower).
"""

from __future__ import annotations

import itertools
import math

from llvmlite import ir
from pyree.compiler.codegen.common import cascade
from pyree.compiler.codegen.common.cascade import block_sizes
from pyree.compiler.codegen.common.normalize import loads
from pyree.compiler.codegen.llvm_cpu import window
from pyree.compiler.codegen.llvm_cpu.loops import (
    cascaded,
    entry_alloca,
    for_range,
    i64,
    nest,
    umin,
)
from pyree.compiler.codegen.llvm_cpu.scalar import (
    I32,
    ExprEmitter,
    Point,
    bits,
    row_lanes,
    scalar_type,
    span_stride,
    sweep_blocks,
)
from pyree.compiler.codegen.llvm_cpu.tiling import choose_tiling
from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import (
    Gather,
    Kernel,
    Load,
    Result,
    contiguous_along_parallel,
    fold_identity,
    is_row_kernel,
    phases,
    walk,
)
from pyree.compiler.sizes import is_static

BLOCK = 256  # outputs per parallel-inner block
WINDOW_TAPS = 32        # reduction points a window kernel unrolls
WINDOW_BLOCK = 8        # vectors of outputs along a row a window kernel folds at once
WINDOW_CHAINS = 8       # and with the next rows, at least this many (each its accumulator chain)
WINDOW_ROWS = 4         # rows at most
WINDOW_ROW = 64         # taps of its innermost reduction loop a window kernel unrolls at most
# Cascaded float folds (codegen/common/cascade.py): each lane or accumulator takes about this many terms
# per level, as numpy's pairwise sum takes 16 per accumulator in its blocks of 128.
FOLD_BITS = 512         # lanes of a vector fold: one AVX-512 register, two AVX2, four SSE
LEAF = 16               # vector steps per innermost block
FAN_IN = 16             # blocks per block of the next level
SCALAR_LEAF = 32        # scalar steps per innermost block (LLVM may vectorize inside it)
COLUMN_LEAF = 32        # reduction steps per block of a parallel-inner accumulator array
CASCADED = {"f32", "f64"}


def plan(kernel: Kernel, target) -> ReductionLowering | None:
    """The lowering of any kernel with a reduction range."""
    return (ReductionLowering(kernel, span_stride(target), strict=not target.reassociate,
                              vector_bits=target.vector_bits)
            if kernel.reduction_ranges else None)


def check_inits(kernel: Kernel) -> None:
    for k, r in enumerate(kernel.reductions):
        if r.init is None:
            raise CompileError(f"result {k} of reduction kernel '{kernel.name}' has no init")


class ReductionLowering:
    """The orders above over compile-time extents. ``dynamic.py`` runs them over run-time ones
    by overriding the extent methods (``_extent``, ``_levels``, ``_cascade``, ``_whole``,
    ``_red_bounds``) and giving its emitters the run-time sizes (``self.sizes``)."""

    sizes = None  # no run-time sizes (scalar.ExprEmitter)

    def __init__(self, kernel: Kernel, span: int = 1, strict: bool = False, vector_bits: int = 512):
        """``span``: the longest lane step loaded as a span (scalar.span_stride). ``strict``
        (--iree-llvmcpu-reassociate-fp-reductions=false): every fold runs one reduction point
        after another in loop order -- no vector lanes, no cascade, no reassociation flags.
        ``vector_bits``: the target's (scalar.row_lanes)."""
        self.kernel, self.span, self.strict = kernel, span, strict
        self.fast = not strict
        self.ptrs: list[ir.Value] = []
        check_inits(kernel)
        rows = is_row_kernel(kernel.results)
        self.lanes = 0 if rows else _window_lanes(kernel, span, vector_bits)
        self.parallel_inner = contiguous_along_parallel(kernel)
        work = math.prod(kernel.reduction_ranges) * (len(loads(kernel)) + 1)
        self.tiling = choose_tiling(kernel.parallel_ranges, work)
        self.block = min(WINDOW_BLOCK, -(-self.tiling.tile[-1] // self.lanes)) if self.lanes else 0
        self.rows = min(WINDOW_ROWS, -(-WINDOW_CHAINS // self.block), self.tiling.tile[-2]) \
            if self.lanes and kernel.num_parallel > 1 else 1
        self.staging = window.plan(kernel, self.lanes, self.block, self.tiling, span)

    @property
    def workgroup_count(self) -> int:
        return self.tiling.count

    def emit(self, b: ir.IRBuilder, ptrs: list[ir.Value], wg: ir.Value) -> None:
        self.ptrs = ptrs
        em = ExprEmitter(b, ptrs, self.kernel)
        bounds = self.tiling.emit_bounds(b, wg)
        if self.lanes:
            vec = ExprEmitter(b, ptrs, self.kernel, width=self.lanes, span=self.span)
            if self.rows == 1:
                nest(b, bounds[:-1], lambda ix: self._window_rows(vec, [ix], *bounds[-1]))
            else:
                nest(b, bounds[:-2], lambda ix: self._window_row_blocks(vec, ix, bounds[-2], bounds[-1]))
        elif self.parallel_inner:
            nest(b, bounds[:-1], lambda ix: self._column_blocks(b, em, ix, bounds[-1]))
        else:
            nest(b, bounds, lambda ix: self._point(b, em, ix))

    # ---- extents: compile-time ints here ----

    def _red_bounds(self):
        return [(i64(0), i64(n)) for n in self.kernel.reduction_ranges]

    def _extent(self, d: int):
        """Reduction loop d's extent."""
        return self.kernel.reduction_ranges[d]

    def _levels(self, d: int, leaf: int, per_step: int = 1) -> list[int]:
        """Cascade block sizes for a fold over reduction loop d in steps of ``per_step``."""
        return block_sizes(self.kernel.reduction_ranges[d] // per_step, leaf, FAN_IN)

    def _cascade(self, b, stop, sizes: list[int], body, fresh, combine, step: int = 1) -> None:
        """``body(i)`` for i in [0, stop) by ``step``, cascaded (``loops.cascaded``)."""
        cascaded(b, 0, stop, sizes, body, fresh, combine, step=step)

    def _whole(self, b, extent, lanes: int):
        """The part of ``extent`` that whole vectors of ``lanes`` cover."""
        return extent - extent % lanes

    def _zeros(self):
        return [i64(0)] * len(self.kernel.reduction_ranges)

    def _point(self, b, em: ExprEmitter, ix: list[ir.Value]) -> None:
        results = self.kernel.results
        finals: dict[int, ir.Value] = {}
        for phase in phases(results):
            accs = self._fold(b, em, ix, phase, finals)
            finals.update(self._finish(b, em, Point(ix + self._zeros(), accs=accs, finals=finals),
                                       phase))
        rows = [r for r in results if r.row]
        if rows:
            self._rows(b, em, ix, rows, finals)

    def _rows(self, b, em: ExprEmitter, ix: list[ir.Value], rows: list[Result], finals) -> None:
        """A row kernel's per-element results, once its folds are final."""
        def row(rix):
            pt = Point(ix + rix, finals=finals)
            for r, v in zip(rows, [em.emit(r.value, pt) for r in rows]):
                em.store(r.binding, r.index[0], v, pt)
        nest(b, self._red_bounds(), row)

    def _fold(self, b, em: ExprEmitter, ix, phase: list[int], finals) -> dict:
        """The phase's final accumulators."""
        folds = None if self.strict else float_folds(self.kernel.results, phase)
        if folds is not None and self._vector_lanes(folds):
            return self._fold_vectors(b, em, ix, folds, finals)
        return self._fold_scalars(b, em, ix, phase, folds, finals)

    def _fold_scalars(self, b, em: ExprEmitter, ix, phase: list[int], folds, finals) -> dict:
        """The phase's accumulators, folded one reduction point after another; float folds in
        cascaded blocks along the innermost reduction loop."""
        results = self.kernel.results
        types = {k: scalar_type(results[k].value.dtype) for k in phase}
        sizes = self._levels(-1, SCALAR_LEAF) if folds else []
        levels = [{k: entry_alloca(b, types[k]) for k in phase} for _ in range(len(sizes) + 1)]
        at_init = Point(ix + self._zeros(), finals=finals)
        inits = {k: em.emit(results[k].init, at_init) for k in phase}
        for k in phase:
            b.store(inits[k], levels[-1][k])

        def step(rix):
            pt = Point(ix + rix, accs={k: b.load(levels[0][k], typ=types[k]) for k in phase},
                       finals=finals)
            values = {k: em.emit(results[k].value, pt, fast=self.fast) for k in phase}
            for k in phase:
                b.store(values[k], levels[0][k])

        nest(b, self._red_bounds()[:-1], lambda rix: self._cascade(
            b, self._extent(-1), sizes, lambda i: step(rix + [i]),
            lambda j: fresh_folds(b, em, folds, levels[j]),
            lambda j: combine_folds(b, em, folds, levels[j + 1], levels[j])))
        return {k: b.load(levels[-1][k], typ=types[k]) for k in phase}

    def _vector_lanes(self, folds: dict) -> int:
        """Lanes of the vector fold for ``folds`` (a phase of float folds), or 0 where its loads
        are not contiguous or broadcast along the innermost reduction loop, or that loop is
        shorter than one vector."""
        lanes = FOLD_BITS // max(bits(f.dtype) for _, f in folds.values())
        inner, extent = len(self.kernel.loop_ranges) - 1, self.kernel.reduction_ranges[-1]
        reads = [e for _, f in folds.values() for e in walk(f) if isinstance(e, (Load, Gather))]
        if (is_static(extent) and extent < lanes) or any(
                isinstance(e, Gather) or not is_static(e.index[0].coeffs[inner])
                or not 0 <= e.index[0].coeffs[inner] <= max(1, self.span) for e in reads):
            return 0
        return lanes

    def _fold_vectors(self, b, em: ExprEmitter, ix, folds: dict, finals) -> dict:
        """The phase's accumulators, as lanes along the innermost reduction loop: full vectors
        cascaded, then the lanes folded as a tree into a scalar fold of the init and the
        elements past the last full vector."""
        results = self.kernel.results
        lanes = self._vector_lanes(folds)
        vec = ExprEmitter(b, self.ptrs, self.kernel, width=lanes, span=self.span, sizes=self.sizes)
        inner = self._extent(-1)
        full = self._whole(b, inner, lanes)
        sizes = self._levels(-1, LEAF, lanes)
        levels = [{k: entry_alloca(b, vec.ty(f.dtype)) for k, (_, f) in folds.items()}
                  for _ in range(len(sizes) + 1)]
        fresh_folds(b, vec, folds, levels[-1])
        rest = {k: entry_alloca(b, scalar_type(f.dtype)) for k, (_, f) in folds.items()}
        for k in folds:
            b.store(em.emit(results[k].init, Point(ix + self._zeros(), finals=finals)), rest[k])

        def step(emitter: ExprEmitter, rix, level):
            pt = Point(ix + rix, lane_dim=len(self.kernel.loop_ranges) - 1, finals=finals,
                       accs={k: b.load(level[k], typ=emitter.ty(f.dtype)) for k, (_, f) in folds.items()})
            values = {k: emitter.emit(results[k].value, pt, fast=self.fast) for k in folds}
            for k in folds:
                b.store(values[k], level[k])

        def row(rix):
            self._cascade(b, full, sizes, lambda i: step(vec, rix + [i], levels[0]),
                          lambda j: fresh_folds(b, vec, folds, levels[j]),
                          lambda j: combine_folds(b, vec, folds, levels[j + 1], levels[j]), step=lanes)
            with for_range(b, as_value(full), as_value(inner), name="rest") as i:
                step(em, rix + [i], rest)

        nest(b, self._red_bounds()[:-1], row)
        return {k: em.binary(op, b.load(rest[k], typ=scalar_type(f.dtype)),
                             tree_fold(b, vec, op, b.load(levels[-1][k], typ=vec.ty(f.dtype)), f.dtype),
                             f.dtype, fast=self.fast)
                for k, (op, f) in folds.items()}

    def _column_blocks(self, b, em: ExprEmitter, ix: list[ir.Value], inner) -> None:
        """Float folds cascade their accumulator arrays along the outermost reduction loop. A row
        kernel folds its phases in turn (``_column_phase``), each column's finished values kept
        in an array for the later phases and for its row results, written by a last sweep."""
        results = self.kernel.results
        lo, hi = inner
        steps = phases(results)
        keep = [k for phase in steps[:-1] for k in phase] + [
            k for k in steps[-1] if any(r.row for r in results)]
        finished = [scalar_type((r.epilogue or r.value).dtype) for r in results]  # after epilogues
        kept = {k: entry_alloca(b, finished[k], BLOCK) for k in keep}
        with for_range(b, lo, hi, step=BLOCK, name="block") as start:
            stop = umin(b, b.add(start, i64(BLOCK)), hi)

            def finals(c) -> dict[int, ir.Value]:
                at = b.sub(c, start)
                return {k: b.load(b.gep(a, [at], source_etype=finished[k]), typ=finished[k])
                        for k, a in kept.items()}

            for phase in steps:
                self._column_phase(b, em, ix, start, stop, phase, finals, kept)
            rows = [r for r in results if r.row]
            if rows:
                def row(rix):
                    with for_range(b, start, stop, name="c") as c:
                        pt = Point(ix + [c] + rix, finals=finals(c))
                        for r, v in zip(rows, [em.emit(r.value, pt) for r in rows]):
                            em.store(r.binding, r.index[0], v, pt)
                nest(b, self._red_bounds(), row)

    def _column_phase(self, b, em: ExprEmitter, ix, start, stop, phase: list[int], finals,
                      kept: dict) -> None:
        """The folds ``phase`` of the columns [start, stop): accumulator arrays swept once per
        reduction step, then finished (stored, and kept in ``kept`` for later phases)."""
        results = self.kernel.results
        types = [scalar_type(results[k].value.dtype) for k in phase]
        folds = None if self.strict else float_folds(results, phase)
        sizes = self._levels(0, COLUMN_LEAF) if folds else []
        levels = [[entry_alloca(b, t, BLOCK) for t in types] for _ in range(len(sizes) + 1)]
        top = len(sizes)
        done = bool(kept) and any(k not in phase for k in kept)  # an earlier phase's values

        def sweep(rest: list[ir.Value], update) -> None:
            """``update(point, slots)``, ``slots(level)`` being the column's accumulators."""
            with for_range(b, start, stop, name="c") as c:
                at = b.sub(c, start)
                update(Point(ix + [c] + rest, finals=finals(c) if done else None), lambda level: [
                    b.gep(a, [at], source_etype=t) for a, t in zip(levels[level], types)])

        def init(pt, slots):
            for v, s in zip([em.emit(results[k].init, pt) for k in phase], slots(top)):
                b.store(v, s)

        def step(pt, slots):
            pt.accs = dict(zip(phase, [b.load(s, typ=t) for s, t in zip(slots(0), types)]))
            for v, s in zip([em.emit(results[k].value, pt, fast=self.fast) for k in phase], slots(0)):
                b.store(v, s)

        def finish(pt, slots):
            pt.accs = dict(zip(phase, [b.load(s, typ=t) for s, t in zip(slots(top), types)]))
            out = self._finish(b, em, pt, phase)
            at = b.sub(pt.indices[len(ix)], start)
            for k in phase:
                if k in kept:
                    b.store(out[k], b.gep(kept[k], [at], source_etype=out[k].type))

        folds_of = {i: folds[k] for i, k in enumerate(phase) if k in folds} if folds else None
        sweep(self._zeros(), init)
        rest = self._red_bounds()[1:]
        self._cascade(b, self._extent(0), sizes,
                      lambda r: nest(b, rest, lambda rix: sweep([r] + rix, step)),
                      lambda j: sweep(self._zeros(), lambda pt, slots: fresh_folds(
                          b, em, folds_of, dict(enumerate(slots(j))))),
                      lambda j: sweep(self._zeros(), lambda pt, slots: combine_folds(
                          b, em, folds_of, dict(enumerate(slots(j + 1))), dict(enumerate(slots(j))))))
        sweep(self._zeros(), finish)

    def _window_row_blocks(self, vec: ExprEmitter, ix: list[ir.Value], rows, lanes) -> None:
        """The rows [lo, hi) of the loop before the lanes' ``self.rows`` at a time, then one at
        a time."""
        b, (lo, hi) = vec.b, rows
        length = b.sub(hi, lo)
        whole_end = b.add(lo, b.sub(length, b.urem(length, i64(self.rows))))
        with for_range(b, lo, whole_end, step=self.rows, name="rows") as row:
            self._window_rows(vec, [ix + [row if i == 0 else b.add(row, i64(i))]
                                    for i in range(self.rows)], *lanes)
        with for_range(b, whole_end, hi, name="row") as row:
            self._window_rows(vec, [ix + [row]], *lanes)

    def _window_rows(self, vec: ExprEmitter, ixs: list[list[ir.Value]], lo, hi) -> None:
        """The outputs ``ix`` + [lo, hi) of the lanes' loop for each ``ix`` of ``ixs``, their
        windows staged first where ``window.py`` stages them."""
        reads = [self.staging.fill(self.kernel, vec, ix, lo, hi) for ix in ixs] if self.staging \
            else None
        sweep_blocks(vec.b, vec, lo, hi, self.block,
                     lambda start, masks: self._window_block(vec, ixs, start, masks, reads))

    def _window_block(self, vec: ExprEmitter, ixs: list[list[ir.Value]], start, masks, reads) -> None:
        """For each row of ``ixs``, ``len(masks)`` vectors of outputs from ``start`` on: each
        vector with its accumulators (so their taps' operations overlap instead of waiting on
        one chain) and its mask (None where whole); ``reads``: the rows' staged windows
        (``Staging.fill``) or None. Taps past ``WINDOW_TAPS`` run as loops over the leading
        reduction loops."""
        b, results = vec.b, self.kernel.results
        lane = self.kernel.num_parallel - 1
        ranges = self.kernel.reduction_ranges
        looped = _looped_taps(ranges)
        starts = [start] + [b.add(start, i64(i * vec.width)) for i in range(1, len(masks))]
        chains = list(itertools.product(range(len(ixs)), range(len(masks))))  # (row, vector)

        def at(c: int, taps: list[ir.Value], accs=None) -> Point:
            row, v = chains[c]
            return Point(ixs[row] + [starts[v]] + taps, lane_dim=lane, mask=masks[v], accs=accs)

        def known(c: int, tap: list[ir.Value]):
            row, v = chains[c]
            return reads[row](starts[v], tap) if reads else None

        def unrolled(outer: list[ir.Value], accs: list[list[ir.Value]]) -> list[list[ir.Value]]:
            for taps in itertools.product(*[range(n) for n in ranges[looped:]]):
                tap = outer + [i64(t) for t in taps]
                accs = [[vec.emit(r.value, at(c, tap, accs[c]), fast=self.fast, known=known(c, tap))
                         for r in results] for c in range(len(chains))]
            return accs

        zeros = [i64(0)] * len(ranges)
        accs = [[vec.emit(r.init, at(c, zeros)) for r in results] for c in range(len(chains))]
        if looped:
            slots = [[entry_alloca(b, a.type) for a in row] for row in accs]
            for slot, a in zip(itertools.chain(*slots), itertools.chain(*accs)):
                b.store(a, slot)

            def load():
                return [[b.load(slot, typ=a.type)
                         for slot, a in zip(row_slots, row)] for row_slots, row in zip(slots, accs)]

            def step(outer: list[ir.Value]) -> None:
                for slot, a in zip(itertools.chain(*slots), itertools.chain(*unrolled(outer, load()))):
                    b.store(a, slot)

            nest(b, [(i64(0), i64(n)) for n in ranges[:looped]], step)
            accs = load()
        else:
            accs = unrolled([], accs)
        for c in range(len(chains)):
            self._finish(b, vec, at(c, zeros, accs[c]))

    def _finish(self, b, em: ExprEmitter, pt: Point, which=None) -> dict[int, ir.Value]:
        """Stores results ``which`` (all) from their epilogues; returns the stored values."""
        results = self.kernel.results
        which = range(len(results)) if which is None else which
        out = {k: em.emit(results[k].epilogue, pt) if results[k].epilogue is not None
               else pt.accs[k] for k in which}
        for k, v in out.items():
            em.store(results[k].binding, results[k].index[0], v, pt)
        return out


def _looped_taps(ranges) -> int:
    """How many leading reduction loops the window order runs as loops (the rest unrolled): the
    fewest that leave at most ``WINDOW_TAPS`` taps unrolled, the innermost loop always unrolled
    up to ``WINDOW_ROW`` taps (a loop step of one tap pays its loop overhead per tap)."""
    looped = 0
    while math.prod(ranges[looped:]) > WINDOW_TAPS and (
            looped < len(ranges) - 1 or ranges[-1] > WINDOW_ROW):
        looped += 1
    return looped


def _window_lanes(kernel: Kernel, span: int, vector_bits: int) -> int:
    """Vector width for the window order, or 0 where it does not apply: a load stepping further
    than ``span`` elements per output would be a gather, slower than the other orders on
    stride-2 depthwise convolutions. More than ``WINDOW_TAPS`` taps take the window order only
    where the window slides with the outputs' lanes (a load whose positions for neighbouring
    taps overlap along the lane loop's: ``cp * ow + cr * kw`` with ``|cr| < |cp| * OW``); other
    long folds along the lanes (a column sum, a vector-matrix product's ``w[k * N + n]``) are
    parallel-inner's, which keeps their rounding error down."""
    if kernel.num_parallel == 0:
        return 0
    p = kernel.num_parallel - 1
    value_loads = {e for r in kernel.results for e in walk(r.value) if isinstance(e, Load)}
    if math.prod(kernel.reduction_ranges) > WINDOW_TAPS and not any(
            0 < abs(ld.index[0].coeffs[r]) < abs(ld.index[0].coeffs[p]) * kernel.loop_ranges[p]
            for ld in value_loads for r in range(kernel.num_parallel, len(kernel.loop_ranges))):
        return 0
    if (any(r.index[0].coeffs[p] != 1 for r in kernel.results)
            or any(abs(ld.index[0].coeffs[p]) > max(1, span) for ld in value_loads)):
        return 0
    return row_lanes(kernel, vector_bits)


def as_value(extent) -> ir.Value:
    """An extent as an i64 value (a compile-time int as a constant)."""
    return i64(extent) if isinstance(extent, int) else extent


def float_folds(results: tuple[Result, ...], which) -> dict[int, tuple[str, object]] | None:
    """``cascade.float_folds`` whose accumulators are f32 or f64 (bf16 rounds every step)."""
    folds = cascade.float_folds(results, which)
    return folds if folds and all(f.dtype in CASCADED for _, f in folds.values()) else None


def fresh_folds(b, em: ExprEmitter, folds, slots) -> None:
    for k, (op, f) in folds.items():
        b.store(em.const(fold_identity(op, f.dtype), f.dtype), slots[k])


def combine_folds(b, em: ExprEmitter, folds, into, slots) -> None:
    """``into[k] = into[k] <op> slots[k]`` for each fold."""
    for k, (op, f) in folds.items():
        t = em.ty(f.dtype)
        b.store(em.binary(op, b.load(into[k], typ=t), b.load(slots[k], typ=t), f.dtype, fast=True),
                into[k])


def tree_fold(b, vec: ExprEmitter, op: str, v: ir.Value, dtype: str) -> ir.Value:
    """The lanes of ``v`` folded pairwise into one scalar."""
    lanes = vec.width
    while lanes > 1:
        half = lanes // 2
        low, high = (ir.Constant(ir.VectorType(I32, half), list(range(at, at + half)))
                     for at in (0, half))
        v = vec.binary(op, b.shuffle_vector(v, v, low), b.shuffle_vector(v, v, high), dtype,
                       fast=True)
        lanes = half
    return b.extract_element(v, ir.Constant(I32, 0))
