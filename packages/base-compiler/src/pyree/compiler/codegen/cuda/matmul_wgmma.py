"""f16 x f16 and bf16 x bf16 -> f32 contractions on Hopper's warpgroup tensor cores:
``wgmma.mma_async`` (sm_90a), for the operands ``matmul_mma.operands`` accepts; and f32 x f32
under ``--pyree-cuda-f32-matmul=tf32`` (``m64nNk8.tf32``) where both operands run along k.

Block tile 128 x BN x 64 (BN a multiple of 32 from 64 to 256, ``choose_tile``), two warpgroups of four warps,
each owning 64 rows: per 64-deep k tile each warpgroup issues four ``m64nBNk16`` wgmma that read
A and B straight from shared memory through matrix descriptors and accumulate in registers (BN / 2
floats a thread). Tiles move global -> shared 16 bytes a chunk (async_copy.py: cp.async, tails
zero-filled, scalar loads where the operands are not 16-byte aligned) into the ISA's
128-byte-swizzled canonical layouts, S = ``Tile.stages`` deep (as many as fit, up to 8): tile
kt+S-2 loads while the tensor cores work on tiles kt and kt-1 (one wgmma group stays in flight
across each barrier, so the stage a load overwrites is always two tiles old); its loads are
issued after tile kt's wgmma, so that their address arithmetic overlaps the tensor cores.
cp.async writes through the generic proxy and wgmma reads through the async one, hence
``fence.proxy.async`` before each barrier.

Static 16-bit products without a batch whose rows are 16-byte multiples apart stage through the
tensor memory accelerator instead (``tensor_maps``, tma.py): thread 0 copies a stage's A box and
B box (or B's 64-column atoms) into the same swizzled layouts and each thread waits on the
stage's mbarrier; the kernel keeps the cp.async loop for a dispatch whose operands do not start
on 16 bytes. Measured on the H200 (BENCHMARKS.md, "Nineteenth session"): the copies' address
arithmetic was not the limit (within 2% on most products), but a B given as [K, N] ran 18%
faster; the main loop is bound by the bytes the tiles move from L2, which only blocks sharing
tiles (a cluster's multicast) would cut.

TF32: a row of a tile is still 128 bytes, 32 f32 elements along k (the k tile is 32 deep, each
k8 step 32 bytes, so every byte offset below holds). The ISA takes TF32 operands K-major only
(no transpose), so B must be given as ``[N, K]`` (a linear layer's weight, a convolution's
filters). The tensor cores read an f32 operand's top 19 bits, which truncates; PyTorch's TF32
(and the mma.sync template, tf32.py) rounds to nearest, so each thread rounds the chunks it
copied, in shared memory, once they land (``cvt.rna.tf32.f32``) and before the proxy fence that
hands the stage to wgmma. 3xTF32 stays on mma.sync (its split terms would double the stages).

Shared layouts (PTX ISA, "matrix descriptor"; the swizzle is a function of address bits, so every
stage starts 1024-byte aligned):

- K-major (A; B given as ``[N, K]``): row r of a tile is 128 bytes (64 elements along k); its
  16-byte chunk c is stored at chunk c ^ (r % 8). Descriptor: stride byte offset 1024 (the next
  8 rows); a k16 step adds 32 bytes to the start address. For B, ``imm-trans-b`` = 0.
- N-major (B given as ``[K, N]``; the instruction transposes it, ``imm-trans-b`` = 1): 64-column
  atoms of 64 k-rows of 128 bytes, chunk c of row k stored at chunk c ^ (k % 8). Descriptor:
  leading byte offset 8192 (the next 64 columns), stride byte offset 1024 (the next 8 k-rows); a
  k16 step adds 2048 bytes.

The accumulators of warp w of a warpgroup, lane l, register i: row 16 w + l / 4 + 8 (i / 2 % 2),
column 8 (i / 4) + 2 (l % 4) + i % 2. Any M, N and K: the grid covers the output with whole
tiles, the epilogue stores what is inside. Any of them, and the batch, may be run-time sizes
(run_time_mma.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.contraction import Contraction, contraction_of
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.llvm_gpu import addressing as A
from pyree.compiler.codegen.common.llvm_gpu import dynamic
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function, Module
from pyree.compiler.codegen.common.llvm_gpu.matmul import FILL_BLOCKS, epilogue_lowering, store_element
from pyree.compiler.codegen.cuda import per_dispatch_tiles, tma
from pyree.compiler.codegen.cuda.async_copy import prologue, stage_chunks, width
from pyree.compiler.codegen.cuda.matmul_mma import Operand, Operands, operands, waves_cost
from pyree.compiler.sizes import is_static, num_elements, opaque

THREADS = 256            # two warpgroups
BM, BK = 128, 64         # BK: 16-bit elements; a tile row is 128 bytes (32 f32 elements in TF32)
ROW_CHUNKS = 8           # 16-byte chunks in a tile row
SHARED_BUDGET = 227 * 1024  # an sm_90 block's most dynamic shared memory
MOST_STAGES = 8
K_LBO, K_SBO = 16, 1024  # K-major: the leading offset is unused in this layout (one 16-byte unit)
B_LBO, B_SBO = 64 * 128, 1024  # B given N-major ([K, N])
SWIZZLE_128B = 1 << 62


@dataclass(frozen=True)
class Tile:
    bn: int

    @property
    def a_bytes(self) -> int:
        return BM * BK * 2

    @property
    def stage_bytes(self) -> int:
        return self.a_bytes + BK * self.bn * 2

    @property
    def stages(self) -> int:
        """As many as fit: a narrow tile's k step is short, so more of them must be in flight
        to cover the memory's latency."""
        return min(MOST_STAGES, (SHARED_BUDGET - 1024 - tma.SCRATCH_BYTES) // self.stage_bytes)

    @property
    def ahead(self) -> int:                 # tiles loading while two are in use
        return self.stages - 2

    @property
    def shared_bytes(self) -> int:          # + 1024 to align the first stage (+ tma's scratch)
        return self.stages * self.stage_bytes + 1024


# Widths a multiple of 32 (each thread copies whole chunks); an N-major B takes multiples of 64
# (its 64-column atoms). Ties go to the larger. A kernel with run-time sizes holds a body per
# candidate, so it takes three.
TILES = tuple(Tile(bn) for bn in range(256, 63, -32))
RUN_TIME_TILES = (Tile(256), Tile(128), Tile(64))
# Epilogue math cheap enough to unroll over a wide tile's accumulators (128 per thread at n256).
CHEAP_EPILOGUE_OPS = frozenset({"neg", "abs", "not", "sign", "floor", "ceil", "round", "roundeven",
                                "trunc"})


def choose_tile(m: int, n: int, batch: int, math_epilogue: bool = False,
                b_k_major: bool = True) -> Tile:
    """The tile with the least work on the busiest SM. An epilogue with transcendental math
    (GELU's tanh or erf) is unrolled once per accumulator, so it takes n64, which ran GPT-2's
    linear + bias + GELU about twice as fast as n256 (bench/cuda/forced_tiles.py wgmma), where a
    plain matmul is fastest at n256."""
    tiles = TILES[-1:] if math_epilogue else [t for t in TILES if b_k_major or t.bn % 64 == 0]
    return min(tiles, key=lambda t: waves_cost(m, n, batch, BM, t.bn))


def has_math_epilogue(kernel: K.Kernel) -> bool:
    return any(isinstance(e, K.Unary) and e.op not in CHEAP_EPILOGUE_OPS
               for r in kernel.results if r.epilogue is not None for e in K.walk(r.epilogue))


def plan(kernel: K.Kernel, target):
    """(contraction, (operands, tile)) when the wgmma template takes ``kernel``, else None."""
    c = contraction_of(kernel)
    found = None if c is None else tile_plan(kernel, c, target.arch, target.f32_matmul)
    return None if found is None else (c, found)


def tile_plan(kernel: K.Kernel, c: Contraction, arch: str, f32_matmul: str = "strict"):
    """(operands, tiles) when the wgmma template applies, else None: the tile ``choose_tile``
    takes, or with run-time sizes the candidates ``choose_tile`` would pick among, chosen per
    dispatch (one block a multiprocessor, as each is alone)."""
    run_time = K.has_run_time_sizes(kernel)
    if arch != "sm_90a" or (run_time and not dynamic.loop_indices(kernel)):
        return None
    found = operands(kernel, c, "tf32" if f32_matmul == "tf32" else "strict")
    par = kernel.parallel_ranges
    if found is None or (found.tf32 is not None and not (found.b.k_major and _fills(par))):
        return None
    math = has_math_epilogue(kernel)
    if run_time:
        return found, RUN_TIME_TILES[-1:] if math else RUN_TIME_TILES
    return found, (choose_tile(par[-2], par[-1], int(np.prod(par[:-2], dtype=np.int64)), math,
                               found.b.k_major),)


def _fills(par: tuple) -> bool:
    """Whether a TF32 product is large enough for wgmma: its 128 x 64 tiles (static sizes) make
    at least a block per multiprocessor. Below that mma.sync's 64-row tiles ran faster (an
    encoder block of 128 tokens 0.042 ms on mma.sync, 0.047 on wgmma; ResNet-18's convolutions at
    batch 1 the same), where a 4096^3 linear layer ran 1.39x faster on wgmma (BENCHMARKS.md,
    "Eighteenth session")."""
    if not all(is_static(d) for d in par):
        return False
    blocks = -(-par[-2] // BM) * -(-par[-1] // RUN_TIME_TILES[-1].bn) * int(np.prod(par[:-2], dtype=np.int64))
    return blocks >= FILL_BLOCKS


def _descriptor(fn: Function, address: str, lbo: int, sbo: int) -> str:
    """A shared-memory matrix descriptor for the 128B-swizzled tile at ``address`` (i32)."""
    const = SWIZZLE_128B | (sbo >> 4) << 32 | (lbo >> 4) << 16
    start = fn.op(f"and i32 {fn.op(f'lshr i32 {address}, 4')}, 16383")
    return fn.op(f"or i64 {fn.op(f'zext i32 {start} to i64')}, {const}")


def _asm_string(text: str) -> str:
    return text.replace('"', r"\22")


def _wgmma(fn: Function, n: int, dtype: str, trans_b: int, desc_a: str, desc_b: str,
           accs: list[str]) -> list[str]:
    """One ``m64n{n}k16`` (``k8`` for tf32, which takes no transpose) accumulating into
    ``accs`` (tied operands: the same registers)."""
    count = len(accs)
    ret = "{" + ", ".join(["float"] * count) + "}"
    regs = ", ".join(f"${i}" for i in range(count))
    shape, layout = ("k8", "") if dtype == "tf32" else ("k16", f", 0, {trans_b}")
    asm = (f"{{ .reg .pred p; setp.ne.b32 p, ${count + 2}, 0; "
           f"wgmma.mma_async.sync.aligned.m64n{n}{shape}.f32.{dtype}.{dtype} {{{regs}}}, ${count}, "
           f"${count + 1}, p, 1, 1{layout}; }}")
    constraints = ",".join(["=f"] * count + ["l", "l", "r"] + [str(i) for i in range(count)])
    args = [("i64", desc_a), ("i64", desc_b), ("i32", "1")] + [("float", a) for a in accs]
    out = fn.inline_asm(ret, _asm_string(asm), constraints + ",~{memory}", args)
    return [fn.op(f"extractvalue {ret} {out}, {i}") for i in range(count)]


def _wait(fn: Function, pending: int, accs: list[str]) -> list[str]:
    """``wgmma.wait_group pending``, threading the accumulators through it so that no use of
    them can be scheduled before the wait."""
    count = len(accs)
    ret = "{" + ", ".join(["float"] * count) + "}"
    constraints = ",".join(["=f"] * count + [str(i) for i in range(count)]) + ",~{memory}"
    out = fn.inline_asm(ret, f"wgmma.wait_group.sync.aligned {pending};", constraints,
                        [("float", a) for a in accs])
    return [fn.op(f"extractvalue {ret} {out}, {i}") for i in range(count)]


def _sync_asm(fn: Function, text: str) -> None:
    fn.inline_asm("void", text, "~{memory}", [])



def tensor_maps(kernel: K.Kernel, ops: Operands, t: Tile) -> list[tma.Map] | None:
    """The operands' tensor maps where the tensor memory accelerator can stage them (tma.py):
    static sizes, no batch, f16 or bf16 loads whose rows are 16-byte multiples apart, each row
    past the one before (a map takes no broadcast row, stride 0, nor overlapping or reversed
    ones), and whose views start on a 16-byte multiple; else None (cp.async)."""
    if ops.tf32 is not None or K.has_run_time_sizes(kernel) or len(kernel.parallel_ranges) != 2:
        return None
    a, b = ops.a, ops.b
    if not (isinstance(a, Operand) and isinstance(b, Operand)) or len(a.lin.coeffs) != 3:
        return None
    M, N = kernel.parallel_ranges
    KD = kernel.reduction_ranges[0]
    (am, an, ak), (bm, bn, bk) = a.lin.coeffs, b.lin.coeffs
    if an or ak != 1 or bm or (bk if b.k_major else bn) != 1:
        return None
    a_map = tma.Map(a.load.binding, a.lin.const, KD, M, 2 * am, BK, BM)
    b_map = (tma.Map(b.load.binding, b.lin.const, KD, N, 2 * bn, BK, t.bn) if b.k_major
             else tma.Map(b.load.binding, b.lin.const, N, KD, 2 * bk, 64, BK))
    maps = [a_map, b_map]
    if any(m.stride % 16 or m.stride < 2 * m.inner or m.stride >= 1 << 40 or m.offset < 0
           or m.offset % 8 or max(m.inner, m.outer) >= 1 << 31 for m in maps):
        return None
    return maps


def emit(module: Module, kernel: K.Kernel, name: str, plan) -> Launch:
    c, (ops, tiles) = plan
    par = kernel.parallel_ranges
    M, N, nb = par[-2], par[-1], num_elements(par[:-2])
    fn = Function(module)
    sizes = per_dispatch_tiles.sizes_of(fn, kernel)
    raw = module.dynamic_shared(f"{name}_smem", "i8")
    costs = [waves_cost(M, N, nb, BM, t.bn) for t in tiles]
    shared = []

    def body(t: Tile):
        maps = tensor_maps(kernel, ops, t)
        shared.append(t.shared_bytes + (tma.SCRATCH_BYTES if maps else 0))
        _tile(fn, kernel, c, ops, t, sizes, raw, maps and (name, maps))
    per_dispatch_tiles.emit_taken(fn, sizes, costs, [lambda t=t: body(t) for t in tiles])
    module.add_kernel(name, A.kernel_params(kernel, sizes), fn, THREADS, 1)
    grid_n = per_dispatch_tiles.per_dispatch([opaque("ceildiv", N, t.bn) for t in tiles], costs)
    return Launch((grid_n, opaque("ceildiv", M, BM), nb), (THREADS, 1, 1), max(shared))


def _tile(fn: Function, kernel: K.Kernel, c: Contraction, ops: Operands, t: Tile, sizes,
          raw: str, staged: tuple[str, list] | None = None) -> None:
    """The kernel's body with tile ``t``, its stages in the dynamic shared array ``raw``, staged
    by cp.async or, given ``staged`` = ``(kernel name, maps)``, by the tensor memory accelerator
    where the dispatch allows (``tma.ready``; a branch alike for the whole block at each stage,
    so that the tensor-core loop and its accumulators are written once)."""
    a, b = ops.a, ops.b
    par = kernel.parallel_ranges
    batch = par[:-2]
    M, N = par[-2:]
    KD = kernel.reduction_ranges[0]
    m_, n_, k_ = sizes(M), sizes(N), sizes(KD)
    per_chunk = width(ops.dtype)  # elements in 16 bytes: 8, or 4 in TF32
    bk = ROW_CHUNKS * per_chunk   # the k tile: a 128-byte row
    mma_dtype = "tf32" if ops.tf32 is not None else ops.dtype

    tid32 = fn.special("tid.x")
    tid = fn.op(f"zext i32 {tid32} to i64")
    lane = fn.op(f"and i32 {tid32}, 31")
    warp = fn.op(f"lshr i32 {tid32}, 5")
    wg = fn.op(f"lshr i32 {warp}, 2")
    bx, by = fn.special("ctaid.x"), fn.special("ctaid.y")
    n0 = fn.op(f"mul i64 {fn.op(f'zext i32 {bx} to i64')}, {t.bn}")
    m0 = fn.op(f"mul i64 {fn.op(f'zext i32 {by} to i64')}, {BM}")
    bz = fn.op(f"zext i32 {fn.special('ctaid.z')} to i64")
    bidx = A.decompose(fn, bz, [sizes(d) for d in batch]) if batch else []
    a_aligned, b_aligned = a.aligned(fn, sizes), b.aligned(fn, sizes)

    # shared memory, rounded up to 1024 bytes
    raw_addr = fn.op(f"ptrtoint ptr addrspace(3) {raw} to i32")
    base_addr = fn.op(f"and i32 {fn.op(f'add i32 {raw_addr}, 1023')}, -1024")
    base = fn.op(f"getelementptr i8, ptr addrspace(3) {raw}, "
                 f"i32 {fn.op(f'sub i32 {base_addr}, {raw_addr}')}")

    def k_major(rows: int):
        """This thread's chunks of a K-major rows x 64 tile: (row, k in tile, shared byte offset)."""
        out = []
        for j in range(rows * ROW_CHUNKS // THREADS):
            ch = fn.op(f"add i64 {tid}, {THREADS * j}")
            r, cc = fn.op(f"lshr i64 {ch}, 3"), fn.op(f"and i64 {ch}, 7")
            swz = fn.op(f"xor i64 {cc}, {fn.op(f'and i64 {r}, 7')}")
            s = fn.op(f"add i64 {fn.op(f'shl i64 {r}, 7')}, {fn.op(f'shl i64 {swz}, 4')}")
            out.append((r, fn.op(f"shl i64 {cc}, {per_chunk.bit_length() - 1}"), s))
        return out

    def n_major():
        """This thread's chunks of an N-major 64 x bn tile: (k in tile, n in tile, shared offset)."""
        out, per_row = [], t.bn // 8
        for j in range(BK * t.bn // 8 // THREADS):
            ch = fn.op(f"add i64 {tid}, {THREADS * j}")
            kr, nc = fn.op(f"udiv i64 {ch}, {per_row}"), fn.op(f"urem i64 {ch}, {per_row}")
            atom, cc = fn.op(f"lshr i64 {nc}, 3"), fn.op(f"and i64 {nc}, 7")
            swz = fn.op(f"xor i64 {cc}, {fn.op(f'and i64 {kr}, 7')}")
            in_atom = fn.op(f"add i64 {fn.op(f'shl i64 {kr}, 7')}, {fn.op(f'shl i64 {swz}, 4')}")
            s = fn.op(f"add i64 {fn.op(f'mul i64 {atom}, {B_LBO}')}, {in_atom}")
            out.append((kr, fn.op(f"shl i64 {nc}, 3"), s))
        return out

    a_exact = is_static(M) and is_static(KD) and M % BM == 0 and KD % bk == 0
    b_exact = is_static(N) and is_static(KD) and N % t.bn == 0 and KD % bk == 0

    def load_stage(stage: str, kt: str):
        # chunk coordinates recomputed from tid here: kept live across the loop they spill
        a_chunks, b_chunks = k_major(BM), k_major(t.bn) if b.k_major else n_major()
        k0 = fn.op(f"mul i64 {kt}, {bk}")
        stage_off = fn.op(f"mul i64 {stage}, {t.stage_bytes}")

        def dst(s):
            return fn.op(f"getelementptr i8, ptr addrspace(3) {base}, i64 {fn.op(f'add i64 {stage_off}, {s}')}")
        copies = [a.chunk(fn, bidx, (fn.op(f"add i64 {m0}, {r}"), m_), (fn.op(f"add i64 {k0}, {col}"), k_),
                          dst(s), a_exact, sizes) for r, col, s in a_chunks]
        stage_chunks(fn, a_aligned, copies)
        copies = []
        for r, col, s in b_chunks:
            n, k = (r, col) if b.k_major else (col, r)
            n, k = fn.op(f"add i64 {n0}, {n}"), fn.op(f"add i64 {k0}, {k}")
            copies.append(b.chunk(fn, bidx, (n, n_), (k, k_), dst(fn.op(f"add i64 {s}, {t.a_bytes}")),
                                  b_exact, sizes))
        stage_chunks(fn, b_aligned, copies)

    count = t.bn // 2
    slots = []
    for _ in range(count):
        slot = fn.alloca("float")
        fn.raw(f"store float 0.0, ptr {slot}")
        slots.append(slot)

    def round_stage(stage: str) -> None:
        """This thread's chunks of ``stage`` rounded to TF32 in place (both operands K-major)."""
        stage_off = fn.op(f"mul i64 {stage}, {t.stage_bytes}")
        offsets = [s for _, _, s in k_major(BM)] + \
            [fn.op(f"add i64 {s}, {t.a_bytes}") for _, _, s in k_major(t.bn)]
        for s in offsets:
            ptr = fn.op(f"getelementptr i8, ptr addrspace(3) {base}, i64 {fn.op(f'add i64 {stage_off}, {s}')}")
            v = fn.op(f"load <4 x float>, ptr addrspace(3) {ptr}, align 16")
            for i in range(4):
                x = fn.op(f"extractelement <4 x float> {v}, i32 {i}")
                r = fn.call("i32", "llvm.nvvm.f2tf32.rna", [("float", x)])
                v = fn.op(f"insertelement <4 x float> {v}, float {fn.op(f'bitcast i32 {r} to float')}, i32 {i}")
            fn.raw(f"store <4 x float> {v}, ptr addrspace(3) {ptr}, align 16")

    num_k = sizes(opaque("ceildiv", KD, bk))
    a_wg = fn.op(f"mul i32 {wg}, {64 * 128}")
    b_lbo, b_sbo, b_step = (K_LBO, K_SBO, 32) if b.k_major else (B_LBO, B_SBO, 16 * 128)

    def cp_landed(kt):
        # tile kt has landed once at most AHEAD-1 younger groups are pending
        fn.call("void", "llvm.nvvm.cp.async.wait.group", [("i32", str(t.ahead - 1))])
        if ops.tf32 is not None:
            round_stage(fn.op(f"urem i64 {kt}, {t.stages}"))
        _sync_asm(fn, "fence.proxy.async.shared::cta;")

    def cp_next(ahead):
        fn.if_then(fn.op(f"icmp ult i64 {ahead}, {num_k}"),
                   lambda: load_stage(fn.op(f"urem i64 {ahead}, {t.stages}"), ahead))
        fn.call("void", "llvm.nvvm.cp.async.commit.group", [])

    if staged is None:
        prologue(fn, t.ahead, num_k, load_stage)
        landed, stage_next = cp_landed, cp_next
    else:
        use = tma.ready(fn, staged[1])
        tma_start, tma_landed, tma_next = _tma_pipeline(fn, t, staged, base_addr, b.k_major, m0,
                                                        n0, num_k, tid32, warp, lane)
        fn.if_else(use, tma_start, lambda: prologue(fn, t.ahead, num_k, load_stage))

        def landed(kt):
            fn.if_else(use, lambda: tma_landed(kt), lambda: cp_landed(kt))

        def stage_next(ahead):
            fn.if_else(use, lambda: tma_next(ahead), lambda: cp_next(ahead))

    def step(kt):
        # after the barrier every warpgroup has retired the wgmma of tile kt-2, whose stage the
        # next load reuses
        landed(kt)
        fn.barrier()
        stage = fn.op(f"trunc i64 {fn.op(f'urem i64 {kt}, {t.stages}')} to i32")
        a_addr = fn.op(f"add i32 {fn.op(f'add i32 {base_addr}, {a_wg}')}, "
                       f"{fn.op(f'mul i32 {stage}, {t.stage_bytes}')}")
        b_addr = fn.op(f"add i32 {a_addr}, {fn.op(f'sub i32 {t.a_bytes}, {a_wg}')}")
        accs = [fn.op(f"load float, ptr {s}") for s in slots]
        _sync_asm(fn, "wgmma.fence.sync.aligned;")
        for ks in range(4):  # k16 (k8 in TF32) steps of 32 bytes
            da = _descriptor(fn, fn.op(f"add i32 {a_addr}, {ks * 32}"), K_LBO, K_SBO)
            db = _descriptor(fn, fn.op(f"add i32 {b_addr}, {ks * b_step}"), b_lbo, b_sbo)
            accs = _wgmma(fn, t.bn, mma_dtype, 0 if b.k_major else 1, da, db, accs)
        _sync_asm(fn, "wgmma.commit_group.sync.aligned;")
        # the next loads are issued while the tensor cores work on tile kt
        stage_next(fn.op(f"add i64 {kt}, {t.ahead}"))
        for s, v in zip(slots, _wait(fn, 1, accs)):
            fn.raw(f"store float {v}, ptr {s}")

    fn.loop("0", str(num_k), "1", step)
    accs = _wait(fn, 0, [fn.op(f"load float, ptr {s}") for s in slots])

    lowering = epilogue_lowering(fn, kernel, sizes)

    in_tile_row = fn.op(f"add i32 {fn.op(f'mul i32 {warp}, 16')}, {fn.op(f'lshr i32 {lane}, 2')}")
    row0 = fn.op(f"add i64 {m0}, {fn.op(f'zext i32 {in_tile_row} to i64')}")
    in_tile_col = fn.op(f"shl i32 {fn.op(f'and i32 {lane}, 3')}, 1")
    col0 = fn.op(f"add i64 {n0}, {fn.op(f'zext i32 {in_tile_col} to i64')}")
    for i, total in enumerate(accs):
        row = fn.op(f"add i64 {row0}, {8 * (i // 2 % 2)}")
        col = fn.op(f"add i64 {col0}, {8 * (i // 4) + i % 2}")
        store_element(fn, kernel, c, bidx, row, col, total, lowering, sizes)


def _tma_pipeline(fn: Function, t: Tile, staged: tuple[str, list], base_addr: str, b_k_major: bool,
                  m0: str, n0: str, num_k: int, tid: str, warp: str, lane: str):
    """``(start, landed, stage_next)`` of the main loop with the stages filled by the tensor
    memory accelerator: thread 0 issues a stage's boxes and counts their bytes on the stage's
    mbarrier, which every thread waits on (tma.py). The scratch past the stages holds the maps
    being made, then an mbarrier per stage at byte 512."""
    name, maps = staged
    scratch = fn.op(f"add i32 {base_addr}, {t.stages * t.stage_bytes}")
    first = fn.op(f"icmp eq i32 {tid}, 0")
    addrs = tma.addresses(fn, fn.module, name, len(maps))

    def bar(stage: str) -> str:      # stage: i32
        at = fn.op(f"shl i32 {stage}, 3")
        return fn.op(f"add i32 {scratch}, {fn.op(f'add i32 {at}, 512')}")

    def issue(kt: str) -> None:      # kt: i64, a tile that exists
        stage = fn.op(f"trunc i64 {fn.op(f'urem i64 {kt}, {t.stages}')} to i32")
        at, b_ = bar(stage), fn.op(f"add i32 {base_addr}, {fn.op(f'mul i32 {stage}, {t.stage_bytes}')}")
        k0 = fn.op(f"trunc i64 {fn.op(f'mul i64 {kt}, {BK}')} to i32")
        m, n = (fn.op(f"trunc i64 {v} to i32") for v in (m0, n0))
        tma.expect(fn, at, t.stage_bytes)
        tma.copy(fn, b_, addrs[0], k0, m, at)
        dst = fn.op(f"add i32 {b_}, {t.a_bytes}")
        if b_k_major:
            tma.copy(fn, dst, addrs[1], k0, n, at)
            return
        for j in range(t.bn // 64):  # 64-column atoms
            tma.copy(fn, fn.op(f"add i32 {dst}, {j * B_LBO}"), addrs[1],
                     fn.op(f"add i32 {n}, {64 * j}"), k0, at)

    def start():
        tma.make(fn, maps, addrs, scratch, warp, lane)
        fn.if_then(first, lambda: tma.init_barriers(fn, [bar(str(s)) for s in range(t.stages)]))
        fn.barrier()

        def issue_first():
            tma.acquire(fn, addrs)
            for kt in range(min(t.ahead, num_k)):
                issue(str(kt))
        fn.if_then(first, issue_first)

    def landed(kt: str) -> None:
        stage = fn.op(f"trunc i64 {fn.op(f'urem i64 {kt}, {t.stages}')} to i32")
        use = fn.op(f"udiv i64 {kt}, {t.stages}")
        parity = fn.op(f"trunc i64 {fn.op(f'and i64 {use}, 1')} to i32")
        tma.wait(fn, bar(stage), parity)

    def stage_next(ahead: str) -> None:
        fn.if_then(fn.op(f"and i1 {first}, {fn.op(f'icmp ult i64 {ahead}, {num_k}')}"),
                   lambda: issue(ahead))
    return start, landed, stage_next
