"""Contractions (``acc + x * y`` over one reduction loop): a register-blocked micro-kernel.

Matched on normalized kernels whose last two parallel loops are m (rows) and n (the contiguous
output loop), with ``x`` independent of n and ``y`` independent of m: matmul, batch matmul, any
operand layout, casts inside ``x``/``y`` (f16 or i8 inputs), and any init/epilogue (bias, relu).

Per workgroup tile (batch, TM rows, TN cols), for each panel of NR = NV vectors of columns:
a ``y`` that is transposed, converted or has far-apart rows is packed into zero-padded K x NR
stack buffers, the tile's panels together (a plain row-major one is read in place), then for
each block of MR rows the MR x NV accumulator vectors stay in registers for the whole K loop:
per k, NV vector loads of the panel, MR scalar loads of ``x`` broadcast, MR*NV fused
multiply-adds. An ``x`` that is not a plain load (converted from f16 or i8, or computed) is
packed too, once per tile and K leaf, into rows of the accumulator's type: broadcast from there,
each row costs one load per k step, where converting it in place cost three shuffles (a 512 x
4096 x 2048 f16 matmul ran at a third of the f32 one's speed). Accumulators start at zero; init
is added and the epilogue applied once per output, with masked vector stores on the ragged right
edge. Rows past the tile edge repeat the last row and are not stored. A static K longer than
a cascade leaf whose ``y`` is read in place or too long to pack whole runs a leaf of K at a time
across the tile (``_k_blocked``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llvmlite import ir
from pyree.compiler.codegen.common.cascade import block_sizes
from pyree.compiler.codegen.llvm_cpu.loops import (
    cascaded,
    cascaded_run_time,
    entry_alloca,
    for_range,
    i64,
    nest,
    umin,
)
from pyree.compiler.codegen.llvm_cpu.scalar import ExprEmitter, Point, bits, scalar_type, span_stride
from pyree.compiler.codegen.llvm_cpu.targets import CpuTarget
from pyree.compiler.codegen.llvm_cpu.tiling import Tiling
from pyree.compiler.kernel import (
    Acc,
    Expr,
    Kernel,
    Load,
    LoopIndex,
    contraction_product,
    has_run_time_sizes,
    is_float,
    walk,
)
from pyree.compiler.sizes import is_static, opaque

PACK_LIMIT_BYTES = 256 << 10   # stack for the packed panel
GROUP_BYTES = 160 << 10        # panels packed together (``_pack``): a small part of L2
MIN_GROUPS = 16                # >= 8 per core on two cores when the problem is big enough
MIN_FLOPS_PER_GROUP = 1 << 18
MIN_FLOPS_TO_SPLIT = 1 << 21   # below it, one workgroup: a split costs more (see tiling.py)
CASCADE_EXTENT = 1 << 32       # a run-time K's cascade has levels for any uint32 extent
SINGLE_ROW_VECTORS = 8         # a single row's accumulators (``_single_rows``)
SINGLE_ROW_COST = 3             # a one-row block, in rows of a full one: its row and the panel's loads
K_LEAF = 256                   # K steps per block of the cascaded accumulators (codegen/common/cascade.py)
FAN_IN = 16


def plan(kernel: Kernel, target: CpuTarget) -> ContractionLowering | None:
    """The register-blocked lowering of a contraction ``kernel``, else None."""
    operands = contraction_operands(kernel, target)
    return None if operands is None else ContractionLowering(kernel, target, *operands)


def contraction_operands(kernel: Kernel, target: CpuTarget) -> tuple[Expr, Expr] | None:
    """(x, y) of a contraction ``kernel`` whose last two parallel loops are m and n (the
    result contiguous along n, x independent of n, y of m) that the target may sum in any
    order, else None."""
    if len(kernel.results) != 1 or len(kernel.reduction_ranges) != 1 or kernel.num_parallel < 2:
        return None
    m, n = kernel.num_parallel - 2, kernel.num_parallel - 1
    result = kernel.results[0]
    v = result.value
    if result.index[0].coeffs[n] != 1:
        return None
    product = contraction_product(result)
    if product is None:
        return None
    x, y = product.a, product.b
    if _depends(x, n) or _depends(y, m):
        x, y = y, x
    if _depends(x, n) or _depends(y, m) or not _pure(x) or not _pure(y):
        return None
    if v.dtype == "i1" or v.dtype == "index" or (is_float(v.dtype) and not target.reassociate):
        return None  # strict float order: the reduction template folds k after k
    if not _static_lanes(y, n):
        return None  # a run-time column stride: the dynamic template's loops (dynamic.py)
    return x, y


def _static_lanes(y: Expr, n: int) -> bool:
    """Every load of ``y`` steps a compile-time stride along n, which vector loads need (a
    transposed ``y`` with a run-time K steps K)."""
    return all(is_static(s.index[0].coeffs[n]) for s in walk(y) if isinstance(s, Load))


def _depends(e: Expr, dim: int) -> bool:
    return any(isinstance(s, Load) and s.index[0].coeffs[dim] != 0 for s in walk(e))


def _streams(y: Expr, n: int, dtype: str) -> bool:
    """``y`` is a plain load contiguous along n: the K loop may read its rows in place, which
    costs nothing where they are close (``_long_rows`` says when not); a transposed or
    converted ``y`` is packed, once per panel rather than gathered or converted again for
    every block of rows."""
    return isinstance(y, Load) and y.dtype == dtype and y.index[0].coeffs[n] == 1


def _page_strided(y: Expr, k: int, dtype: str) -> bool:
    """``y``'s rows lie a whole number of 4 KiB pages apart: read in place, every k step of the
    panel maps to the same L1 set (and 4K-aliases the last), and a 1024^3 f32 matmul ran 2-2.7x
    slower than packed (BENCHMARKS.md, "CNNs on the AVX-512 VM"), so such a ``y`` is packed."""
    stride = y.index[0].coeffs[k]
    return is_static(stride) and stride != 0 and (stride * max(1, bits(dtype) // 8)) % 4096 == 0


def _long_rows(y: Expr, k: int, dtype: str) -> bool:
    """``y``'s rows lie more than 1 KiB apart: read in place by several blocks of rows, a
    panel's k steps fall on few L1 sets and past the L1 prefetcher's stride, so a tile whose
    row blocks share the panel packs it (vector copies, ``_pack``). Measured on one core of the
    AVX-512 VM (x86-64-v3 code): conv GEMMs 64x3136x576 1.27x, 300x2000x200 1.40x, 512^3 1.44x
    faster packed; rows 1 KiB apart (256^3) 0.94x, 1.5 KiB 1.07x (BENCHMARKS.md)."""
    stride = y.index[0].coeffs[k]
    return is_static(stride) and abs(stride) * max(1, bits(dtype) // 8) > 1024


def _pure(e: Expr) -> bool:
    """Only loads, constants and arithmetic: no accumulators or loop indices."""
    return not any(isinstance(s, (Acc, LoopIndex)) for s in walk(e))


@dataclass(frozen=True)
class MicroTile:
    mr: int      # rows
    nv: int      # vectors per row
    vw: int      # lanes per vector

    @property
    def nr(self) -> int:
        return self.nv * self.vw


@dataclass
class _Lanes:
    """What a block's k steps and stores share: its vector widths, emitters, rows (the last
    repeated past M), first columns and lane masks (None in a whole panel)."""
    widths: list[int]
    scalar: ExprEmitter
    vecs: list[ExprEmitter]
    vts: list[ir.VectorType]
    rows: list[ir.Value]
    cols: list[ir.Value]
    masks: list[ir.Value | None]


class ContractionLowering:
    """Static extents choose the micro-tile, the packing and the tiling at compile time. Run-time
    ones (any of batch, M, N, K: ``dynamic.py`` hands such kernels here) keep the same static
    micro-tile, sized for the common case (the most rows, two vectors of columns), and guard the
    edges per call: rows past M repeat the last one, as they do statically; the ragged panel
    branches on how many vectors hold columns; K runs ``loops.cascaded_run_time``. Workgroup
    tiles are run-time sizes following ``_tile``'s rule (``_run_time_tile``). A ``y`` that is
    not read in place is packed only where K is static."""

    def __init__(self, kernel: Kernel, target: CpuTarget, x: Expr, y: Expr):
        self.kernel, self.x, self.y = kernel, x, y
        self.span = span_stride(target)
        self.dtype = kernel.results[0].value.dtype
        *batch, M, N = kernel.parallel_ranges
        K = kernel.reduction_ranges[0]
        self.static = not has_run_time_sizes(kernel)
        vw = max(1, target.vector_bits // max(32, bits(self.dtype)))
        accumulators = 24 if target.vector_registers == 32 else 12
        nv = max(1, min(2, -(-N // vw))) if is_static(N) else 2
        most = min(accumulators // nv, 12)
        mr = _rows_per_block(M, max(1, min(M, most))) if is_static(M) else most
        self.micro = MicroTile(mr, nv, vw)
        nr = self.micro.nr
        self.tiling = (_tile(tuple(batch), M, N, K, mr, nr) if self.static
                       else _run_time_tile(tuple(batch), M, N, K, mr, nr))
        reused = self.static and self.tiling.tile[-2] > mr   # a tile's row blocks share each panel
        self.pack_x = self.static and not (isinstance(x, Load) and x.dtype == self.dtype)
        in_place = (_streams(y, kernel.num_parallel - 1, self.dtype)
                    and not _page_strided(y, kernel.num_parallel, self.dtype)
                    and not (reused and _long_rows(y, kernel.num_parallel, self.dtype)))
        whole_k = K * nr * max(1, bits(self.dtype) // 8) if is_static(K) else 0
        # A static K longer than a leaf runs leaf by leaf across the tile (``_k_blocked``) where
        # y is read in place, its whole-K panel is too big for the stack (then packed a leaf
        # at a time, not gathered in place) or x is packed (a leaf of the tile's rows fits).
        self.leaves = (self.static and K > K_LEAF
                       and (in_place or whole_k > PACK_LIMIT_BYTES or self.pack_x))
        depth = K_LEAF if self.leaves else K       # k steps of a packed panel
        panel_bytes = depth * nr * max(1, bits(self.dtype) // 8) if is_static(K) else 0
        self.pack = not in_place and is_static(K) and panel_bytes <= PACK_LIMIT_BYTES
        tn = self.tiling.tile[-1]
        # a leaf-by-leaf tile also keeps, per panel, its carried sums on the stack
        carried = (len(block_sizes(K, K_LEAF, FAN_IN)) * -(-self.tiling.tile[-2] // mr) * mr
                   * nr * max(1, bits(self.dtype) // 8) if self.leaves else 0)
        self.group = (max(1, min(-(-tn // nr), GROUP_BYTES // panel_bytes,
                                 PACK_LIMIT_BYTES // (panel_bytes + carried)))
                      if self.pack and is_static(tn) else 1)
        self.depth = depth
        # the packed x: the tile's row blocks, each row ``depth`` k steps rounded up to vectors
        self.x_rows = -(-self.tiling.tile[-2] // mr) * mr if self.pack_x else 0
        self.x_stride = -(-depth // vw) * vw if self.pack_x else 0
        self._identity = -0.0 if is_float(self.dtype) else 0
        self.sizes = i64

    @property
    def workgroup_count(self) -> int:
        return self.tiling.count

    def emit(self, b: ir.IRBuilder, ptrs: list[ir.Value], wg: ir.Value, sizes=None) -> None:
        """``sizes``: the body's ``size_values.SizeValues``, for a kernel with run-time sizes."""
        self.sizes = sizes or i64
        bounds = self.tiling.emit_bounds(b, wg, self.sizes)
        nest(b, bounds[:-2], lambda batch: self._tile(b, ptrs, batch, *bounds[-2:]))

    def _tile(self, b, ptrs, batch, rows, cols) -> None:
        mt, K = self.micro, self.kernel.reduction_ranges[0]
        (m_lo, m_hi), (n_lo, n_hi) = rows, cols
        t = scalar_type(self.dtype)
        group = self.group * mt.nr
        packed = entry_alloca(b, t, self.depth * group, align=64) if self.pack else None
        xs = (entry_alloca(b, t, self.x_rows * self.x_stride, align=64) if self.pack_x
              else None)
        if self.leaves:
            self._k_blocked(b, ptrs, batch, m_lo, m_hi, n_lo, n_hi, packed, xs)
            return
        split = None if self.static else self._split(b, m_lo, m_hi)
        if xs is not None:
            self._pack_x(b, ptrs, batch, m_lo, m_hi, xs, i64(0), K)
        with for_range(b, n_lo, n_hi, step=group, name="ng") as ng:
            if packed is not None:
                self._pack(b, ptrs, batch, m_lo, ng, umin(b, b.sub(n_hi, ng), i64(group)), packed,
                           i64(0), K)

            def block(nb, ncols, panel, mb, full, vectors):
                self._block(b, ptrs, batch, mb, m_hi, nb, ncols, panel, full, vectors, mt.mr,
                            xs=self._x_rows(b, xs, mb, m_lo))
            self._panels(b, ng, n_hi, m_lo, split or m_hi, packed, block)
        if split is not None:
            self._single_rows(b, ptrs, batch, split, m_hi, n_lo, n_hi)

    def _panels(self, b, ng, n_hi, m_lo, m_end, packed, block) -> None:
        """``block(nb, ncols, panel, mb, full, vectors)`` for each panel of the group at ng and
        each block of rows from m_lo to m_end, in the panel's whole or ragged variant."""
        mt, N = self.micro, self.kernel.parallel_ranges[-1]
        t = scalar_type(self.dtype)
        group = self.group * mt.nr
        with for_range(b, ng, umin(b, b.add(ng, i64(group)), n_hi), step=mt.nr, name="nb") as nb:
            panel = None if packed is None else b.gep(
                packed, [b.mul(b.sub(nb, ng), i64(self.depth))], source_etype=t)
            ncols = b.sub(n_hi, nb)
            full = b.icmp_signed(">=", ncols, i64(mt.nr))
            with for_range(b, m_lo, m_end, step=mt.mr, name="mb") as mb:
                variant = lambda full_panel, vectors: block(nb, ncols, panel, mb, full_panel, vectors)
                if is_static(N):
                    self._static_panel(b, N, full, variant)
                else:
                    self._run_time_panel(b, ncols, full, variant)

    def _k_blocked(self, b, ptrs, batch, m_lo, m_hi, n_lo, n_hi, packed, xs) -> None:
        """A static K longer than ``K_LEAF``: per group of panels, leaf by leaf (K_LEAF steps),
        pack that leaf's rows of the panels and run every block of rows over them, folding
        each block's sums into carried sums of the tile; then init and epilogue per block. A
        leaf of the tile's x and of the panel stay in L1/L2 across the tile's blocks, where
        over all of K they did not: conv GEMMs with y in place (256x196x2304, 512x49x4608)
        ran 1.05-1.12x faster this way, ones whose y is packed whole (64x3136x576,
        128x784x1152) 0.8-0.93x, so those keep K in registers (BENCHMARKS.md, twenty-fourth
        session). The carried sums are the cascade's levels above the leaf
        (codegen/common/cascade.py), so the sums are those of the whole-K block bit for bit:
        level j takes FAN_IN of level j-1's blocks, starting from -0.0 (which adds nothing),
        the top from 0. A packed x is packed leaf by leaf with the panels."""
        mt, K = self.micro, self.kernel.reduction_ranges[0]
        t = scalar_type(self.dtype)
        group = self.group * mt.nr
        height = -(-self.tiling.tile[-2] // mt.mr) * mt.mr   # rows the tile's blocks cover
        top = len(block_sizes(K, K_LEAF, FAN_IN))            # levels above the leaf
        per_level = group * height
        carried = entry_alloca(b, t, top * per_level, align=64)
        whole, rest = divmod(K, K_LEAF)
        add = b.fadd if is_float(self.dtype) else b.add

        def slot(level, ng, nb, mb, i, v):
            at = b.add(b.mul(b.sub(nb, ng), i64(height)), b.mul(b.sub(mb, m_lo), i64(mt.nr)))
            at = b.add(at, i64((level - 1) * per_level + i * mt.nr + v * mt.vw))
            ptr = b.gep(carried, [at], source_etype=t)
            ptr.type = ir.PointerType()
            return ptr

        def leaf(ng, kb, steps, last):
            k0 = b.mul(kb, i64(K_LEAF))
            if packed is not None:
                self._pack(b, ptrs, batch, m_lo, ng, umin(b, b.sub(n_hi, ng), i64(group)), packed,
                           k0, steps)
            if xs is not None:
                self._pack_x(b, ptrs, batch, m_lo, m_hi, xs, k0, steps)

            def block(nb, ncols, panel, mb, full, vectors):
                def fold(sums):
                    self._fold(b, 1, top, kb, last, sums, [s.type for s in sums[0]],
                               lambda level, i, v: slot(level, ng, nb, mb, i, v), add)
                self._block(b, ptrs, batch, mb, m_hi, nb, ncols, panel, full, vectors, mt.mr,
                            leaf=(k0, steps, fold), xs=self._x_rows(b, xs, mb, m_lo))
            self._panels(b, ng, n_hi, m_lo, m_hi, packed, block)

        with for_range(b, n_lo, n_hi, step=group, name="ng") as ng:
            if whole:
                with for_range(b, i64(0), i64(whole), name="leaf", unroll=False) as kb:
                    leaf(ng, kb, K_LEAF, b.icmp_unsigned("==", kb, i64(whole - 1)) if not rest
                         else ir.Constant(ir.IntType(1), 0))
            if rest:
                leaf(ng, i64(whole), rest, ir.Constant(ir.IntType(1), 1))

            def finish(nb, ncols, panel, mb, full, vectors):
                lanes = self._lanes(b, ptrs, mb, m_hi, nb, ncols, full, vectors, mt.mr)
                sums = [[b.load(slot(top, ng, nb, mb, i, v), typ=vt, align=bits(self.dtype) // 8)
                         for v, vt in enumerate(lanes.vts)] for i in range(mt.mr)]
                self._store(b, batch, lanes, mb, m_hi, sums)
            self._panels(b, ng, n_hi, m_lo, m_hi, None, finish)

    def _fold(self, b, level, top, kb, last, sums, vts, slot, add) -> None:
        """Leaf ``kb``'s ``sums`` into carried ``level``: the first of its block there replaces
        (adds to -0.0), the top's first adds to 0; a level whose block ends with this leaf
        (every FAN_IN ** level leaves, or the ``last``) folds on into the next."""
        period = FAN_IN ** (level - 1)
        index = b.udiv(kb, i64(period)) if period > 1 else kb
        first = b.icmp_unsigned("==", b.urem(index, i64(FAN_IN)) if level < top else index, i64(0))
        start = self._identity if level < top else 0
        into = []
        for i, row in enumerate(sums):
            into.append([])
            for v, (s, vt) in enumerate(zip(row, vts)):
                ptr = slot(level, i, v)
                old = b.select(first, ir.Constant(vt, [start] * vt.count),
                               b.load(ptr, typ=vt, align=bits(self.dtype) // 8))
                into[-1].append(add(old, s))
                b.store(into[-1][-1], ptr, align=bits(self.dtype) // 8)
        if level < top:
            ends = b.icmp_unsigned("==", b.urem(b.add(kb, i64(1)), i64(period * FAN_IN)), i64(0))
            with b.if_then(b.or_(ends, last)):
                self._fold(b, level + 1, top, kb, last, into, vts, slot, add)

    def _split(self, b, m_lo, m_hi) -> ir.Value:
        """Where a run-time M's blocks of MR rows end and one-row blocks (``_single_rows``)
        take over: a remainder of r rows runs as one more block whose extra rows repeat the
        last (costing MR rows) or as r single rows (~``SINGLE_ROW_COST`` rows each), whichever
        costs less at this call's r. So a matmul of one row costs one row, not MR."""
        mr = self.micro.mr
        rest = b.urem(b.sub(m_hi, m_lo), i64(mr))
        singles = b.icmp_unsigned("<=", b.mul(rest, i64(SINGLE_ROW_COST)), i64(mr + 2))
        return b.select(singles, b.sub(m_hi, rest), m_hi)

    def _single_rows(self, b, ptrs, batch, lo, m_hi, n_lo, n_hi) -> None:
        """Rows [lo, m_hi) one at a time, each in strips of ``SINGLE_ROW_VECTORS`` vectors of
        columns: a row has no other rows to reuse its loads of ``y``, so it takes its
        accumulators across columns instead, enough of them to hide the FMA latency (what LLVM
        makes of a static one-row matmul by unrolling and jamming its panels). ``y`` is read in
        place, not packed."""
        mt = self.micro
        width = SINGLE_ROW_VECTORS * mt.vw
        with for_range(b, lo, m_hi, name="row") as m:
            with for_range(b, n_lo, n_hi, step=width, name="strip") as nb:
                ncols = b.sub(n_hi, nb)
                block = lambda full, vectors: self._block(
                    b, ptrs, batch, m, m_hi, nb, ncols, None, full, vectors, 1)
                with b.if_else(b.icmp_signed(">=", ncols, i64(width))) as (whole, ragged):
                    with whole:
                        block(True, SINGLE_ROW_VECTORS)
                    with ragged:
                        with b.if_else(b.icmp_signed("<=", ncols, i64(mt.nr))) as (narrow, wide):
                            with narrow:
                                block(False, mt.nv)
                            with wide:
                                block(False, SINGLE_ROW_VECTORS)

    def _static_panel(self, b, N: int, full, block) -> None:
        """The ragged panel is N's last (tiles are whole panels), so its width is known here:
        it runs only the vectors that hold columns."""
        mt = self.micro
        ragged = -(-(N % mt.nr) // mt.vw)
        variants = [v for v, possible in ((True, N >= mt.nr), (False, ragged > 0)) if possible]
        if len(variants) == 1:
            block(variants[0], mt.nv if variants[0] else ragged)
            return
        with b.if_else(full) as (then, otherwise):
            with then:
                block(True, mt.nv)
            with otherwise:
                block(False, ragged)

    def _run_time_panel(self, b, ncols, full, block) -> None:
        """A whole panel, or a ragged one of as many masked vectors as hold columns (chosen per
        panel: N is known per dispatch only)."""
        mt = self.micro

        def ragged(v: int) -> None:
            if v == mt.nv:
                block(False, v)
                return
            with b.if_else(b.icmp_signed("<=", ncols, i64(v * mt.vw))) as (fits, wider):
                with fits:
                    block(False, v)
                with wider:
                    ragged(v + 1)
        with b.if_else(full) as (then, otherwise):
            with then:
                block(True, mt.nv)
            with otherwise:
                ragged(1)

    def _pack(self, b, ptrs, batch, m_lo, ng, width, packed, k0, steps: int) -> None:
        """packed[p][k][j] = y(k0 + k, ng + p * NR + j) for k < steps and p * NR + j < width,
        else 0, for the ``group`` panels at ng: a k step copies the group's run of y's row
        (emitted as ``_block`` emits y in place: a transposed y gathers, a converted one
        converts a vector at a time). Row by row, not panel by panel: a panel alone reads one
        cache line per k step, each on another page where y's rows are long (im2col patches),
        and waits on a miss per line; 64x3136x576 ran 1.13x faster with its tile's 4 panels
        packed together. ``GROUP_BYTES`` bounds a group: 3 whole-K panels of 128x784x1152
        (221 KiB) ran 0.8x, 2 (147 KiB) as fast as one (BENCHMARKS.md, twenty-fourth session)."""
        mt = self.micro
        vec = ExprEmitter(b, ptrs, self.kernel, width=mt.vw, span=self.span, sizes=self.sizes)
        zero = vec.const(0, self.dtype)
        vectors = range(self.group * mt.nv)
        masks = [self._lane_mask(b, vec, b.sub(width, i64(v * mt.vw))) for v in vectors]
        cols = [b.add(ng, i64(v * mt.vw)) for v in vectors]
        n_dim = self.kernel.num_parallel - 1
        with for_range(b, i64(0), i64(steps), name="pk") as j:
            row, k = b.mul(j, i64(mt.nr)), b.add(k0, j)
            for v, (c, mask) in enumerate(zip(cols, masks)):
                value = vec.emit(self.y, Point(batch + [m_lo, c, k], lane_dim=n_dim, mask=mask))
                at = (v // mt.nv) * self.depth * mt.nr + (v % mt.nv) * mt.vw
                slot = b.gep(packed, [b.add(row, i64(at))], source_etype=scalar_type(self.dtype))
                slot.type = ir.PointerType()  # llvmlite types a GEP by its element: a vector store
                b.store(b.select(mask, value, zero), slot, align=max(1, bits(self.dtype) // 8))

    def _pack_x(self, b, ptrs, batch, m_lo, m_hi, xs, k0, steps: int) -> None:
        """xs[r][k] = x(min(m_lo + r, m_hi - 1), k0 + k) for the tile's ``x_rows`` rows r and
        k < steps, a vector of k at a time (a converted x converts 8 or 16 values an instruction);
        the last vector of a row is masked, its lanes past ``steps`` never read."""
        vw, t = self.micro.vw, scalar_type(self.dtype)
        vec = ExprEmitter(b, ptrs, self.kernel, width=vw, span=self.span, sizes=self.sizes)
        k_dim, last = self.kernel.num_parallel, b.sub(m_hi, i64(1))
        whole, rest = divmod(steps, vw)
        with for_range(b, i64(0), i64(self.x_rows), name="xr", unroll=False) as r:
            row = umin(b, b.add(m_lo, r), last)

            def put(kk, mask):
                value = vec.emit(self.x, Point(batch + [row, i64(0), b.add(k0, kk)], lane_dim=k_dim,
                                               mask=mask))
                slot = b.gep(xs, [b.add(b.mul(r, i64(self.x_stride)), kk)], source_etype=t)
                slot.type = ir.PointerType()
                b.store(value, slot, align=max(1, bits(self.dtype) // 8))
            if whole:
                with for_range(b, i64(0), i64(whole * vw), step=vw, name="xk") as kk:
                    put(kk, None)
            if rest:
                put(i64(whole * vw), self._lane_mask(b, vec, i64(rest)))

    def _x_rows(self, b, xs, mb, m_lo) -> ir.Value | None:
        """The packed x's row of the block at mb, or None where x is read in place."""
        if xs is None:
            return None
        at = b.mul(b.sub(mb, m_lo), i64(self.x_stride))
        return b.gep(xs, [at], source_etype=scalar_type(self.dtype))

    def _block(self, b, ptrs, batch, mb, m_hi, nb, ncols, panel, full: bool, vectors: int,
               height: int, leaf=None, xs=None) -> None:
        """One block of ``height`` rows x ``vectors`` vectors of outputs at (mb, nb), masked
        unless ``full``: its sums over all of K, then the init and epilogue, stored. ``leaf``:
        (k0, steps, fold) of a K-blocked tile (``_k_blocked``): only steps [k0, k0 + steps),
        the panel holding those, their sum handed to ``fold(accs)`` instead. ``xs``: the
        block's first row of the packed x, else x is read in place."""
        K = self.kernel.reduction_ranges[0]
        lanes = self._lanes(b, ptrs, mb, m_hi, nb, ncols, full, vectors, height)
        vts = lanes.vts
        if leaf is not None:
            k0, steps, fold = leaf
            accs = [[entry_alloca(b, vt) for vt in vts] for _ in range(height)]
            for row in accs:
                for s, vec in zip(row, lanes.vecs):
                    b.store(vec.const(self._identity, self.dtype), s)
            step = self._step(b, batch, lanes, mb, nb, panel, accs, xs)
            with for_range(b, i64(0), i64(steps), name="step") as j:
                step(b.add(k0, j), j)
            fold([[b.load(s, typ=vt) for s, vt in zip(row, vts)] for row in accs])
            return
        # Float sums cascade along K (codegen/common/cascade.py): levels[0] takes K_LEAF steps at a time.
        extent = K if is_static(K) else CASCADE_EXTENT
        sizes = block_sizes(extent, K_LEAF, FAN_IN) if is_float(self.dtype) else []
        levels = [[[entry_alloca(b, vt) for vt in vts] for _ in range(height)]
                  for _ in range(len(sizes) + 1)]
        slots = levels[-1]
        for row in slots:
            for s, vec in zip(row, lanes.vecs):
                b.store(vec.const(0, self.dtype), s)

        def fresh(j):
            for row in levels[j]:
                for s, vec in zip(row, lanes.vecs):
                    b.store(vec.const(-0.0, self.dtype), s)

        def combine(j):
            for into, row in zip(levels[j + 1], levels[j]):
                for total, part, vt in zip(into, row, vts):
                    b.store(b.fadd(b.load(total, typ=vt), b.load(part, typ=vt)), total)

        body = self._step(b, batch, lanes, mb, nb, panel, levels[0], xs)
        step = lambda k: body(k, k)
        if is_static(K):
            cascaded(b, 0, K, sizes, step, fresh, combine)
        else:
            cascaded_run_time(b, self.sizes(K), sizes, step, fresh, combine)
        self._store(b, batch, lanes, mb, m_hi,
                    [[b.load(s, typ=vt) for s, vt in zip(row, vts)] for row in slots])

    def _lanes(self, b, ptrs, mb, m_hi, nb, ncols, full: bool, vectors: int, height: int) -> _Lanes:
        """The block's rows, columns, vector widths and masks. In the ragged panel, the last
        vector at half width when its columns fit: LLVM splits a 512-bit operation into two
        256-bit ones on CPUs without 512-bit units, and N = 49 then costs 3.5 vectors, not 4."""
        mt = self.micro
        widths = [mt.vw] * vectors
        N = self.kernel.parallel_ranges[-1]
        if not full and mt.vw >= 8 and is_static(N) and 0 < N % mt.vw <= mt.vw // 2:
            widths[-1] = mt.vw // 2
        scalar = ExprEmitter(b, ptrs, self.kernel, sizes=self.sizes)
        vecs = [ExprEmitter(b, ptrs, self.kernel, width=w, span=self.span, sizes=self.sizes)
                for w in widths]
        t = scalar_type(self.dtype)
        last = b.sub(m_hi, i64(1))
        return _Lanes(
            widths, scalar, vecs, [ir.VectorType(t, w) for w in widths],
            rows=[umin(b, b.add(mb, i64(i)), last) for i in range(height)],
            cols=[b.add(nb, i64(v * mt.vw)) for v in range(len(widths))],
            masks=[None if full else self._lane_mask(b, vec, b.sub(ncols, i64(v * mt.vw)))
                   for v, vec in enumerate(vecs)])

    def _step(self, b, batch, lanes: _Lanes, mb, nb, panel, accs, xs=None):
        """The body ``step(k, pk)`` of one k step: NV vectors of the panel's row pk or of y
        in place, a broadcast x per row (from the packed ``xs`` at pk, or in place), a fused
        multiply-add into each of ``accs`` (allocas)."""
        mt, t = self.micro, scalar_type(self.dtype)
        m_dim = self.kernel.num_parallel - 2

        def step(k, pk):
            if panel is not None:
                base = b.mul(pk, i64(mt.nr))
                ys = [b.load(b.gep(panel, [b.add(base, i64(v * mt.vw))], source_etype=t),
                             typ=vt, align=bits(self.dtype) // 8) for v, vt in enumerate(lanes.vts)]
            else:
                ys = [vec.emit(self.y, Point(batch + [mb, c, k], lane_dim=m_dim + 1, mask=mask))
                      for vec, c, mask in zip(lanes.vecs, lanes.cols, lanes.masks)]
            for i, row in enumerate(lanes.rows):
                if xs is None:
                    x = lanes.scalar.emit(self.x, Point(batch + [row, nb, k]))
                else:
                    at = b.add(pk, i64(i * self.x_stride))
                    x = b.load(b.gep(xs, [at], source_etype=t), typ=t,
                               align=max(1, bits(self.dtype) // 8))
                splats = {w: vec.splat(x) for w, vec in zip(lanes.widths, lanes.vecs)}
                for v, (vec, vt) in enumerate(zip(lanes.vecs, lanes.vts)):
                    acc = b.load(accs[i][v], typ=vt)
                    b.store(self._fma(b, vec, splats[lanes.widths[v]], ys[v], acc), accs[i][v])
        return step

    def _store(self, b, batch, lanes: _Lanes, mb, m_hi, sums) -> None:
        """init + sum, through the epilogue, into the result: the block's rows within M."""
        result = self.kernel.results[0]
        m_dim = self.kernel.num_parallel - 2
        for i, row in enumerate(lanes.rows):
            valid = b.icmp_signed("<", b.add(mb, i64(i)), m_hi)
            with b.if_then(valid, likely=True):
                for v, (vec, c) in enumerate(zip(lanes.vecs, lanes.cols)):
                    pt = Point(batch + [row, c, i64(0)], lane_dim=m_dim + 1, mask=lanes.masks[v])
                    init = vec.emit(result.init, pt)
                    total = b.fadd(init, sums[i][v]) if is_float(self.dtype) else b.add(init, sums[i][v])
                    pt.accs = [total]
                    out = vec.emit(result.epilogue, pt) if result.epilogue is not None else total
                    vec.store(result.binding, result.index[0], out, pt)

    def _fma(self, b, vec: ExprEmitter, x, y, acc):
        if is_float(self.dtype):
            fn = vec.intrinsic("fmuladd", acc.type, [acc.type] * 3, [acc.type])
            return b.call(fn, [x, y, acc])
        return b.add(acc, b.mul(x, y))

    def _lane_mask(self, b, vec: ExprEmitter, remaining: ir.Value) -> ir.Value:
        """Lanes i with i < remaining."""
        return b.icmp_signed("<", vec.iota(), vec.splat(remaining))


def _rows_per_block(M: int, most: int) -> int:
    """The block height in [most/2, most] that wastes least on M's ragged last block: blocks
    past M still run (their rows repeat the last one), so M=64 in blocks of 12 computes 72 rows,
    in blocks of 11, 66. Each block also pays for its panel loads and loop, ~2 rows' worth."""
    return min(range(most, (most + 1) // 2 - 1, -1), key=lambda mr: -(-M // mr) * (mr + 2))


def _tile(batch: tuple[int, ...], M: int, N: int, K: int, mr: int, nr: int) -> Tiling:
    """Tiles of up to 16 row blocks x 4 column panels, shrunk until there are enough of them."""
    ranges = batch + (M, N)
    if math.prod(batch) * M * N * K * 2 < MIN_FLOPS_TO_SPLIT:
        return Tiling(ranges, ranges)
    row_blocks, col_panels = -(-M // mr), -(-N // nr)
    tm, tn = min(row_blocks, 16), min(col_panels, 4)
    groups = lambda: math.prod(batch) * -(-row_blocks // tm) * -(-col_panels // tn)
    enough = min(MIN_GROUPS, max(1, math.prod(batch) * M * N * K // MIN_FLOPS_PER_GROUP))
    while groups() < enough and (tm > 1 or tn > 1):
        if tm >= tn and tm > 1:
            tm = -(-tm // 2)
        else:
            tn = -(-tn // 2)
    return Tiling(ranges, (1,) * len(batch) + (max(1, min(M, tm * mr)), max(1, min(N, tn * nr))))


def _run_time_tile(batch: tuple, M, N, K, mr: int, nr: int) -> Tiling:
    """``_tile``'s rule as sizes evaluated per dispatch: one workgroup below
    ``MIN_FLOPS_TO_SPLIT``; else tiles of up to 4 column panels, fewer when even one row block
    per tile would leave too few workgroups, and up to 16 row blocks, fewer until there are
    about ``enough`` workgroups (``_tile`` halves them in turn; this divides, in one step)."""
    ranges = batch + (M, N)
    points = math.prod(batch) * M * N * K
    split = opaque("min", 1, opaque("floordiv", 2 * points, MIN_FLOPS_TO_SPLIT))  # 0 or 1
    enough = opaque("max", 1, opaque("min", MIN_GROUPS, opaque("floordiv", points, MIN_FLOPS_PER_GROUP)))
    row_blocks, col_panels = opaque("ceildiv", M, mr), opaque("ceildiv", N, nr)
    most = math.prod(batch) * row_blocks * col_panels
    tn = opaque("max", 1, opaque("min", opaque("min", 4, col_panels), opaque("floordiv", most, enough)))
    tiles = math.prod(batch) * opaque("ceildiv", col_panels, tn)
    tm = opaque("max", 1, opaque("min", opaque("min", 16, row_blocks),
                                 opaque("floordiv", tiles * row_blocks, enough)))
    tm, tn = split * tm + (1 - split) * row_blocks, split * tn + (1 - split) * col_panels
    return Tiling(ranges, (1,) * len(batch) + (opaque("max", 1, tm * mr), opaque("max", 1, tn * nr)))
