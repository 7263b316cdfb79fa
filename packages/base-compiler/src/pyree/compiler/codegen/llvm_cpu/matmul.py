"""Contractions (``acc + x * y`` over one reduction loop): a register-blocked micro-kernel.

Matched on normalized kernels whose last two parallel loops are m (rows) and n (the contiguous
output loop), with ``x`` independent of n and ``y`` independent of m: matmul, batch matmul, any
operand layout, casts inside ``x``/``y`` (f16 or i8 inputs), and any init/epilogue (bias, relu).

Per workgroup tile (batch, TM rows, TN cols), for each panel of NR = NV vectors of columns:
a ``y`` that is transposed or converted is packed into a zero-padded K x NR stack buffer (a
plain row-major one is read in place), then for each block of MR rows the MR x NV accumulator
vectors stay in registers for the whole K loop: per k, NV vector loads of the panel, MR scalar
loads of ``x`` broadcast, MR*NV fused multiply-adds. Accumulators start at zero; init is added
and the epilogue applied once per output, with masked vector stores on the ragged right edge.
Rows past the tile edge repeat the last row and are not stored.
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
        in_place = (_streams(y, kernel.num_parallel - 1, self.dtype)
                    and not _page_strided(y, kernel.num_parallel, self.dtype)
                    and not (reused and _long_rows(y, kernel.num_parallel, self.dtype)))
        self.pack = (not in_place and is_static(K)
                     and K * nr * max(1, bits(self.dtype) // 8) <= PACK_LIMIT_BYTES)
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
        N = self.kernel.parallel_ranges[-1]
        (m_lo, m_hi), (n_lo, n_hi) = rows, cols
        t = scalar_type(self.dtype)
        panel = entry_alloca(b, t, K * mt.nr, align=64) if self.pack else None
        split = None if self.static else self._split(b, m_lo, m_hi)
        with for_range(b, n_lo, n_hi, step=mt.nr, name="nb") as nb:
            ncols = b.sub(n_hi, nb)
            full = b.icmp_signed(">=", ncols, i64(mt.nr))
            if panel is not None:
                self._pack(b, ptrs, batch, m_lo, nb, umin(b, ncols, i64(mt.nr)), panel, K)
            with for_range(b, m_lo, split or m_hi, step=mt.mr, name="mb") as mb:
                block = lambda full_panel, vectors: self._block(
                    b, ptrs, batch, mb, m_hi, nb, ncols, panel, full_panel, vectors, mt.mr)
                if is_static(N):
                    self._static_panel(b, N, full, block)
                else:
                    self._run_time_panel(b, ncols, full, block)
        if split is not None:
            self._single_rows(b, ptrs, batch, split, m_hi, n_lo, n_hi)

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

    def _pack(self, b, ptrs, batch, m_lo, nb, width, panel, K) -> None:
        """panel[k][j] = y(k, nb + j) for j < width, else 0: NV vectors a k step, emitted as
        ``_block`` emits y in place (a transposed y gathers, a converted one converts a
        vector at a time)."""
        mt = self.micro
        vec = ExprEmitter(b, ptrs, self.kernel, width=mt.vw, span=self.span, sizes=self.sizes)
        zero = vec.const(0, self.dtype)
        masks = [self._lane_mask(b, vec, b.sub(width, i64(v * mt.vw))) for v in range(mt.nv)]
        cols = [b.add(nb, i64(v * mt.vw)) for v in range(mt.nv)]
        n_dim = self.kernel.num_parallel - 1
        with for_range(b, i64(0), i64(K), name="pk") as k:
            row = b.mul(k, i64(mt.nr))
            for v, (c, mask) in enumerate(zip(cols, masks)):
                value = vec.emit(self.y, Point(batch + [m_lo, c, k], lane_dim=n_dim, mask=mask))
                slot = b.gep(panel, [b.add(row, i64(v * mt.vw))], source_etype=scalar_type(self.dtype))
                slot.type = ir.PointerType()  # llvmlite types a GEP by its element: a vector store
                b.store(b.select(mask, value, zero), slot, align=max(1, bits(self.dtype) // 8))

    def _block(self, b, ptrs, batch, mb, m_hi, nb, ncols, panel, full: bool, vectors: int,
               height: int) -> None:
        """One block of ``height`` rows x ``vectors`` vectors of outputs at (mb, nb), masked
        unless ``full``. In the ragged panel, the last vector at half width when its columns
        fit: LLVM splits a 512-bit operation into two 256-bit ones on CPUs without 512-bit
        units, and N = 49 then costs 3.5 vectors, not 4."""
        mt, K = self.micro, self.kernel.reduction_ranges[0]
        widths = [mt.vw] * vectors
        N = self.kernel.parallel_ranges[-1]
        if not full and mt.vw >= 8 and is_static(N) and 0 < N % mt.vw <= mt.vw // 2:
            widths[-1] = mt.vw // 2
        m_dim = self.kernel.num_parallel - 2
        scalar = ExprEmitter(b, ptrs, self.kernel, sizes=self.sizes)
        vecs = [ExprEmitter(b, ptrs, self.kernel, width=w, span=self.span, sizes=self.sizes)
                for w in widths]
        t = scalar_type(self.dtype)
        vts = [ir.VectorType(t, w) for w in widths]
        last = b.sub(m_hi, i64(1))
        rows = [umin(b, b.add(mb, i64(i)), last) for i in range(height)]
        cols = [b.add(nb, i64(v * mt.vw)) for v in range(len(widths))]
        masks = [None if full else self._lane_mask(b, vec, b.sub(ncols, i64(v * mt.vw)))
                 for v, vec in enumerate(vecs)]
        # Float sums cascade along K (codegen/common/cascade.py): levels[0] takes K_LEAF steps at a time.
        extent = K if is_static(K) else CASCADE_EXTENT
        sizes = block_sizes(extent, K_LEAF, FAN_IN) if is_float(self.dtype) else []
        levels = [[[entry_alloca(b, vt) for vt in vts] for _ in range(height)]
                  for _ in range(len(sizes) + 1)]
        slots = levels[-1]
        for row in slots:
            for s, vec in zip(row, vecs):
                b.store(vec.const(0, self.dtype), s)

        def fresh(j):
            for row in levels[j]:
                for s, vec in zip(row, vecs):
                    b.store(vec.const(-0.0, self.dtype), s)

        def combine(j):
            for into, row in zip(levels[j + 1], levels[j]):
                for total, part, vt in zip(into, row, vts):
                    b.store(b.fadd(b.load(total, typ=vt), b.load(part, typ=vt)), total)

        def step(k):
            if panel is not None:
                base = b.mul(k, i64(mt.nr))
                ys = [b.load(b.gep(panel, [b.add(base, i64(v * mt.vw))], source_etype=t),
                             typ=vt, align=bits(self.dtype) // 8) for v, vt in enumerate(vts)]
            else:
                ys = [vec.emit(self.y, Point(batch + [mb, c, k], lane_dim=m_dim + 1, mask=mask))
                      for vec, c, mask in zip(vecs, cols, masks)]
            for i, row in enumerate(rows):
                x = scalar.emit(self.x, Point(batch + [row, nb, k]))
                splats = {w: vec.splat(x) for w, vec in zip(widths, vecs)}
                for v, (vec, vt) in enumerate(zip(vecs, vts)):
                    acc = b.load(levels[0][i][v], typ=vt)
                    b.store(self._fma(b, vec, splats[widths[v]], ys[v], acc), levels[0][i][v])

        if is_static(K):
            cascaded(b, 0, K, sizes, step, fresh, combine)
        else:
            cascaded_run_time(b, self.sizes(K), sizes, step, fresh, combine)

        result = self.kernel.results[0]
        for i in range(height):
            valid = b.icmp_signed("<", b.add(mb, i64(i)), m_hi)
            with b.if_then(valid, likely=True):
                for v, (vec, vt, c) in enumerate(zip(vecs, vts, cols)):
                    pt = Point(batch + [rows[i], c, i64(0)], lane_dim=m_dim + 1, mask=masks[v])
                    acc = b.load(slots[i][v], typ=vt)
                    init = vec.emit(result.init, pt)
                    total = b.fadd(init, acc) if is_float(self.dtype) else b.add(init, acc)
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
