"""Contractions on tensor cores with mma.sync (sm_80+): f16 x f16 and bf16 x bf16 -> f32
(m16n8k16), and, with ``--pyree-cuda-f32-matmul=tf32|3xtf32``, f32 x f32 -> f32 (m16n8k8 on TF32
operands, tf32.py).

The 16-bit operands are f16 (bf16) loads extended to f32 and multiplied and summed in f32:
exactly what the tensor cores compute (exact products, f32 accumulation). f32 operands are f32
loads, rounded (or split) to TF32 as their fragments leave shared memory. A is contiguous along
k; B along n (``[K, N]``) or along k (``[N, K]``, a linear layer's weight). Block tiles of
128x256 down to 64x64 (``choose_tile``), k depth 128 bytes (64 16-bit or 32 f32 elements), 8
warps as 2 x 4, so each warp owns up to a 64x64 tile: per k step (k16, or k8 for f32) 8 ldmatrix
feed 32 MMAs. Tiles move global -> shared 16 bytes a chunk (async_copy.py: cp.async, tails
zero-filled, scalar loads where the operands are not 16-byte aligned), 3 or 4 stages deep in
dynamic shared memory, so the next tiles load while the tensor cores work; fragments come out of
shared memory with ldmatrix, from rows padded by 16 bytes so that the eight row addresses of an
ldmatrix hit distinct banks. The template is written in bytes: an 8x8 b16 matrix of ldmatrix is
an 8x4 matrix of f32, which is exactly a TF32 fragment's quarter of A (or half of a k-major B),
so A and a k-major B load alike for both widths. An n-major B needs its k pairs transposed:
``ldmatrix.trans`` does that for 16-bit elements and would split 32-bit ones, so an f32 B along
n is read with 32-bit shared loads from rows padded by 32 bytes (four k rows of eight columns hit
32 distinct banks). Any M, N and K: the grid covers the output with whole tiles, the epilogue
stores what is inside. Any of them, and the batch, may be run-time sizes (run_time_mma.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.addressing import Linear, linearize
from pyree.compiler.codegen.common.contraction import Contraction, contraction_of
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.llvm_gpu import addressing as A
from pyree.compiler.codegen.common.llvm_gpu import dynamic
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function, Module
from pyree.compiler.codegen.common.llvm_gpu.matmul import (
    FILL_BLOCKS,
    epilogue_lowering,
    store_element,
)
from pyree.compiler.codegen.common.llvm_gpu.size_values import STATIC
from pyree.compiler.codegen.cuda import per_dispatch_tiles
from pyree.compiler.codegen.cuda import tf32 as TF32
from pyree.compiler.codegen.cuda.async_copy import Chunk, chunk, prologue, stage_chunks, width
from pyree.compiler.codegen.cuda.gathered import Gathered, gathered
from pyree.compiler.sizes import is_static, num_elements, opaque

THREADS = 256                                 # 8 warps as 2 (m) x 4 (n)
TC_DTYPES = ("f16", "bf16")                   # operand types the tensor cores multiply exactly


@dataclass(frozen=True)
class Operand:
    load: K.Load
    lin: Linear
    is_b: bool                                # indexed by (n, k), else (m, k)
    k_major: bool                             # contiguous along k, else along m (A) / n (B)
    vector: bool                              # 16-byte chunks are aligned if the binding is
    strides: tuple = ()                       # run-time strides that must be multiples of a chunk

    def aligned(self, fn: Function, sizes=STATIC) -> str:
        """i1: this operand's chunks can be copied with cp.async."""
        if not self.vector:
            return "false"
        aligned = A.bindings_aligned(fn, (self.load.binding,))
        w = width(self.load.dtype)
        for s in self.strides:
            whole = fn.op(f"icmp eq i64 {fn.op(f'and i64 {sizes(s)}, {w - 1}')}, 0")
            aligned = fn.op(f"and i1 {aligned}, {whole}")
        return aligned

    def chunk(self, fn: Function, bidx: list, outer: tuple[str, int | str], k: tuple[str, int | str],
              dst: str, exact: bool, sizes=STATIC) -> Chunk:
        """The chunk starting at (outer, k), each an (index, extent) pair, running along the
        contiguous dimension; ``outer`` is m for A, n for B (the kernel's loops are
        ``bidx + [m, n, k]``)."""
        def loop_at(row, col):
            o, kk = (row, col) if self.k_major else (col, row)
            return bidx + ([0, o, kk] if self.is_b else [o, 0, kk])
        (row, rows), (col, cols) = (outer, k) if self.k_major else (k, outer)
        return chunk(fn, self.load.binding, self.load.dtype, A.emitted(self.lin, sizes), loop_at, row,
                     rows, col, cols, dst, exact)


