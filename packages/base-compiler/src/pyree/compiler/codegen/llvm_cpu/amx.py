"""bf16 contractions on AMX tiles (Intel Sapphire Rapids and later): ``TDPBF16PS``.

Taken where the target has AMX-BF16 and a static contraction of at least ``MIN_ROWS`` rows
multiplies two bf16 loads widened to f32, summing in f32 (any init and epilogue: the fptrunc of
a bf16 result, a bias, an activation). One TDPBF16PS multiplies a 16 x 32 bf16 tile of x by a
32 x 16 one of y into 16 x 16 f32 sums (8192 multiply-adds); the vector micro-kernel of
matmul.py does 16 or 32 an instruction.

A workgroup tile (up to ``TILE_M`` x ``TILE_N`` outputs) runs panel by panel of 32 columns, and
each panel chunk by chunk of ``CHUNK`` steps of K: the panel's y is packed into
B[CHUNK/2][32][2] (the pair layout TDPBF16PS reads B in: two consecutive k of one column side
by side in a 32-bit word), zero past K, then every block of 32 rows runs as 2 x 2 sum tiles over
the chunk (two A and two B tiles per 32 steps of k: the 8 tile registers), kept between chunks
in an f32 buffer C[TM][32] that starts at zero. x's rows are read as tiles where they lie when
they are contiguous along k and K is a multiple of 32; otherwise (and in a ragged last block of
rows) the block's rows are packed into A[32][CHUNK], zero past K. Once K is done, init and
epilogue are applied to the panel's outputs in vectors of 16 columns, as matmul.py applies
them. Padding rows and columns compute sums that are never stored; padding k is zero in both
operands, so it adds nothing (0 x 0, never 0 x inf).

Like PyTorch's AMX kernels (oneDNN), the sums of a 32-step slice are exact products added in
f32 as the instruction does them: bf16 subnormal inputs count as zero, f32 subnormal sums
become zero. LLVM configures the tile registers (``ldtilecfg``) from the shapes of its
``.internal`` intrinsics. Linux lets a process use them only once it has asked (arch_prctl
ARCH_REQ_XCOMP_PERM): the runtime asks before it loads AMX code (runtime/vm/executables.py).
"""

from __future__ import annotations

import math

from llvmlite import ir
from pyree.compiler.codegen.llvm_cpu.loops import entry_alloca, for_range, i64, nest, umin
from pyree.compiler.codegen.llvm_cpu.matmul import contraction_operands
from pyree.compiler.codegen.llvm_cpu.scalar import I32, ExprEmitter, Point, span_stride
from pyree.compiler.codegen.llvm_cpu.targets import CpuTarget
from pyree.compiler.codegen.llvm_cpu.tiling import Tiling
from pyree.compiler.codegen.llvm_cpu.transpose import transpose_registers
from pyree.compiler.kernel import Cast, Expr, Kernel, Load, has_run_time_sizes

FEATURES = frozenset({"amx-tile", "amx-bf16"})
MIN_ROWS = 16        # below, one tile of rows is mostly padding: matmul.py's kernel
TILE_M = 256         # rows of a workgroup tile, at most: they share its packed y
TILE_N = 128         # columns of a workgroup tile, at most
CHUNK = 1024         # steps of K packed at a time: 64 KiB of y, 64 KiB of x where packed
MIN_FLOPS_PER_GROUP = 1 << 24   # ~10 µs of AMX work: enough to pay for a tile's packing
MAX_GROUPS = 256

F32 = ir.FloatType()
I16 = ir.IntType(16)
I8 = ir.IntType(8)
PTR = ir.PointerType()


class _AmxType(ir.Type):
    """LLVM's ``x86_amx``: a value held in a tile register (llvmlite has no such type)."""

    def _to_string(self) -> str:
        return "x86_amx"

    def __eq__(self, other) -> bool:
        return isinstance(other, _AmxType)

    def __hash__(self) -> int:
        return hash("x86_amx")


