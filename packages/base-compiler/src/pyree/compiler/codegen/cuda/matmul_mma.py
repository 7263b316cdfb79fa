"""f16 x f16 -> f32 contractions on tensor cores: mma.sync.m16n8k16 (sm_80+), for whole tiles.

Block tiles of 128x256 or 128x128 and k depth 64 or 32 (first fit of ``TILES``), 8 warps as
2 x 4, so each warp owns a 64x64 (64x32) tile: per k16 step 8 (6) ldmatrix feed 32 (16) MMAs.
Tiles move global -> shared with cp.async (16 bytes per copy), 3 or 4 stages deep in dynamic
shared memory, so the next tiles load while the tensor cores work; fragments come out of shared
memory with ldmatrix (``.trans`` for B), from rows padded by 16 bytes so that the eight row
addresses of an ldmatrix hit distinct banks. A uniform branch checks the binding pointers' 16-byte alignment at
run time and otherwise stages with scalar loads, so a misaligned binding is slower, never wrong.

Used when M and N are multiples of 128, K of 32, and both operands are f16 loads, contiguous along
k (A) and n (B); everything else takes the SIMT template in matmul.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pyree.compiler import kernel as K
from pyree.compiler.codegen.cuda import addressing as A
from pyree.compiler.codegen.cuda.async_copy import bindings_aligned, stage_chunks
from pyree.compiler.codegen.cuda.llvm_text import Function, Module
from pyree.compiler.codegen.cuda.matmul import Contraction, epilogue_lowering, store_element

THREADS = 256                                 # 8 warps as 2 (m) x 4 (n)


@dataclass(frozen=True)
class Tile:
    bm: int
    bn: int
    bk: int
    stages: int                               # cp.async pipeline depth
    min_blocks: int                           # blocks per SM the register budget allows

    @property
    def a_stride(self) -> int:                # padded shared rows, in halfs
        return self.bk + 8

    @property
    def b_stride(self) -> int:
        return self.bn + 8

    @property
    def a_stage(self) -> int:
        return self.bm * self.a_stride

    @property
    def b_stage(self) -> int:
        return self.bk * self.b_stride

    @property
    def shared_bytes(self) -> int:            # dynamic: over the 48 KiB static limit
        return self.stages * (self.a_stage + self.b_stage) * 2


# First fit wins. 128x256 gives each warp a 64x64 tile (32 MMAs per 8 ldmatrix per k16 step);
# bk=64 halves the barriers per FLOP. Shared memory per SM (227 KiB) bounds stages x blocks.
TILES = (Tile(128, 256, 64, 3, 1), Tile(128, 128, 64, 3, 2),
         Tile(128, 256, 32, 3, 1), Tile(128, 128, 32, 4, 2))


def _f16_load(e: K.Expr) -> K.Load | None:
    if isinstance(e, K.Cast) and e.op == "fpext" and isinstance(e.x, K.Load) and e.x.dtype == "f16":
        return e.x
    return None


def operands(kernel: K.Kernel, c: Contraction):
    """(A load, B load, their Linear offsets) when both operands are f16 loads, A contiguous
    along k and B along n with 16-byte aligned rows (given aligned bindings), else None."""
    if c.dtype != "f32":
        return None
    a, b = _f16_load(c.x), _f16_load(c.y)
    if a is None or b is None:
        return None
    n_loops = len(kernel.loop_ranges)
    m, n, k = kernel.num_parallel - 2, kernel.num_parallel - 1, kernel.num_parallel
    la = A.linearize(kernel.bindings[a.binding], a.index, n_loops)
    lb = A.linearize(kernel.bindings[b.binding], b.index, n_loops)
    batch = range(kernel.num_parallel - 2)
    if not (la.coeffs[k] == 1 and la.coeffs[n] == 0 and la.const % 8 == 0
            and all(la.coeffs[l] % 8 == 0 for l in [m, *batch])):
        return None
    if not (lb.coeffs[n] == 1 and lb.coeffs[m] == 0 and lb.const % 8 == 0
            and all(lb.coeffs[l] % 8 == 0 for l in [k, *batch])):
        return None
    return a, b, la, lb


def plan(kernel: K.Kernel, c: Contraction, sm: int):
    """(A load, B load, their Linear offsets, tile) when the tensor-core template applies."""
    if sm < 80:
        return None
    found = operands(kernel, c)
    if found is None:
        return None
    M, N = kernel.parallel_ranges[-2:]
    KD = kernel.reduction_ranges[0]
    tile = next((t for t in TILES if M % t.bm == 0 and N % t.bn == 0 and KD % t.bk == 0), None)
    if tile is None:
        return None
    return (*found, tile)


def emit(module: Module, kernel: K.Kernel, name: str, c: Contraction, plan_) -> A.Launch:
    a, b, la, lb, t = plan_
    mts, nts = t.bm // 2 // 16, t.bn // 4 // 8  # MMA tiles per warp along m and n
    wm_size, wn_size = t.bm // 2, t.bn // 4
    par = kernel.parallel_ranges
    batch = par[:-2]
    M, N = par[-2:]
    KD = kernel.reduction_ranges[0]
    nb = int(np.prod(batch, dtype=np.int64))
    fn = Function(module)
    a_sh = module.dynamic_shared(f"{name}_smem", "half")
    b_sh = fn.op(f"getelementptr half, ptr addrspace(3) {a_sh}, i64 {t.stages * t.a_stage}")

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
    bidx = A.decompose(fn, bz, batch) if batch else []
    aligned = bindings_aligned(fn, (a.binding, b.binding))

    def chunks(kt: str):
        """(global element pointer, dtype, shared array, shared offset) of this thread's 4 copies."""
        k0 = fn.op(f"mul i64 {kt}, {t.bk}")
        out = []
        for j in range(t.bm * t.bk // 8 // THREADS):
            ch = fn.op(f"add i64 {tid}, {THREADS * j}")
            r = fn.op(f"udiv i64 {ch}, {t.bk // 8}")
            kc = fn.op(f"shl i64 {fn.op(f'urem i64 {ch}, {t.bk // 8}')}, 3")
            loop = bidx + [fn.op(f"add i64 {m0}, {r}"), 0, fn.op(f"add i64 {k0}, {kc}")]
            g = A.element_ptr(fn, f"%b{a.binding}", "f16", A.offset(fn, la, loop))
            rowoff = fn.op(f"mul i64 {r}, {t.a_stride}")
            out.append((g, a_sh, fn.op(f"add i64 {rowoff}, {kc}"), t.a_stage))
        per_row = t.bn // 8
        for j in range(t.bn * t.bk // 8 // THREADS):
            ch = fn.op(f"add i64 {tid}, {THREADS * j}")
            kr = fn.op(f"udiv i64 {ch}, {per_row}")
            nc = fn.op(f"shl i64 {fn.op(f'urem i64 {ch}, {per_row}')}, 3")
            loop = bidx + [0, fn.op(f"add i64 {n0}, {nc}"), fn.op(f"add i64 {k0}, {kr}")]
            g = A.element_ptr(fn, f"%b{b.binding}", "f16", A.offset(fn, lb, loop))
            rowoff = fn.op(f"mul i64 {kr}, {t.b_stride}")
            out.append((g, b_sh, fn.op(f"add i64 {rowoff}, {nc}"), t.b_stage))
        return out

    def load_stage(stage: str, kt: str):
        copies = chunks(kt)
        targets = []
        for g, arr, off, size in copies:
            full = fn.op(f"add i64 {fn.op(f'mul i64 {stage}, {size}')}, {off}")
            targets.append((g, fn.op(f"getelementptr half, ptr addrspace(3) {arr}, i64 {full}")))
        stage_chunks(fn, aligned, targets)

    accs = []
    for _ in range(mts * nts * 4):
        slot = fn.alloca("float")
        fn.raw(f"store float 0.0, ptr {slot}")
        accs.append(slot)

    lane_row = fn.op(f"and i32 {lane}, 15")                        # ldmatrix row of this lane
    lane_col = fn.op(f"shl i32 {fn.op(f'lshr i32 {lane}, 4')}, 3")  # 0 or 8

    def ldmatrix(arr: str, offset: str, trans: bool) -> list[str]:
        p = fn.op(f"getelementptr half, ptr addrspace(3) {arr}, i32 {offset}")
        kind = "trans.b16" if trans else "b16"
        r = fn.call("{i32, i32, i32, i32}", f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.{kind}",
                    [("ptr addrspace(3)", p)])
        parts = [fn.op(f"extractvalue {{i32, i32, i32, i32}} {r}, {i}") for i in range(4)]
        return [fn.op(f"bitcast i32 {p} to <2 x half>") for p in parts]

    def compute(stage: str, olds: list[str]) -> list[str]:
        st = fn.op(f"trunc i64 {stage} to i32")
        a_base = fn.op(f"mul i32 {st}, {t.a_stage}")
        b_base = fn.op(f"mul i32 {st}, {t.b_stage}")
        for ks in range(t.bk // 16):
            afr = []
            for mt in range(mts):
                in_warp = fn.op(f"add i32 {lane_row}, {mt * 16}")
                row = fn.op(f"add i32 {fn.op(f'mul i32 {wm}, {wm_size}')}, {in_warp}")
                col = fn.op(f"add i32 {lane_col}, {ks * 16}")
                rowoff = fn.op(f"mul i32 {row}, {t.a_stride}")
                off = fn.op(f"add i32 {a_base}, {fn.op(f'add i32 {rowoff}, {col}')}")
                afr.append(ldmatrix(a_sh, off, False))
            bfr = []
            for np_ in range(nts // 2):
                krow = fn.op(f"add i32 {lane_row}, {ks * 16}")
                in_warp = fn.op(f"add i32 {lane_col}, {np_ * 16}")
                ncol = fn.op(f"add i32 {fn.op(f'mul i32 {wn}, {wn_size}')}, {in_warp}")
                rowoff = fn.op(f"mul i32 {krow}, {t.b_stride}")
                off = fn.op(f"add i32 {b_base}, {fn.op(f'add i32 {rowoff}, {ncol}')}")
                r = ldmatrix(b_sh, off, True)
                bfr += [(r[0], r[1]), (r[2], r[3])]
            new = []
            for mt in range(mts):
                for nt in range(nts):
                    base = (mt * nts + nt) * 4
                    args = [("<2 x half>", x) for x in afr[mt]] + [("<2 x half>", x) for x in bfr[nt]]
                    args += [("float", olds[base + i]) for i in range(4)]
                    d = fn.call("{float, float, float, float}",
                                "llvm.nvvm.mma.m16n8k16.row.col.f32.f32", args)
                    new += [fn.op(f"extractvalue {{float, float, float, float}} {d}, {i}")
                            for i in range(4)]
            olds = new
        return olds

    num_k = KD // t.bk
    for kt in range(min(t.stages - 1, num_k)):  # prologue: the first stages-1 tiles in flight
        load_stage(str(kt), str(kt))
        fn.call("void", "llvm.nvvm.cp.async.commit.group", [])
    for _ in range(t.stages - 1 - min(t.stages - 1, num_k)):
        fn.call("void", "llvm.nvvm.cp.async.commit.group", [])

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
        for s, v in zip(accs, compute(fn.op(f"urem i64 {kt}, {t.stages}"), olds)):
            fn.raw(f"store float {v}, ptr {s}")

    fn.loop("0", str(num_k), "1", step)

    lowering = epilogue_lowering(fn, kernel)

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
                store_element(fn, kernel, c, bidx, row, col, total, lowering)
    module.add_kernel(name, A.kernel_params(kernel), fn, THREADS, t.min_blocks)
    return A.Launch((N // t.bn, M // t.bm, nb), (THREADS, 1, 1), t.shared_bytes)