@dataclass(frozen=True)
class Operands:
    a: Operand | Gathered
    b: Operand | Gathered
    dtype: str                                # f16, bf16 or f32, both operands
    tf32: str | None = None                   # f32 operands: "tf32" or "3xtf32" (tf32.py)


def _narrow(e: K.Expr) -> K.Expr | None:
    """The f16 (bf16) value an operand widens to f32, or None."""
    if isinstance(e, K.Cast) and e.op == "fpext" and e.x.dtype in TC_DTYPES:
        return e.x
    return None


def operands(kernel: K.Kernel, c: Contraction, f32_matmul: str = "strict") -> Operands | None:
    """The operands when the contraction is f16 (bf16) values extended to f32 and accumulated in
    f32: loads, A contiguous along k and B along n or k, or gathers of 8 contiguous elements per
    16-byte chunk along k (``Gathered``: an implicit GEMM's patches); with ``f32_matmul`` tf32 or
    3xtf32 also f32 loads and gathers so laid out (4 elements a chunk); else None (f32 inputs
    stay on the SIMT template in strict mode: tensor cores would round them to TF32). With
    run-time sizes, only loads (strides that are sizes are checked for 16-byte chunks per
    dispatch, ``Operand.aligned``)."""
    if c.dtype != "f32":
        return None
    a, b = _narrow(c.x), _narrow(c.y)
    tf32 = None
    if a is None and b is None and f32_matmul != "strict" and c.x.dtype == c.y.dtype == "f32":
        a, b, tf32 = c.x, c.y, f32_matmul
    if a is None or b is None or a.dtype != b.dtype:
        return None
    if K.has_run_time_sizes(kernel) and not (isinstance(a, K.Load) and isinstance(b, K.Load)):
        return None
    w = width(a.dtype)
    n_loops = len(kernel.loop_ranges)
    n, k = kernel.num_parallel - 1, kernel.num_parallel
    loops = range(n_loops)
    if not isinstance(a, K.Load):
        op_a = gathered(kernel, a, False)
        if op_a is None:
            return None
    else:
        la = linearize(kernel.bindings[a.binding], a.index, n_loops)
        if la.coeffs[k] != 1:
            return None
        op_a = Operand(a, la, False, True, *chunked(la, k, w, loops))
    if not isinstance(b, K.Load):
        op_b = gathered(kernel, b, True)
        return None if op_b is None else Operands(op_a, op_b, a.dtype, tf32)
    lb = linearize(kernel.bindings[b.binding], b.index, n_loops)
    if lb.coeffs[n] == 1:
        b_inner = n
    elif lb.coeffs[k] == 1:
        b_inner = k
    else:
        return None
    return Operands(op_a, Operand(b, lb, True, b_inner == k, *chunked(lb, b_inner, w, loops)),
                    a.dtype, tf32)


