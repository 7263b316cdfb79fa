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
    is_float,
    walk,
)

PACK_LIMIT_BYTES = 256 << 10   # stack for the packed panel
MIN_GROUPS = 16                # >= 8 per core on two cores when the problem is big enough
MIN_FLOPS_PER_GROUP = 1 << 18
MIN_FLOPS_TO_SPLIT = 1 << 21   # below it, one workgroup: a split costs more (see tiling.py)
K_LEAF = 256                   # K steps per block of the cascaded accumulators (codegen/common/cascade.py)
FAN_IN = 16


def plan(kernel: Kernel, target: CpuTarget) -> ContractionLowering | None:
    """The register-blocked lowering of a contraction ``kernel``, else None."""
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
    return ContractionLowering(kernel, target, x, y)


def _depends(e: Expr, dim: int) -> bool:
    return any(isinstance(s, Load) and s.index[0].coeffs[dim] != 0 for s in walk(e))


def _streams(y: Expr, n: int, dtype: str) -> bool:
    """``y`` is a plain load contiguous along n: the K loop reads its rows in place. Packing it
    (to stream one contiguous panel) was slower on convolution GEMMs, the copy costing more
    than the strided rows; a transposed or converted ``y`` is still packed, once
    per panel rather than gathered or converted again for every block of rows."""
    return isinstance(y, Load) and y.dtype == dtype and y.index[0].coeffs[n] == 1


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
    def __init__(self, kernel: Kernel, target: CpuTarget, x: Expr, y: Expr):
        self.kernel, self.x, self.y = kernel, x, y
        self.span = span_stride(target)
        self.dtype = kernel.results[0].value.dtype
        *batch, M, N = kernel.parallel_ranges
        K = kernel.reduction_ranges[0]
        vw = max(1, target.vector_bits // max(32, bits(self.dtype)))
        accumulators = 24 if target.vector_registers == 32 else 12
        nv = max(1, min(2, -(-N // vw)))
        mr = _rows_per_block(M, max(1, min(M, accumulators // nv, 12)))
        self.micro = MicroTile(mr, nv, vw)
        nr = self.micro.nr
        self.pack = (not _streams(y, kernel.num_parallel - 1, self.dtype)
                     and K * nr * max(1, bits(self.dtype) // 8) <= PACK_LIMIT_BYTES)
        self.tiling = _tile(tuple(batch), M, N, K, mr, nr)

    @property
    def workgroup_count(self) -> int:
        return self.tiling.count

    def emit(self, b: ir.IRBuilder, ptrs: list[ir.Value], wg: ir.Value) -> None:
        bounds = self.tiling.emit_bounds(b, wg)
        nest(b, bounds[:-2], lambda batch: self._tile(b, ptrs, batch, *bounds[-2:]))

    def _tile(self, b, ptrs, batch, rows, cols) -> None:
        mt, K = self.micro, self.kernel.reduction_ranges[0]
        N = self.kernel.parallel_ranges[-1]
        (m_lo, m_hi), (n_lo, n_hi) = rows, cols
        t = scalar_type(self.dtype)
        panel = entry_alloca(b, t, K * mt.nr, align=64) if self.pack else None
        with for_range(b, n_lo, n_hi, step=mt.nr, name="nb") as nb:
            ncols = b.sub(n_hi, nb)
            full = b.icmp_signed(">=", ncols, i64(mt.nr))
            if panel is not None:
                self._pack(b, ptrs, batch, m_lo, nb, umin(b, ncols, i64(mt.nr)), panel, K)
            # The ragged panel is N's last (tiles are whole panels), so its width is known here:
            # it runs only the vectors that hold columns.
            ragged = -(-(N % mt.nr) // mt.vw)
            variants = [v for v, possible in ((True, N >= mt.nr), (False, ragged > 0)) if possible]
            with for_range(b, m_lo, m_hi, step=mt.mr, name="mb") as mb:
                if len(variants) == 1:
                    self._block(b, ptrs, batch, mb, m_hi, nb, ncols, panel, variants[0], ragged)
                else:
                    with b.if_else(full) as (then, otherwise):
                        with then:
                            self._block(b, ptrs, batch, mb, m_hi, nb, ncols, panel, True, ragged)
                        with otherwise:
                            self._block(b, ptrs, batch, mb, m_hi, nb, ncols, panel, False, ragged)

    def _pack(self, b, ptrs, batch, m_lo, nb, width, panel, K) -> None:
        """panel[k][j] = y(k, nb + j) for j < width, else 0."""
        em = ExprEmitter(b, ptrs, self.kernel)
        nr = self.micro.nr
        t = scalar_type(self.dtype)
        with for_range(b, i64(0), i64(K), name="pk") as k:
            row = b.mul(k, i64(nr))
            with for_range(b, i64(0), width, name="pj") as j:
                value = em.emit(self.y, Point(batch + [m_lo, b.add(nb, j), k]))
                b.store(value, b.gep(panel, [b.add(row, j)], source_etype=t))
            with for_range(b, width, i64(nr), name="pz") as j:
                b.store(em.const(0, self.dtype), b.gep(panel, [b.add(row, j)], source_etype=t))

    def _block(self, b, ptrs, batch, mb, m_hi, nb, ncols, panel, full: bool, ragged: int) -> None:
        """One MR x NR block of outputs at (mb, nb). In the ragged panel, ``ragged`` vectors wide,
        the last at half width when its columns fit: LLVM splits a 512-bit operation into two
        256-bit ones on CPUs without 512-bit units, and N = 49 then costs 3.5 vectors, not 4."""
        mt, K = self.micro, self.kernel.reduction_ranges[0]
        widths = [mt.vw] * (mt.nv if full else ragged)
        if not full and mt.vw >= 8 and 0 < self.kernel.parallel_ranges[-1] % mt.vw <= mt.vw // 2:
            widths[-1] = mt.vw // 2
        m_dim = self.kernel.num_parallel - 2
        scalar = ExprEmitter(b, ptrs, self.kernel)
        vecs = [ExprEmitter(b, ptrs, self.kernel, width=w, span=self.span) for w in widths]
        t = scalar_type(self.dtype)
        vts = [ir.VectorType(t, w) for w in widths]
        last = b.sub(m_hi, i64(1))
        rows = [umin(b, b.add(mb, i64(i)), last) for i in range(mt.mr)]
        cols = [b.add(nb, i64(v * mt.vw)) for v in range(len(widths))]
        masks = [None if full else self._lane_mask(b, vec, b.sub(ncols, i64(v * mt.vw)))
                 for v, vec in enumerate(vecs)]
        # Float sums cascade along K (codegen/common/cascade.py): levels[0] takes K_LEAF steps at a time.
        sizes = block_sizes(K, K_LEAF, FAN_IN) if is_float(self.dtype) else []
        levels = [[[entry_alloca(b, vt) for vt in vts] for _ in range(mt.mr)]
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

        cascaded(b, 0, K, sizes, step, fresh, combine)

        result = self.kernel.results[0]
        for i in range(mt.mr):
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
