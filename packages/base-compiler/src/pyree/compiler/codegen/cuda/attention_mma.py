"""Softmax attention (``kernel.Attention``) on tensor cores, FlashAttention-2 on ``mma.sync``
m16n8k16 (sm_80+), where q, k and v are f16 (bf16) loads and a batch-head has at least 16 query
rows; attention.py's SIMT kernel takes every other case.

A block of four warps takes 64 query rows of one batch-head, each warp 16 of them. Q's tile is
staged once in shared memory and held as A fragments in registers (ldmatrix); K's and V's tiles
of 64 keys stream through shared memory in two stages (async_copy.py: cp.async, tails
zero-filled), the next tile loading while the tensor cores work on this one. Per tile a warp
computes S = Q K^T in f32 fragments, times the product of q's and k's constant factors (torch
scales q and k each by the square root of the softmax scale: folded into one multiply), then
the op's score expression per fragment element at its (row, key) (scale, masks as expressions
of the loops and loads, evaluated everywhere: no tile is skipped unseen, since a NaN product
above a causal diagonal makes the chain's row NaN). Where every score of a warp's tile is -inf
(a causal tile past the diagonal) its softmax is passed over, exactly: the maximum, the sum and
O stay, and P = 0 still multiplies V (0 * inf is NaN there as in the chain). Else the online
softmax runs per row in registers (the row's maximum over the quad of lanes holding it, by
shuffles; each lane sums its own weights, the quad's sums added at the end), the weights,
rounded to the operand type, are the A fragments of P V (V through ``ldmatrix.trans``), and O,
rescaled as the maximum grows, is divided by l and stored through the op's epilogue. Rows past M
and keys past T are zeros in shared memory; a key past T scores -inf, a row past M is not
stored, and both are evaluated at the last row (key) so that a mask's loads stay inside their
operand.

The query rows, the keys and the batch may be run-time sizes (a prompt's length; flow/attention.py
forms such an op only for this template): they are then the kernel's values, every tail is
guarded and clamped as an uneven static size's is, an operand's run-time strides are checked per
dispatch for 16-byte chunks (else scalar copies, as for an unaligned binding), and the grid is a
size. With no keys at all O is its init, as the chain's empty product; the head dims stay static.

Special values follow attention.py's rules with one difference, FlashAttention's: P is rounded
to the operand type before P V even where the chain keeps it in f32 (docs/DESIGN.md). So the
weights exp(s - m) come, as in FlashAttention, from the special-function unit's ``ex2.approx``
(of (s - m) * log2 e: relative error about 2^-22, against 2^-9 (bf16) to 2^-11 (f16) for the
rounding that follows); the sum l adds them unrounded, and the rescale factors exp(m_old - m),
one per row and tile, stay exact. ex2 keeps -inf -> 0, NaN -> NaN and inf -> inf, so the special
values land where the exact exp puts them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np
from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.addressing import Linear, ceil_div, linearize
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.llvm_gpu import addressing as A
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function, Module, const
from pyree.compiler.codegen.common.llvm_gpu.reduction import shuffle_xor
from pyree.compiler.codegen.common.llvm_gpu.scalar import ScalarLowering
from pyree.compiler.codegen.cuda import per_dispatch_tiles
from pyree.compiler.codegen.cuda.async_copy import chunk, stage_chunks
from pyree.compiler.codegen.cuda.attention import ALPHA, NEW_MAX
from pyree.compiler.codegen.cuda.matmul_mma import (
    TC_DTYPES,
    chunked,
    fragment_type,
    ldmatrix,
    mma_m16n8k16,
)
from pyree.compiler.errors import CompileError
from pyree.compiler.sizes import is_static, num_elements, opaque

WARPS = 4
THREADS = 32 * WARPS
ROWS = 16 * WARPS   # query rows per block, 16 a warp
KEYS = ROWS         # keys per tile (``stage`` copies tiles of ROWS rows)
MIN_ROWS = 16       # fewer query rows per batch-head leave the MMA's rows mostly empty
MAX_DIM = 256       # head dims whose fragments fit in registers
PAD = 8             # elements after each shared row: ldmatrix's 8 row addresses hit distinct banks
CHUNK = 8           # f16 (bf16) elements per 16-byte copy

LOG2E = math.log2(math.e)


@dataclass(frozen=True)
class Tile:
    """An operand staged in shared memory: its load, address, and the loop it is contiguous
    along."""
    load: K.Load
    lin: Linear
    inner: int
    vector: bool    # 16-byte chunks are aligned if the binding is (and ``strides`` are)
    strides: tuple  # run-time strides that must be multiples of a chunk, checked per dispatch


@dataclass(frozen=True)
class Plan:
    q: Tile
    k: Tile
    v: Tile
    dtype: str
    scale: float | None  # the product of q's and k's constant factors (None: 1)


def _constant(x: K.Expr) -> float | None:
    """The f32 value of a constant (a float constant rounded to f32), or None."""
    if isinstance(x, K.Cast) and x.op in ("fptrunc", "fpext") and x.dtype == "f32":
        x = x.x
    if isinstance(x, K.Const) and x.dtype in ("f32", "f64"):
        return float(np.float32(x.value))
    return None


def _factor(x: K.Expr) -> tuple[K.Load, float] | None:
    """``x`` as (an f16 (bf16) load, the finite nonzero constant it is multiplied by in f32)."""
    if isinstance(x, K.Cast) and x.op == "fpext" and isinstance(x.x, K.Load) \
            and x.x.dtype in TC_DTYPES:
        return x.x, 1.0
    if isinstance(x, K.Binary) and x.op == "mul" and x.dtype == "f32":
        for y, c in ((x.a, x.b), (x.b, x.a)):
            inner, value = _factor(y), _constant(c)
            if inner is not None and inner[1] == 1.0 and value is not None \
                    and math.isfinite(value) and value != 0:
                return inner[0], value
    return None


def _tile(kernel: K.Kernel, load: K.Load, unread: tuple[int, ...], inner: int) -> Tile | None:
    n = len(kernel.loop_ranges)
    lin = linearize(kernel.bindings[load.binding], load.index, n)
    if lin.coeffs[inner] != 1 or not all(is_static(lin.coeffs[d]) and lin.coeffs[d] == 0
                                         for d in unread):
        return None
    return Tile(load, lin, inner, *chunked(lin, inner, CHUNK, range(n)))


def plan(kernel: K.Kernel, target) -> Plan | None:
    """The tiles when the tensor-core template takes ``kernel``: q(row, c) and k(key, c)
    contiguous along c and v(key, e) along e, one f16 or bf16 type, P rounded to it or kept in
    f32, at least 16 rows per batch-head, head dims up to 256; else None."""
    att = kernel.attention
    if att is None or att.partial or target.sm < 80 or len(kernel.results) != 1:
        return None
    e = att.e
    i, j, c = e - 1, e + 1, e + 2
    par = kernel.parallel_ranges
    if e < 1 or len(kernel.loop_ranges) != e + 3 or (is_static(par[i]) and par[i] < MIN_ROWS):
        return None  # (run-time rows: any number)
    keys, depth = kernel.reduction_ranges
    if not (is_static(depth) and is_static(par[e])) or depth > MAX_DIM or par[e] > MAX_DIM \
            or not _static_indices(kernel):
        return None
    folds = K.fold_pattern((K.Result(0, (), att.score_step),))
    product = K.fold_product(folds[0]) if folds else None
    value = kernel.results[0].value
    if product is None or not (isinstance(value, K.Cast) and value.op == "fpext"
                               and isinstance(value.x, K.Load)):
        return None
    v = _tile(kernel, value.x, (i, c), e)
    for x, y in ((product.a, product.b), (product.b, product.a)):
        fq, fk = _factor(x), _factor(y)
        if fq is None or fk is None:
            continue
        q, k = _tile(kernel, fq[0], (e, j), c), _tile(kernel, fk[0], (i, e), c)
        if q is None or k is None or v is None:
            continue
        dtype = q.load.dtype
        if k.load.dtype != dtype or v.load.dtype != dtype or att.p_dtype not in ("f32", dtype):
            return None
        scale = float(np.float32(fq[1] * fk[1]))
        return Plan(q, k, v, dtype, None if scale == 1.0 else scale)
    return None


def taker(target):
    """The predicate ``Backend.run_time_attention`` gives flow/attention.py: whether this
    template takes an attention kernel (the only one with run-time sizes); None before sm_80."""
    return None if target.sm < 80 else (lambda kernel: plan(kernel, target) is not None)


def _static_indices(kernel: K.Kernel) -> bool:
    """Whether every index the kernel reads or stores at has int coefficients and offsets."""
    nodes = (*K.attention_nodes(kernel.attention), *K.result_nodes(kernel.results[0]))
    indices = [*kernel.results[0].index,
               *(ix for x in nodes if isinstance(x, (K.Load, K.Gather)) for ix in x.index)]
    return all(is_static(v) for ix in indices for v in (*ix.coeffs, ix.const))


def _accesses(kernel: K.Kernel) -> K.Kernel:
    """A plain kernel of the same loops and bindings whose one fold reads every element the
    attention kernel reads (over the whole loop box: a superset), for the traps on run-time
    sizes that would take an access outside its binding (``per_dispatch_tiles.sizes_of``)."""
    out = kernel.results[0]
    reads = [x for x in (*K.attention_nodes(kernel.attention), *K.result_nodes(out))
             if isinstance(x, (K.Load, K.Gather))]
    dtype = "f32" if out.epilogue is not None else kernel.bindings[out.binding].dtype
    value = functools.reduce(lambda a, b: K.Binary("add", a, b, dtype), reads, K.Acc(0, dtype))
    return replace(kernel, attention=None, results=(
        replace(out, value=value, init=K.Const(0.0, dtype)),))


def _reads(e: K.Expr, loops: tuple[int, ...]) -> bool:
    return any((isinstance(x, K.Load) and any(ix.coeffs[d] for ix in x.index for d in loops))
               or (isinstance(x, K.LoopIndex) and x.dim in loops)
               or isinstance(x, (K.Gather, K.Acc, K.Final)) for x in K.walk(e))


def emit(module: Module, kernel: K.Kernel, name: str, plan: Plan) -> Launch:
    att, out = kernel.attention, kernel.results[0]
    e = att.e
    par = kernel.parallel_ranges
    batch, rows, width = par[:e - 1], par[e - 1], par[e]
    keys, depth = kernel.reduction_ranges
    dp, ep = 16 * ceil_div(depth, 16), 16 * ceil_div(width, 16)  # padded with zeros
    qk_stride, v_stride = dp + PAD, ep + PAD
    q_size, k_size, v_size = ROWS * qk_stride, KEYS * qk_stride, KEYS * v_stride
    k_at, v_at = q_size, q_size + 2 * k_size  # two stages each
    row_tiles = opaque("ceildiv", rows, ROWS)
    nb = num_elements(batch)
    if is_static(row_tiles * nb) and row_tiles * nb >= 2**31:
        raise CompileError(f"attention with {row_tiles * nb} blocks of query rows exceeds the GPU grid",
                           kernel.location)
    half2 = fragment_type(plan.dtype)
    elem = "half" if plan.dtype == "f16" else "bfloat"
    n = len(kernel.loop_ranges)
    fn = Function(module)
    sizes = per_dispatch_tiles.sizes_of(fn, kernel, _accesses(kernel))
    m_tiles, n_tiles = sizes(row_tiles), sizes(opaque("ceildiv", keys, KEYS))
    rows_v, keys_v = sizes(rows), sizes(keys)
    smem = module.dynamic_shared(f"{name}_smem", "half")

    def lowering(loop: list, states: dict | None = None) -> ScalarLowering:
        def load(x: K.Load) -> str:
            lin = A.emitted(linearize(kernel.bindings[x.binding], x.index, n), sizes)
            ptr = A.element_ptr(fn, f"%b{x.binding}", x.dtype, A.offset(fn, lin, loop))
            return A.load(fn, ptr, x.dtype)
        return ScalarLowering(fn, load, lambda d: loop[d],
                              None if states is None else states.__getitem__, kernel.location, kernel)

    tid32 = fn.special("tid.x")
    tid = fn.op(f"zext i32 {tid32} to i64")
    lane = fn.op(f"and i32 {tid32}, 31")
    warp = fn.op(f"lshr i32 {tid32}, 5")
    block = fn.op(f"zext i32 {fn.special('ctaid.x')} to i64")
    m0 = fn.op(f"mul i64 {fn.op(f'urem i64 {block}, {m_tiles}')}, {ROWS}")
    bidx = A.decompose(fn, fn.op(f"udiv i64 {block}, {m_tiles}"), [sizes(d) for d in batch]) \
        if batch else []
    zeros = bidx + [0] * 4
    everywhere = lowering(zeros)  # what reads no loop but the batch's, lowered once
    invariant = {x: everywhere(x) for x in K.walk(att.score)
                 if isinstance(x, K.Load) and not _reads(x, (e - 1, e, e + 1, e + 2))}

    def stage(tile: Tile, first: str, extent: int, cols: int, padded: int, stride: int,
              base: str, loop_at) -> None:
        """Rows first .. first + ROWS - 1 of ``tile`` (of ``extent``; columns ``cols`` of
        ``padded``) into shared memory at element ``base``, rows ``stride`` apart."""
        per_row = padded // CHUNK
        copies = []
        for s in range(ROWS * per_row // THREADS):
            ch = fn.op(f"add i64 {tid}, {THREADS * s}")
            r = fn.op(f"udiv i64 {ch}, {per_row}")
            col = fn.op(f"mul i64 {fn.op(f'urem i64 {ch}, {per_row}')}, {CHUNK}")
            within = fn.op(f"add i64 {fn.op(f'mul i64 {r}, {stride}')}, {col}")
            at = fn.op(f"add i64 {base}, {within}")
            dst = fn.op(f"getelementptr half, ptr addrspace(3) {smem}, i64 {at}")
            copies.append(chunk(fn, tile.load.binding, tile.load.dtype, A.emitted(tile.lin, sizes),
                                loop_at, fn.op(f"add i64 {first}, {r}"), sizes(extent), col, cols,
                                dst, is_static(extent) and extent % ROWS == 0 and cols == padded))
        aligned = A.bindings_aligned(fn, (tile.load.binding,)) if tile.vector else "false"
        for s in tile.strides if tile.vector else ():
            whole = fn.op(f"icmp eq i64 {fn.op(f'and i64 {sizes(s)}, {CHUNK - 1}')}, 0")
            aligned = fn.op(f"and i1 {aligned}, {whole}")
        stage_chunks(fn, aligned, copies)

    def load_keys(slot: str, kt: str) -> None:
        j0 = fn.op(f"mul i64 {kt}, {KEYS}")
        stage(plan.k, j0, keys, depth, dp, qk_stride,
              fn.op(f"add i64 {fn.op(f'mul i64 {slot}, {k_size}')}, {k_at}"),
              lambda r, col: bidx + [0, 0, r, col])
        stage(plan.v, j0, keys, width, ep, v_stride,
              fn.op(f"add i64 {fn.op(f'mul i64 {slot}, {v_size}')}, {v_at}"),
              lambda r, col: bidx + [0, col, r, 0])

    def commit() -> None:
        fn.call("void", "llvm.nvvm.cp.async.commit.group", [])

    def wait() -> None:
        fn.call("void", "llvm.nvvm.cp.async.wait.group", [("i32", "0")])
        fn.barrier()

    stage(plan.q, m0, rows, depth, dp, qk_stride, "0", lambda r, col: bidx + [r, 0, 0, col])
    load_keys("0", "0")
    commit()
    wait()

    def offset(base, row: str, stride: int, col: str) -> str:
        within = fn.op(f"add i32 {fn.op(f'mul i32 {row}, {stride}')}, {col}")
        return fn.op(f"add i32 {base}, {within}")

    lane_row = fn.op(f"and i32 {lane}, 15")
    lane_col = fn.op(f"shl i32 {fn.op(f'lshr i32 {lane}, 4')}, 3")
    # K as an [N, K] B: matrices (keys 0-7, c 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15)
    lane_key = fn.op(f"add i32 {fn.op(f'and i32 {lane}, 7')}, {lane_col}")
    lane_c = fn.op(f"and i32 {lane}, 8")
    q_row = fn.op(f"add i32 {fn.op(f'mul i32 {warp}, 16')}, {lane_row}")
    q_frags = [ldmatrix(fn, smem, "half", offset("0", q_row, qk_stride,
                                                 fn.op(f"add i32 {lane_col}, {ks * 16}")), False, half2)
               for ks in range(dp // 16)]

    g = fn.op(f"zext i32 {fn.op(f'lshr i32 {lane}, 2')} to i64")
    quad = fn.op(f"and i32 {lane}, 3")
    t2 = fn.op(f"zext i32 {fn.op(f'shl i32 {quad}, 1')} to i64")  # this lane's first column
    warp_row = fn.op(f"mul i32 {warp}, 16")
    warp_rows = fn.op(f"add i64 {m0}, {fn.op(f'zext i32 {warp_row} to i64')}")
    my_rows = [fn.op(f"add i64 {warp_rows}, {fn.op(f'add i64 {g}, {8 * h}')}") for h in (0, 1)]
    last_row = rows - 1 if is_static(rows) else fn.op(f"sub i64 {rows_v}, 1")
    at_rows = [fn.call("i64", "llvm.umin.i64", [("i64", r), ("i64", str(last_row))])
               if _uneven(rows, ROWS) else r for r in my_rows]  # a row past M scores at the last row

    def slots(count: int, value: float) -> list[str]:
        out = []
        for _ in range(count):
            out.append(fn.alloca("float"))
            fn.raw(f"store float {const(value, 'f32')}, ptr {out[-1]}")
        return out

    m_slots, l_slots = slots(2, float("-inf")), slots(2, 0.0)
    o_slots = slots(ep // 8 * 4, 0.0)
    zero = const(0.0, "f32")
    minus_inf = const(float("-inf"), "f32")

    def softmax_state(states: dict, expr: K.Expr) -> str:
        return lowering(zeros, states)(expr)

    def weight(score: str, m: str, dead: str) -> str:
        """exp(score - m) on the special-function unit (see the module's docstring)."""
        x = fn.op(f"fmul float {fn.op(f'fsub float {score}, {m}')}, {const(LOG2E, 'f32')}")
        e = fn.call("float", "llvm.nvvm.ex2.approx.f", [("float", x)])
        return fn.op(f"select i1 {dead}, float {zero}, float {e}")

    def step(kt: str) -> None:
        wait()  # tile kt has landed, and every warp is done with tile kt - 1's stage
        ahead = fn.op(f"add i64 {kt}, 1")
        fn.if_then(fn.op(f"icmp ult i64 {ahead}, {n_tiles}"),
                   lambda: load_keys(fn.op(f"and i64 {ahead}, 1"), ahead))
        commit()
        slot = fn.op(f"trunc i64 {fn.op(f'and i64 {kt}, 1')} to i32")
        k_base = fn.op(f"add i32 {fn.op(f'mul i32 {slot}, {k_size}')}, {k_at}")
        v_base = fn.op(f"add i32 {fn.op(f'mul i32 {slot}, {v_size}')}, {v_at}")
        s = [[zero] * 4 for _ in range(KEYS // 8)]
        for ks in range(dp // 16):
            for pair in range(KEYS // 16):
                r = ldmatrix(fn, smem, "half", offset(k_base, fn.op(f"add i32 {lane_key}, {16 * pair}"),
                                                      qk_stride, fn.op(f"add i32 {lane_c}, {16 * ks}")),
                             False, half2)
                for h, b in enumerate(((r[0], r[1]), (r[2], r[3]))):
                    s[2 * pair + h] = mma_m16n8k16(fn, plan.dtype, q_frags[ks], b, s[2 * pair + h])
        first_key = fn.op(f"add i64 {fn.op(f'mul i64 {kt}, {KEYS}')}, {t2}")
        last_key = keys - 1 if is_static(keys) else fn.op(f"sub i64 {keys_v}, 1")
        for nt in range(KEYS // 8):
            for x in range(4):
                key = fn.op(f"add i64 {first_key}, {8 * nt + (x & 1)}")
                at_key = fn.call("i64", "llvm.umin.i64", [("i64", key), ("i64", str(last_key))]) \
                    if _uneven(keys, KEYS) else key
                loop = bidx + [at_rows[x >> 1], 0, at_key, 0]
                acc = s[nt][x]
                if plan.scale is not None:
                    acc = fn.op(f"fmul float {acc}, {const(plan.scale, 'f32')}")
                if att.score_init != K.Const(0.0, "f32"):
                    acc = fn.op(f"fadd float {lowering(loop)(att.score_init)}, {acc}")
                score = lowering(loop, {0: acc})
                score.cache.update(invariant)
                value = score(att.score)
                if _uneven(keys, KEYS):
                    inside = fn.op(f"icmp ult i64 {key}, {keys_v}")
                    value = fn.op(f"select i1 {inside}, float {value}, float {minus_inf}")
                s[nt][x] = value
        a_slots = [fn.alloca(half2) for _ in range(KEYS // 16 * 4)]  # P's A fragments

        def live() -> None:
            p = [[""] * 4 for _ in range(KEYS // 8)]
            for h in (0, 1):  # this lane's rows g and g + 8
                top = s[0][2 * h]
                for nt in range(KEYS // 8):
                    for x in (2 * h, 2 * h + 1):
                        if (nt, x) != (0, 2 * h):
                            top = everywhere._binary("max", top, s[nt][x], "f32")
                for mask in (1, 2):  # the quad of lanes holding the row
                    top = everywhere._binary("max", top, shuffle_xor(fn, top, "float", mask), "f32")
                m_old = fn.op(f"load float, ptr {m_slots[h]}")
                m = softmax_state({0: top, 1: m_old}, NEW_MAX)
                alpha = softmax_state({1: m_old, 2: m}, ALPHA)
                total = None
                dead = fn.op(f"fcmp oeq float {m}, {minus_inf}")  # no score above -inf yet: weights 0
                for nt in range(KEYS // 8):
                    for x in (2 * h, 2 * h + 1):
                        w = weight(s[nt][x], m, dead)
                        total = w if total is None else fn.op(f"fadd float {total}, {w}")
                        p[nt][x] = fn.op(f"fptrunc float {w} to {elem}")
                l_old = fn.op(f"load float, ptr {l_slots[h]}")
                kept = fn.op(f"fmul float {l_old}, {alpha}")
                fn.raw(f"store float {fn.op(f'fadd float {kept}, {total}')}, ptr {l_slots[h]}")
                fn.raw(f"store float {m}, ptr {m_slots[h]}")
                for nt in range(ep // 8):
                    for x in (2 * h, 2 * h + 1):
                        o = fn.op(f"load float, ptr {o_slots[4 * nt + x]}")
                        fn.raw(f"store float {fn.op(f'fmul float {o}, {alpha}')}, ptr {o_slots[4 * nt + x]}")
            for ks in range(KEYS // 16):  # P's C fragments of keys 16 ks .. are its A fragment
                for k, (hi, lo) in enumerate(((0, 0), (0, 2), (1, 0), (1, 2))):
                    v = fn.op(f"insertelement <2 x {elem}> undef, {elem} {p[2 * ks + hi][lo]}, i32 0")
                    v = fn.op(f"insertelement <2 x {elem}> {v}, {elem} {p[2 * ks + hi][lo + 1]}, i32 1")
                    if half2 == "i32":
                        v = fn.op(f"bitcast <2 x {elem}> {v} to i32")
                    fn.raw(f"store {half2} {v}, ptr {a_slots[4 * ks + k]}")

        def masked() -> None:  # m, l and O as they were; P 0 (0 * v still reaches O)
            for slot in a_slots:
                fn.raw(f"store {half2} zeroinitializer, ptr {slot}")

        every = None  # whether each of the warp's scores is -inf: the softmax then changes nothing
        for row in s:
            for value in row:
                here = fn.op(f"fcmp oeq float {value}, {minus_inf}")
                every = here if every is None else fn.op(f"and i1 {every}, {here}")
        flag = fn.op(f"zext i1 {every} to i32")
        for mask in (16, 8, 4, 2, 1):
            flag = fn.op(f"and i32 {flag}, {shuffle_xor(fn, flag, 'i32', mask)}")
        fn.if_else(fn.op(f"icmp ne i32 {flag}, 0"), masked, live)
        o = [[fn.op(f"load float, ptr {o_slots[4 * nt + x]}") for x in range(4)] for nt in range(ep // 8)]
        for ks in range(KEYS // 16):
            a = [fn.op(f"load {half2}, ptr {slot}") for slot in a_slots[4 * ks:4 * ks + 4]]
            for pair in range(ep // 16):
                r = ldmatrix(fn, smem, "half", offset(v_base, fn.op(f"add i32 {lane_row}, {16 * ks}"),
                                                      v_stride, fn.op(f"add i32 {lane_col}, {16 * pair}")),
                             True, half2)
                for h, b in enumerate(((r[0], r[1]), (r[2], r[3]))):
                    o[2 * pair + h] = mma_m16n8k16(fn, plan.dtype, a, b, o[2 * pair + h])
        for nt in range(ep // 8):
            for x in range(4):
                fn.raw(f"store float {o[nt][x]}, ptr {o_slots[4 * nt + x]}")

    fn.loop("0", str(n_tiles), "1", step)
    no_keys = None if is_static(keys) else fn.op(f"icmp eq i64 {keys_v}, 0")
    _store(fn, kernel, att, out, lowering, bidx, (rows, rows_v), width, ep, my_rows, t2,
           m_slots, l_slots, o_slots, sizes, no_keys)
    module.add_kernel(name, A.kernel_params(kernel, sizes), fn, THREADS)
    shared = 2 * (q_size + 2 * k_size + 2 * v_size)
    return Launch((row_tiles * nb, 1, 1), (THREADS, 1, 1), shared)


def _uneven(extent, step: int) -> bool:
    """Whether the last tile of ``extent`` (an int or a run-time size) may be partial."""
    return not is_static(extent) or extent % step != 0


def _store(fn: Function, kernel: K.Kernel, att: K.Attention, out: K.Result, lowering, bidx: list,
           rows: tuple, width: int, ep: int, my_rows: list[str], t2: str, m_slots: list[str],
           l_slots: list[str], o_slots: list[str], sizes, no_keys: str | None) -> None:
    """O / l of this lane's rows and columns through the result's epilogue (the sum alone for a
    row all -inf where torch selects 0; O's init where there are no keys, ``no_keys``)."""
    rows, rows_v = rows
    dtype = kernel.bindings[out.binding].dtype
    lin = A.emitted(linearize(kernel.bindings[out.binding], out.index, len(kernel.loop_ranges)),
                    sizes)
    totals, dead = [], []
    for h in (0, 1):
        total = fn.op(f"load float, ptr {l_slots[h]}")
        for mask in (1, 2):
            total = fn.op(f"fadd float {total}, {shuffle_xor(fn, total, 'float', mask)}")
        totals.append(total)
        m = fn.op(f"load float, ptr {m_slots[h]}")
        dead.append(fn.op(f"fcmp oeq float {m}, {const(float('-inf'), 'f32')}"))
    for nt in range(ep // 8):
        for x in range(4):
            row = my_rows[x >> 1]
            col = fn.op(f"add i64 {t2}, {8 * nt + (x & 1)}")
            checks = ([f"icmp ult i64 {row}, {rows_v}"] if _uneven(rows, ROWS) else []) + \
                ([f"icmp ult i64 {col}, {width}"] if width != ep else [])

            def one(row: str = row, col: str = col, x: int = x, nt: int = nt) -> None:
                o = fn.op(f"load float, ptr {o_slots[4 * nt + x]}")
                weighted = fn.op(f"fdiv float {o}, {totals[x >> 1]}")
                if att.masked_zero:
                    weighted = fn.op(f"select i1 {dead[x >> 1]}, float {o}, float {weighted}")
                if no_keys is not None:
                    weighted = fn.op(f"select i1 {no_keys}, float {const(0.0, 'f32')}, float {weighted}")
                loop = bidx + [row, col, 0, 0]
                acc = fn.op(f"fadd float {lowering(loop)(out.init)}, {weighted}")
                stored = lowering(loop, {0: acc})(out.epilogue) if out.epilogue is not None else acc
                A.store(fn, A.element_ptr(fn, f"%b{out.binding}", dtype, A.offset(fn, lin, loop)),
                        dtype, stored)

            if checks:
                inside = fn.op(checks[0])
                for check in checks[1:]:
                    inside = fn.op(f"and i1 {inside}, {fn.op(check)}")
                fn.if_then(inside, one)
            else:
                one()