def chunked(lin: Linear, inner: int, w: int, loops: range) -> tuple[bool, tuple]:
    """(vector, strides) of ``Operand``: whether ``w`` consecutive values of loop ``inner`` are
    one aligned chunk for every value of the other loops (``Linear.contiguous``), with the
    strides (and offset) that are run-time sizes, not multiples of ``w`` for every value, left
    to a check per dispatch."""
    static = Linear(tuple(c if is_static(c) else 0 for c in lin.coeffs),
                    lin.const if is_static(lin.const) else 0)
    sized = [v for v in (*(lin.coeffs[l] for l in loops if l != inner), lin.const)
             if not is_static(v) and opaque("floordiv", v, w) * w != v]
    return static.contiguous(inner, w, loops), tuple(sized)


def waves_cost(m, n, batch, bm: int, bn: int):
    """The slowest multiprocessor's work: waves of blocks times a block's per-k-step cost, its
    MMAs (bm bn) plus its operand traffic (64 (bm + bn)). A smaller tile wins where the larger
    one leaves multiprocessors idle. A size where an extent is one."""
    blocks = opaque("ceildiv", m, bm) * opaque("ceildiv", n, bn) * batch
    return opaque("ceildiv", blocks, FILL_BLOCKS) * (bm * bn + 64 * (bm + bn))


@dataclass(frozen=True)
class Tile:
    bm: int
    bn: int
    stages: int                               # cp.async pipeline depth
    min_blocks: int                           # blocks per SM the register budget allows
    itemsize: int = 2                         # bytes per operand element

    @property
    def bk(self) -> int:                      # 128 bytes of k
        return 128 // self.itemsize

    @property
    def width(self) -> int:                   # elements per 16-byte chunk
        return 16 // self.itemsize

    @property
    def a_stride(self) -> int:                # padded shared rows, in elements
        return self.bk + self.width

    def b_stride(self, k_major: bool) -> int:
        return self.bk + self.width if k_major else self.bn + 8

    @property
    def a_stage(self) -> int:
        return self.bm * self.a_stride

    def b_stage(self, k_major: bool) -> int:
        return (self.bn if k_major else self.bk) * self.b_stride(k_major)

    def shared_bytes(self, k_major: bool) -> int:  # dynamic: over the 48 KiB static limit
        return self.stages * (self.a_stage + self.b_stage(k_major)) * self.itemsize


# Largest first; ties go to the larger. 128x256 gives each warp a 64x64 tile (32 MMAs per 8
# ldmatrix per k16 step). Shared memory per SM (227 KiB) bounds stages x blocks.
TILES = (Tile(128, 256, 3, 1), Tile(128, 128, 3, 2), Tile(64, 128, 4, 2), Tile(64, 64, 4, 2))
# Sizes at run time: the tiles of two blocks a multiprocessor, which share one kernel's budget
# (128 registers a thread, 2 x 110.6 KiB of shared memory); 128x256 would hold the rest to one.
RUN_TIME_TILES = TILES[1:]


# 3xtf32 adds each k tile's products into the accumulators in f32 (``_tile``): its accumulators
# are held twice, and its split fragments three times, so its tiles stop at 128x128 and take
# the whole register file (one block's budget).
PROMOTED_TILES = tuple(replace(t, min_blocks=1) for t in TILES[1:])


def choose_tile(m: int, n: int, batch: int, tiles: tuple[Tile, ...] = TILES) -> Tile:
    return min(tiles, key=lambda t: waves_cost(m, n, batch, t.bm, t.bn))


def plan(kernel: K.Kernel, target):
    """(contraction, (operands, tile)) when the tensor-core template takes ``kernel``, else None."""
    c = contraction_of(kernel)
    found = None if c is None else tile_plan(kernel, c, target.sm, target.f32_matmul)
    return None if found is None else (c, found)