class Tiles:
    """16 rows x 64 bytes tiles through LLVM's AMX intrinsics. The tests swap in a class with
    the same methods that computes on stack arrays (tests/codegen/llvm_cpu/amx_on_cpu.py), to
    run this template's packing and indexing on CPUs without AMX."""

    type = _AmxType()

    def __init__(self, b: ir.IRBuilder):
        self.b = b

    def _call(self, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
        module = self.b.module
        fn = module.globals.get(name) or ir.Function(
            module, ir.FunctionType(ret, [a.type for a in args]), name)
        return self.b.call(fn, args)

    @staticmethod
    def _shape() -> list[ir.Value]:
        return [ir.Constant(I16, 16), ir.Constant(I16, 64)]

    def load(self, ptr: ir.Value, stride: ir.Value) -> ir.Value:
        """16 rows of 64 bytes, ``stride`` bytes apart."""
        return self._call("llvm.x86.tileloadd64.internal", self.type, [*self._shape(), ptr, stride])

    def store(self, ptr: ir.Value, stride: ir.Value, tile: ir.Value) -> None:
        self._call("llvm.x86.tilestored64.internal", ir.VoidType(), [*self._shape(), ptr, stride, tile])

    def dot(self, c: ir.Value, a: ir.Value, bt: ir.Value) -> ir.Value:
        """c + a x bt: c 16 x 16 f32, a 16 x 32 bf16, bt 16 pairs of rows x 16 columns."""
        shape = [ir.Constant(I16, 16), ir.Constant(I16, 64), ir.Constant(I16, 64)]
        return self._call("llvm.x86.tdpbf16ps.internal", self.type, [*shape, c, a, bt])


def plan(kernel: Kernel, target: CpuTarget) -> AmxLowering | None:
    if not FEATURES <= target.features or has_run_time_sizes(kernel):
        return None
    operands = contraction_operands(kernel, target)
    if operands is None or kernel.results[0].value.dtype != "f32":
        return None
    x, y = (_widened_bf16(e) for e in operands)
    if x is None or y is None or kernel.parallel_ranges[-2] < MIN_ROWS:
        return None
    return AmxLowering(kernel, target, x, y)


def _widened_bf16(e: Expr) -> Load | None:
    """The bf16 load that ``e`` widens to f32, as its raw 16-bit words (packing copies bits)."""
    if isinstance(e, Cast) and e.op == "fpext" and isinstance(e.x, Load) and e.x.dtype == "bf16":
        return Load(e.x.binding, e.x.index, "i16")
    return None


def _round32(n: int) -> int:
    return -(-n // 32) * 32


class AmxLowering:
    def __init__(self, kernel: Kernel, target: CpuTarget, x: Load, y: Load):
        self.kernel, self.x, self.y = kernel, x, y
        self.span = span_stride(target)
        *batch, M, N = kernel.parallel_ranges
        self.K = K = kernel.reduction_ranges[0]
        self.chunk = min(CHUNK, _round32(K))
        self.tiling = _tile(tuple(batch), M, N, K)
        self.tm = _round32(self.tiling.tile[-2])
        m_dim, k_dim = kernel.num_parallel - 2, kernel.num_parallel
        x_coeffs = x.index[0].coeffs
        # x's rows read as tiles where they are: k contiguous and no k tile past K
        self.in_place = x_coeffs[k_dim] == 1 and K % 32 == 0 and x_coeffs[m_dim] != 0

    @property
    def workgroup_count(self) -> int:
        return self.tiling.count

    def emit(self, b: ir.IRBuilder, ptrs: list[ir.Value], wg: ir.Value, sizes=None) -> None:
        bounds = self.tiling.emit_bounds(b, wg)
        nest(b, bounds[:-2], lambda batch: self._tile(b, ptrs, batch, *bounds[-2:]))

    def _tile(self, b, ptrs, batch, rows, cols) -> None:
        """Panel by panel of 32 columns: its sums over every chunk of K, then its outputs."""
        (m_lo, m_hi), (n_lo, n_hi) = rows, cols
        chunk, k_end = self.chunk, i64(_round32(self.K))
        a, bt, c = (entry_alloca(b, t, count, align=64) for t, count in
                    ((I16, 32 * chunk), (I16, chunk * 32), (F32, self.tm * 32)))
        row_blocks = b.udiv(b.add(b.sub(m_hi, m_lo), i64(31)), i64(32))
        whole = b.udiv(b.sub(m_hi, m_lo), i64(32)) if self.in_place else i64(0)
        zero = ir.Constant(ir.VectorType(F32, 16), None)
        with for_range(b, n_lo, n_hi, step=32, name="panel", unroll=False) as n0:
            with for_range(b, i64(0), i64(self.tm * 32), step=16, name="zero") as i:
                b.store(zero, _at(b, c, [i], source_etype=F32), align=64)
            with for_range(b, i64(0), k_end, step=chunk, name="chunk", unroll=False) as k0:
                steps = umin(b, i64(chunk), b.sub(k_end, k0))
                self._pack_y(b, ptrs, batch, m_lo, n0, n_hi, k0, steps, bt)
                with for_range(b, i64(0), row_blocks, name="rb", unroll=False) as rb:
                    mb = b.add(m_lo, b.mul(rb, i64(32)))
                    in_place = b.icmp_unsigned("<", rb, whole)
                    with b.if_then(b.not_(in_place)):
                        self._pack_x(b, ptrs, batch, mb, umin(b, b.add(mb, i64(32)), m_hi), n_lo, k0, steps, a)
                    x_at, x_stride = self._x_rows(b, ptrs, batch, mb, n_lo, k0)
                    a_at = b.select(in_place, x_at, _at(b, a, [i64(0)], source_etype=I8))
                    a_stride = b.select(in_place, x_stride, i64(chunk * 2))
                    self._block(b, a_at, a_stride, bt, _at(b, c, [b.mul(rb, i64(32 * 32))], source_etype=F32),
                                b.udiv(steps, i64(32)))
            self._finish(b, ptrs, batch, m_lo, m_hi, n0, n_hi, c)

    def _x_rows(self, b, ptrs, batch, mb, n_lo, k0) -> tuple[ir.Value, ir.Value]:
        """Where x's row ``mb`` is at ``k0`` and its row stride, in bytes (meaningful where
        ``in_place``)."""
        if not self.in_place:
            return _at(b, ptrs[self.x.binding], [i64(0)], source_etype=I8), i64(0)
        em = ExprEmitter(b, ptrs, self.kernel)
        at = _at(b, ptrs[self.x.binding], [em.offset(self.x.index[0], Point(batch + [mb, n_lo, k0]))],
                 source_etype=I16)
        return at, i64(2 * self.x.index[0].coeffs[self.kernel.num_parallel - 2])

    def _pack_x(self, b, ptrs, batch, m_lo, m_hi, n_lo, k0, steps, a) -> None:
        """a[r][k] = x(m_lo + r, k0 + k) for the rows of one block, zero past K: one vector of
        32 k per load."""
        vec = ExprEmitter(b, ptrs, self.kernel, width=32, span=self.span)
        k_dim = self.kernel.num_parallel
        with for_range(b, m_lo, m_hi, name="xr", unroll=False) as m:
            row = b.mul(b.sub(m, m_lo), i64(self.chunk))
            with for_range(b, i64(0), steps, step=32, name="xk") as kk:
                k = b.add(k0, kk)
                pt = Point(batch + [m, n_lo, k], lane_dim=k_dim, mask=self._below(b, vec, k, self.K))
                b.store(vec.load(self.x, pt), _at(b, a, [b.add(row, kk)], source_etype=I16), align=64)

    def _pack_y(self, b, ptrs, batch, m_lo, n0, n_hi, k0, steps, bt) -> None:
        """bt[k / 2][j][k % 2] = y(k0 + k, n0 + j) for the panel's 32 columns, zero past K and
        past N."""
        k_dim, n_dim = self.kernel.num_parallel, self.kernel.num_parallel - 1
        coeffs = self.y.index[0].coeffs
        if coeffs[k_dim] == 1 and coeffs[n_dim] != 1:
            self._pack_y_transposed(b, ptrs, batch, m_lo, n0, n_hi, k0, steps, bt)
            return
        vec = ExprEmitter(b, ptrs, self.kernel, width=16, span=self.span)
        pairs = ir.Constant(ir.VectorType(I32, 32), [(i // 2) + 16 * (i % 2) for i in range(32)])
        lanes = [self._below(b, vec, b.add(n0, i64(h)), n_hi) for h in (0, 16)]
        with for_range(b, i64(0), steps, step=2, name="yk", unroll=False) as kk:
            k = b.add(k0, kk)
            for h, mask in zip((0, 16), lanes):
                n = b.add(n0, i64(h))
                even, odd = (
                    vec.load(self.y, Point(batch + [m_lo, n, at], lane_dim=n_dim,
                                           mask=b.and_(mask, vec.splat(self._lt(b, at, self.K)))))
                    for at in (k, b.add(k, i64(1))))
                word = b.add(b.mul(kk, i64(32)), i64(2 * h))
                b.store(b.shuffle_vector(even, odd, pairs), _at(b, bt, [word], source_etype=I16), align=64)

    def _pack_y_transposed(self, b, ptrs, batch, m_lo, n0, n_hi, k0, steps, bt) -> None:
        """``y`` contiguous along k (a Linear layer's [N, K] weight): 16 columns x 32 k are 16
        vectors of 16 pairs, transposed in registers into 16 rows of the pair layout."""
        vec = ExprEmitter(b, ptrs, self.kernel, width=32, span=self.span)
        k_dim = self.kernel.num_parallel
        words = ir.VectorType(I32, 16)
        with for_range(b, i64(0), steps, step=32, name="yk", unroll=False) as kk:
            k = b.add(k0, kk)
            in_k = self._below(b, vec, k, self.K)
            for h in (0, 16):
                cols = []
                for j in range(16):
                    n = b.add(n0, i64(h + j))
                    mask = b.and_(in_k, vec.splat(b.icmp_signed("<", n, n_hi)))
                    cols.append(b.bitcast(vec.load(self.y, Point(batch + [m_lo, n, k], lane_dim=k_dim,
                                                                 mask=mask)), words))
                for p, pair_row in enumerate(transpose_registers(b, cols)):
                    word = b.add(b.mul(b.add(kk, i64(2 * p)), i64(32)), i64(2 * h))
                    b.store(pair_row, _at(b, bt, [word], source_etype=I16), align=64)

    def _block(self, b, a_at, a_stride, bt, c_at, k_tiles) -> None:
        """32 rows x the panel's 32 columns over one chunk: 2 x 2 sum tiles carried through
        the k loop in registers (phis: tiles cannot live in allocas), from and back to C."""
        tiles = Tiles(b)
        row_bytes = i64(32 * 4)   # C's and B's rows: 32 f32 sums, 32 columns of pairs

        def at(ptr, offset):
            return _at(b, ptr, [offset], source_etype=I8)

        c_tiles = [[at(c_at, i64(16 * i * 128 + 64 * j)) for j in range(2)] for i in range(2)]
        sums = [[tiles.load(c_tiles[i][j], row_bytes) for j in range(2)] for i in range(2)]
        pre = b.block
        loop, done = b.append_basic_block("amx.k"), b.append_basic_block("amx.done")
        b.branch(loop)  # a chunk has at least one k tile
        b.position_at_end(loop)
        s = b.phi(i64(0).type, name="kt")
        s.add_incoming(i64(0), pre)
        phis = [[b.phi(tiles.type) for _ in range(2)] for _ in range(2)]
        for i in range(2):
            for j in range(2):
                phis[i][j].add_incoming(sums[i][j], pre)
        a_tiles = [tiles.load(at(a_at, b.add(b.mul(a_stride, i64(16 * i)), b.mul(s, i64(64)))), a_stride)
                   for i in range(2)]
        b_tiles = [tiles.load(at(bt, b.add(b.mul(s, i64(16 * 128)), i64(64 * j))), row_bytes)
                   for j in range(2)]
        new = [[tiles.dot(phis[i][j], a_tiles[i], b_tiles[j]) for j in range(2)] for i in range(2)]
        nxt = b.add(s, i64(1))
        s.add_incoming(nxt, loop)
        for i in range(2):
            for j in range(2):
                phis[i][j].add_incoming(new[i][j], loop)
        b.cbranch(b.icmp_unsigned("<", nxt, k_tiles), loop, done)
        b.position_at_end(done)
        for i in range(2):
            for j in range(2):
                tiles.store(c_tiles[i][j], row_bytes, new[i][j])

    def _finish(self, b, ptrs, batch, m_lo, m_hi, n0, n_hi, c) -> None:
        """out = epilogue(init + sum) for the panel's outputs, 16 columns a vector."""
        vec = ExprEmitter(b, ptrs, self.kernel, width=16, span=self.span)
        n_dim = self.kernel.num_parallel - 1
        result = self.kernel.results[0]
        with for_range(b, m_lo, m_hi, name="fr", unroll=False) as m:
            row = b.mul(b.sub(m, m_lo), i64(32))
            for h in (0, 16):
                n = b.add(n0, i64(h))
                with b.if_then(b.icmp_signed("<", n, n_hi)):
                    pt = Point(batch + [m, n, i64(0)], lane_dim=n_dim, mask=self._below(b, vec, n, n_hi))
                    acc = b.load(_at(b, c, [b.add(row, i64(h))], source_etype=F32),
                                 typ=ir.VectorType(F32, 16), align=64)
                    total = b.fadd(vec.emit(result.init, pt), acc)
                    pt.accs = [total]
                    out = vec.emit(result.epilogue, pt) if result.epilogue is not None else total
                    vec.store(result.binding, result.index[0], out, pt)

    @staticmethod
    def _lt(b, at: ir.Value, bound) -> ir.Value:
        return b.icmp_signed("<", at, bound if isinstance(bound, ir.Value) else i64(bound))

    @staticmethod
    def _below(b, vec: ExprEmitter, start: ir.Value, bound) -> ir.Value:
        """Lanes i with start + i < bound."""
        limit = bound if isinstance(bound, ir.Value) else i64(bound)
        return b.icmp_signed("<", b.add(vec.splat(start), vec.iota()), vec.splat(limit))


def _at(b: ir.IRBuilder, buf: ir.Value, offset: list[ir.Value], source_etype: ir.Type) -> ir.Value:
    """An untyped pointer into ``buf``: the buffers are read and written as vectors and tiles
    (llvmlite types a GEP by its element type, and then refuses a vector store through it)."""
    ptr = b.gep(buf, offset, source_etype=source_etype)
    ptr.type = PTR
    return ptr


def _tile(batch: tuple[int, ...], M: int, N: int, K: int) -> Tiling:
    """Tiles of up to TILE_M x TILE_N outputs (multiples of 32), halved until there are about
    one per ``MIN_FLOPS_PER_GROUP`` of work (at most ``MAX_GROUPS``): columns first, since a
    tile's rows share its packed y, 32 columns of which are packed per chunk of K."""
    ranges = batch + (M, N)
    tm, tn = min(TILE_M, _round32(M)), min(TILE_N, _round32(N))
    flops = math.prod(batch) * M * N * K * 2
    enough = max(1, min(MAX_GROUPS, flops // MIN_FLOPS_PER_GROUP))
    groups = lambda: math.prod(batch) * -(-M // tm) * -(-N // tn)  # noqa: E731
    while groups() < enough and (tm > 32 or tn > 32):
        if tn > 32:
            tn = _round32(tn // 2)
        else:
            tm = _round32(tm // 2)
    return Tiling(ranges, (1,) * len(batch) + (min(M, tm), min(N, tn)))