def tile_plan(kernel: K.Kernel, c: Contraction, sm: int, f32_matmul: str = "strict"):
    """(operands, tiles) when the tensor-core template applies, else None: the tile
    ``choose_tile`` takes, or with run-time sizes the candidates chosen among per dispatch."""
    run_time = K.has_run_time_sizes(kernel)
    if sm < 80 or (run_time and not dynamic.loop_indices(kernel)):
        return None
    found = operands(kernel, c, f32_matmul)
    if found is None:
        return None
    par = kernel.parallel_ranges
    promoted = found.tf32 == "3xtf32"
    tiles = (PROMOTED_TILES if promoted else RUN_TIME_TILES) if run_time else \
        (choose_tile(par[-2], par[-1], int(np.prod(par[:-2], dtype=np.int64)),
                     PROMOTED_TILES if promoted else TILES),)
    return found, tiles if found.tf32 is None else tuple(replace(t, itemsize=4) for t in tiles)


def fragment_type(dtype: str) -> str:
    """The LLVM type of an f16 (bf16) MMA operand register: two elements."""
    return "<2 x half>" if dtype == "f16" else "i32"


def ldmatrix(fn: Function, arr: str, elem: str, offset: str, trans: bool, half2: str) -> list[str]:
    """``ldmatrix.x4`` (``.trans``) at element ``offset`` of the shared array ``arr``: four
    registers of ``half2`` (``fragment_type``) per lane."""
    p = fn.op(f"getelementptr {elem}, ptr addrspace(3) {arr}, i32 {offset}")
    kind = "trans.b16" if trans else "b16"
    r = fn.call("{i32, i32, i32, i32}", f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.{kind}",
                [("ptr addrspace(3)", p)])
    parts = [fn.op(f"extractvalue {{i32, i32, i32, i32}} {r}, {i}") for i in range(4)]
    return parts if half2 == "i32" else [fn.op(f"bitcast i32 {p} to <2 x half>") for p in parts]


def mma_m16n8k16(fn: Function, dtype: str, a: list[str], b: tuple[str, str], acc: list[str]) -> list[str]:
    """``acc`` + A B for one m16n8k16 tile of f16 (bf16) operands: A's four and B's two fragment
    registers; the four f32 accumulators after."""
    half2 = fragment_type(dtype)
    name = "llvm.nvvm.mma.m16n8k16.row.col." + ("f32.f32" if dtype == "f16" else "bf16")
    args = [(half2, x) for x in a] + [(half2, x) for x in b] + [("float", v) for v in acc]
    d = fn.call("{float, float, float, float}", name, args)
    return [fn.op(f"extractvalue {{float, float, float, float}} {d}, {i}") for i in range(4)]


def emit(module: Module, kernel: K.Kernel, name: str, plan) -> Launch:
    c, (ops, tiles) = plan
    par = kernel.parallel_ranges
    M, N, nb = par[-2], par[-1], num_elements(par[:-2])
    fn = Function(module)
    sizes = per_dispatch_tiles.sizes_of(fn, kernel)
    a_sh = module.dynamic_shared(f"{name}_smem", "half" if tiles[0].itemsize == 2 else "float")
    costs = [waves_cost(M, N, nb, t.bm, t.bn) for t in tiles]
    per_dispatch_tiles.emit_taken(fn, sizes, costs,
                                  [lambda t=t: _tile(fn, kernel, c, ops, t, sizes, a_sh) for t in tiles])
    module.add_kernel(name, A.kernel_params(kernel, sizes), fn, THREADS,
                      min(t.min_blocks for t in tiles))
    grid = [per_dispatch_tiles.per_dispatch([opaque("ceildiv", extent, side(t)) for t in tiles], costs)
            for extent, side in ((N, lambda t: t.bn), (M, lambda t: t.bm))]
    return Launch((*grid, nb), (THREADS, 1, 1), max(t.shared_bytes(ops.b.k_major) for t in tiles))


def _tile(fn: Function, kernel: K.Kernel, c: Contraction, ops: Operands, t: Tile, sizes,
          a_sh: str) -> None:
    """The kernel's body with tile ``t``, its stages in the dynamic shared array ``a_sh``."""
    a, b = ops.a, ops.b
    bk_major = b.k_major
    mts, nts = t.bm // 2 // 16, t.bn // 4 // 8  # MMA tiles per warp along m and n
    wm_size, wn_size = t.bm // 2, t.bn // 4
    par = kernel.parallel_ranges
    batch = par[:-2]
    M, N = par[-2:]
    KD = kernel.reduction_ranges[0]
    m_, n_, k_ = sizes(M), sizes(N), sizes(KD)
    b_stride, b_stage = t.b_stride(bk_major), t.b_stage(bk_major)
    elem = "half" if t.itemsize == 2 else "float"  # shared memory's element, for addressing
    shift = t.width.bit_length() - 1               # log2 of the elements per chunk
    kstep = 16 if ops.tf32 is None else 8          # the MMA's k
    b_sh = fn.op(f"getelementptr {elem}, ptr addrspace(3) {a_sh}, i64 {t.stages * t.a_stage}")

    tid32 = fn.special("tid.x")
    tid = fn.op(f"zext i32 {tid32} to i64")
    lane = fn.op(f"and i32 {tid32}, 31")
    warp = fn.op(f"lshr i32 {tid32}, 5")
    wm = fn.op(f"lshr i32 {warp}, 2")
    wn = fn.op(f"and i32 {warp}, 3")
    bx, by = fn.special("ctaid.x"), fn.special("ctaid.y")
    n0 = fn.op(f"mul i64 {fn.op(f'zext i32 {bx} to i64')}, {t.bn}")
    m0 = fn.op(f"mul i64 {fn.op(f'zext i32 {by} to i64')}, {t.bm}")
    bz = fn.op(f"zext i32 {fn.special('ctaid.z')} to i64")
    bidx = A.decompose(fn, bz, [sizes(d) for d in batch]) if batch else []
    a_aligned, b_aligned = a.aligned(fn, sizes), b.aligned(fn, sizes)

    def rows_of(rows: int, per_row: int, stride: int):
        """This thread's chunks of a rows x (width per_row) tile: (row, column, shared offset)."""
        out = []
        for j in range(rows * per_row // THREADS):
            ch = fn.op(f"add i64 {tid}, {THREADS * j}")
            r = fn.op(f"udiv i64 {ch}, {per_row}")
            col = fn.op(f"shl i64 {fn.op(f'urem i64 {ch}, {per_row}')}, {shift}")
            out.append((r, col, fn.op(f"add i64 {fn.op(f'mul i64 {r}, {stride}')}, {col}")))
        return out

    a_exact = is_static(M) and is_static(KD) and M % t.bm == 0 and KD % t.bk == 0
    b_exact = is_static(N) and is_static(KD) and N % t.bn == 0 and KD % t.bk == 0
    a_chunks = rows_of(t.bm, t.bk // t.width, t.a_stride)
    b_chunks = rows_of(t.bn, t.bk // t.width, b_stride) if bk_major else \
        rows_of(t.bk, t.bn // t.width, b_stride)

    def load_stage(stage: str, kt: str):
        k0 = fn.op(f"mul i64 {kt}, {t.bk}")
        a_base = fn.op(f"mul i64 {stage}, {t.a_stage}")
        b_base = fn.op(f"mul i64 {stage}, {b_stage}")
        copies = []
        for r, col, off in a_chunks:
            dst = fn.op(f"getelementptr {elem}, ptr addrspace(3) {a_sh}, "
                        f"i64 {fn.op(f'add i64 {a_base}, {off}')}")
            m, k = fn.op(f"add i64 {m0}, {r}"), fn.op(f"add i64 {k0}, {col}")
            copies.append(a.chunk(fn, bidx, (m, m_), (k, k_), dst, a_exact, sizes))
        stage_chunks(fn, a_aligned, copies)
        copies = []
        for r, col, off in b_chunks:
            dst = fn.op(f"getelementptr {elem}, ptr addrspace(3) {b_sh}, "
                        f"i64 {fn.op(f'add i64 {b_base}, {off}')}")
            n, k = (r, col) if bk_major else (col, r)
            n, k = fn.op(f"add i64 {n0}, {n}"), fn.op(f"add i64 {k0}, {k}")
            copies.append(b.chunk(fn, bidx, (n, n_), (k, k_), dst, b_exact, sizes))
        stage_chunks(fn, b_aligned, copies)

    accs = []
    for _ in range(mts * nts * 4):
        slot = fn.alloca("float")
        fn.raw(f"store float 0.0, ptr {slot}")
        accs.append(slot)

    lane_row = fn.op(f"and i32 {lane}, 15")                        # ldmatrix row of this lane
    lane_hi = fn.op(f"lshr i32 {lane}, 4")
    lane_col = fn.op(f"shl i32 {lane_hi}, {shift}")  # 0 or one chunk
    # an [N, K] B: matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15)
    # (16-bit k; for f32 k 0-3 and 4-7)
    lane_n = fn.op(f"add i32 {fn.op(f'and i32 {lane}, 7')}, "
                   f"{lane_col if t.width == 8 else fn.op(f'shl i32 {lane_hi}, 3')}")
    lane_k = fn.op(f"and i32 {lane}, 8")
    if t.width != 8:
        lane_k = fn.op(f"lshr i32 {lane_k}, 1")
    half2 = fragment_type(ops.dtype)

    def at(base: str, row: str, stride: int, col: str) -> str:
        rowoff = fn.op(f"mul i32 {row}, {stride}")
        return fn.op(f"add i32 {base}, {fn.op(f'add i32 {rowoff}, {col}')}")

    def b_n_major_f32(b_base: str, ks: int) -> list[tuple[str, str]]:
        """An f32 B along n, (b0, b1) per n8 tile: 32-bit loads of (k, n) = (ks + t, g) and
        (ks + t + 4, g), g = lane / 4 and t = lane % 4 (the m16n8k8 B fragment)."""
        g, q = fn.op(f"lshr i32 {lane}, 2"), fn.op(f"and i32 {lane}, 3")
        row = fn.op(f"add i32 {q}, {ks * kstep}")
        out = []
        for nt in range(nts):
            col = fn.op(f"add i32 {fn.op(f'mul i32 {wn}, {wn_size}')}, {fn.op(f'add i32 {g}, {nt * 8}')}")
            off = at(b_base, row, b_stride, col)
            regs = []
            for offset in (off, fn.op(f"add i32 {off}, {4 * b_stride}")):
                p = fn.op(f"getelementptr float, ptr addrspace(3) {b_sh}, i32 {offset}")
                regs.append(fn.op(f"load i32, ptr addrspace(3) {p}, align 4"))
            out.append(tuple(regs))
        return out

    def compute(stage: str, olds: list[str]) -> list[str]:
        st = fn.op(f"trunc i64 {stage} to i32")
        a_base = fn.op(f"mul i32 {st}, {t.a_stage}")
        b_base = fn.op(f"mul i32 {st}, {b_stage}")
        for ks in range(t.bk // kstep):
            afr = []
            for mt in range(mts):
                row = fn.op(f"add i32 {fn.op(f'mul i32 {wm}, {wm_size}')}, "
                            f"{fn.op(f'add i32 {lane_row}, {mt * 16}')}")
                col = fn.op(f"add i32 {lane_col}, {ks * kstep}")
                afr.append(ldmatrix(fn, a_sh, elem, at(a_base, row, t.a_stride, col), False, half2))
            bfr = []
            for np_ in range(nts // 2 if bk_major or ops.tf32 is None else 0):
                wn_base = fn.op(f"add i32 {fn.op(f'mul i32 {wn}, {wn_size}')}, {np_ * 16}")
                if bk_major:
                    off = at(b_base, fn.op(f"add i32 {wn_base}, {lane_n}"), b_stride,
                             fn.op(f"add i32 {lane_k}, {ks * kstep}"))
                else:
                    off = at(b_base, fn.op(f"add i32 {lane_row}, {ks * 16}"), b_stride,
                             fn.op(f"add i32 {wn_base}, {lane_col}"))
                r = ldmatrix(fn, b_sh, elem, off, not bk_major, half2)
                bfr += [(r[0], r[1]), (r[2], r[3])]
            if not bk_major and ops.tf32 is not None:
                bfr = b_n_major_f32(b_base, ks)
            if ops.tf32 is not None:
                afr = [TF32.split(fn, regs, ops.tf32) for regs in afr]
                bfr = [TF32.split(fn, list(regs), ops.tf32) for regs in bfr]
            new = []
            for mt in range(mts):
                for nt in range(nts):
                    base = (mt * nts + nt) * 4
                    acc = [olds[base + i] for i in range(4)]
                    if ops.tf32 is not None:
                        new += TF32.mma(fn, afr[mt], bfr[nt], acc)
                        continue
                    new += mma_m16n8k16(fn, ops.dtype, afr[mt], bfr[nt], acc)
            olds = new
        return olds

    num_k = sizes(opaque("ceildiv", KD, t.bk))
    prologue(fn, t.stages - 1, num_k, load_stage)  # the first stages-1 tiles in flight

    def step(kt):
        # tile kt has landed once at most stages-2 younger groups are pending; the barrier also
        # says every warp is done with tile kt-1, whose stage the next load overwrites
        fn.call("void", "llvm.nvvm.cp.async.wait.group", [("i32", str(t.stages - 2))])
        fn.barrier()
        ahead = fn.op(f"add i64 {kt}, {t.stages - 1}")
        fn.if_then(fn.op(f"icmp ult i64 {ahead}, {num_k}"),
                   lambda: load_stage(fn.op(f"urem i64 {ahead}, {t.stages}"), ahead))
        fn.call("void", "llvm.nvvm.cp.async.commit.group", [])
        olds = [fn.op(f"load float, ptr {s}") for s in accs]
        stage = fn.op(f"urem i64 {kt}, {t.stages}")
        if ops.tf32 == "3xtf32":
            # The tensor cores add into their accumulator with truncation, not f32's rounding:
            # over a long K the error grows with the sum (3.2e-5 of a 4096-deep product, where
            # f32's fma gives 2.9e-6). Each k tile's products start from zero and are added in
            # f32, so the truncation is that of 4 k8 steps' sums.
            news = [fn.op(f"fadd float {o}, {p}")
                    for o, p in zip(olds, compute(stage, ["0.0"] * len(olds)))]
        else:
            news = compute(stage, olds)
        for s, v in zip(accs, news):
            fn.raw(f"store float {v}, ptr {s}")

    fn.loop("0", str(num_k), "1", step)

    lowering = epilogue_lowering(fn, kernel, sizes)

    g = fn.op(f"zext i32 {fn.op(f'lshr i32 {lane}, 2')} to i64")
    quad = fn.op(f"and i32 {lane}, 3")
    q = fn.op(f"zext i32 {fn.op(f'shl i32 {quad}, 1')} to i64")
    wm_off = fn.op(f"zext i32 {fn.op(f'mul i32 {wm}, {wm_size}')} to i64")
    wn_off = fn.op(f"zext i32 {fn.op(f'mul i32 {wn}, {wn_size}')} to i64")
    for mt in range(mts):
        for nt in range(nts):
            for i in range(4):
                row = fn.op(f"add i64 {fn.op(f'add i64 {m0}, {wm_off}')}, "
                            f"{fn.op(f'add i64 {g}, {mt * 16 + (8 if i >= 2 else 0)}')}")
                col = fn.op(f"add i64 {fn.op(f'add i64 {n0}, {wn_off}')}, "
                            f"{fn.op(f'add i64 {q}, {nt * 8 + (i & 1)}')}")
                total = fn.op(f"load float, ptr {accs[(mt * nts + nt) * 4 + i]}")
                store_element(fn, kernel, c, bidx, row, col, total, lowering, sizes)
