"""Contractions (``acc += X(m, k) * Y(k, n)`` over the two innermost parallel loops and one reduction
loop, any leading batch loops): a tiled SIMT kernel.

X and Y are arbitrary expressions (casts, fused producers), evaluated once per tile element and
staged in shared memory, double-buffered; each thread accumulates a TM x TN register tile read
with vector shared-memory loads. Tile elements past K are loaded at clamped indices and replaced
by 0; a row or column past M or N keeps its clamped value (it feeds only outputs that are not
stored), so odd shapes need no branches in the main loop. The epilogue adds ``init``,
applies the fused epilogue expression and stores with bounds checks.
"""

from __future__ import annotations

import numpy as np
from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.addressing import ceil_div, linearize
from pyree.compiler.codegen.common.contraction import Contraction, Tiling, contraction_of
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.llvm_gpu import addressing as A
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function, Module, const, llvm_type, storage_type
from pyree.compiler.codegen.common.llvm_gpu.scalar import ScalarLowering
from pyree.compiler.codegen.common.llvm_gpu.size_values import STATIC
from pyree.compiler.errors import CompileError
from pyree.compiler.sizes import is_static, num_elements, opaque, select

_SUFFIX = {"float": "f32", "double": "f64", "half": "f16", "bfloat": "bf16"}


# The smallest tile takes the products too small to fill the GPU (batch 1: GPT-2's 128-row linears,
# MobileNet's 7x7 pointwise convs), whose K steps each pay a fixed cost (loads, a barrier) that an
# 8-deep step's arithmetic does not cover. 16 deep ran GPT-2 and MobileNet v2 faster than 8 or 32
# deep, with half the unrolled code of 32 (BENCHMARKS.md, 2026-11-26). Each has 256 threads, which
# ``emit_chosen`` relies on.
TILINGS = (Tiling(128, 128, 8, 8, 8), Tiling(64, 64, 8, 4, 4), Tiling(32, 32, 16, 2, 2))
FILL_BLOCKS = 132  # a large GPU's multiprocessors: fewer blocks than this leave some idle


def choose_tiling(m: int, n: int, batch: int = 1) -> Tiling:
    """The largest tile that still gives every multiprocessor a block, else the smallest. A
    convolution's GEMM at batch 1 is small in m*n and long in k (ResNet-18's last stage: 512 x 49
    x 4608): 128x128 tiles made 4 to 32 blocks of it, most of the GPU idle."""
    for t in TILINGS:
        if m >= t.bm and n >= t.bn and ceil_div(m, t.bm) * ceil_div(n, t.bn) * batch >= FILL_BLOCKS:
            return t
    return TILINGS[-1]


def plan(kernel: K.Kernel, target) -> Contraction | None:
    return contraction_of(kernel)


def emit(module: Module, kernel: K.Kernel, name: str, c: Contraction) -> Launch:
    par = kernel.parallel_ranges
    nb = int(np.prod(par[:-2], dtype=np.int64))
    if nb > 65535:
        raise CompileError(f"batch of {nb} matrix products exceeds the CUDA grid", kernel.location)
    return emit_tiled(module, kernel, name, c, choose_tiling(par[-2], par[-1], nb),
                      Function(module), STATIC)


def emit_tiled(module: Module, kernel: K.Kernel, name: str, c: Contraction, t: Tiling,
               fn: Function, sizes) -> Launch:
    """The tiled kernel with tiling ``t``. ``fn``: the kernel's body so far; ``sizes``: its
    ``size_values.SizeValues`` where its extents are run-time sizes (``STATIC`` without); a
    run-time K may be 0, which leaves the first tile unloaded."""
    shared = _shared_arrays(module, name, c.dtype, (t,))
    _tile(fn, kernel, c, t, sizes, shared)
    par = kernel.parallel_ranges
    module.add_kernel(name, A.kernel_params(kernel, sizes), fn, t.threads, _min_blocks((t,)))
    return Launch((opaque("ceildiv", par[-1], t.bn), opaque("ceildiv", par[-2], t.bm),
                   num_elements(par[:-2])), (t.threads, 1, 1))


def emit_chosen(module: Module, kernel: K.Kernel, name: str, c: Contraction, fn: Function,
                sizes) -> Launch:
    """The tiled kernel for run-time extents: every tiling of ``TILINGS`` in one kernel, the one
    ``choose_tiling`` would take for the dispatch's M, N and batch chosen per call (a branch
    every thread of the dispatch takes alike), and a grid to match. With one tile for every
    size, a 127x255 product ran 8 blocks of 64x64 where the static kernel runs 32 of 32x32
    (1.9x its time on the H200, BENCHMARKS.md). A tiling that a static extent rules out (a
    convolution's 64 output channels against 128-row tiles) is left out: the kernel's registers
    and shared memory are its largest body's, and the 128x128 body's, never taken, cost a
    run-time-batch convolution's 64x64 one a block per multiprocessor (79 registers and 16 KiB
    against the static kernel's 60 and 8 KiB)."""
    par = kernel.parallel_ranges
    M, N, nb = par[-2], par[-1], num_elements(par[:-2])
    candidates = []  # (tiling, its fit: 1 where taken if no earlier one is)
    for t in TILINGS:
        fit = tiling_fits(M, N, nb, t) if t is not TILINGS[-1] else 1
        if not is_static(fit) or fit:
            candidates.append((t, fit))
        if is_static(fit) and fit:
            break  # the later ones are never reached
    tilings = [t for t, _ in candidates]
    shared = _shared_arrays(module, name, c.dtype, tilings)
    none_before = "true"
    for t, fit in candidates:
        taken = fn.op(f"icmp ne i64 {sizes(fit)}, 0")
        fn.if_then(fn.op(f"and i1 {none_before}, {taken}"),
                   lambda t=t: _tile(fn, kernel, c, t, sizes, shared))
        none_before = fn.op(f"and i1 {none_before}, {fn.op(f'xor i1 {taken}, true')}")
    module.add_kernel(name, A.kernel_params(kernel, sizes), fn, TILINGS[0].threads,
                      _min_blocks(tilings))

    def tiles(extent, side):
        """ceildiv(extent, the chosen tiling's side)"""
        count = opaque("ceildiv", extent, side(tilings[-1]))
        for t, fit in reversed(candidates[:-1]):
            count = select(fit, opaque("ceildiv", extent, side(t)), count)
        return count
    return Launch((tiles(N, lambda t: t.bn), tiles(M, lambda t: t.bm), nb),
                  (TILINGS[0].threads, 1, 1))


def tiling_fits(m, n, batch, t: Tiling):
    """A size that is 1 where ``choose_tiling(m, n, batch)`` would take ``t`` if it got that
    far, else 0 (``x >= c`` is ``min(1, x // c)``), for sizes known per dispatch only."""
    def at_least(x, c):
        return opaque("min", 1, opaque("floordiv", x, c))
    blocks = opaque("ceildiv", m, t.bm) * opaque("ceildiv", n, t.bn) * batch
    return at_least(m, t.bm) * at_least(n, t.bn) * at_least(blocks, FILL_BLOCKS)


def _shared_arrays(module: Module, name: str, dtype: str, tilings) -> tuple[str, str]:
    """The double-buffered X and Y tiles in shared memory, sized for the largest of ``tilings``
    (the branches of ``emit_chosen`` share them)."""
    ty_ = llvm_type(dtype)
    return (module.shared_array(f"{name}_a", ty_, max(2 * t.bk * t.bm for t in tilings), 32),
            module.shared_array(f"{name}_b", ty_, max(2 * t.bk * t.bn for t in tilings), 32))


def _min_blocks(tilings) -> int:
    """Two blocks a multiprocessor where a thread's register tile is large: ptxas then keeps it
    within 128 registers instead of spilling less often and running one block."""
    return 2 if max(t.tm * t.tn for t in tilings) >= 64 else 0


def _tile(fn: Function, kernel: K.Kernel, c: Contraction, t: Tiling, sizes,
          shared: tuple[str, str]) -> None:
    """The body of the tiled kernel with tiling ``t``, its tiles in ``shared``."""
    par = kernel.parallel_ranges
    batch = par[:-2]
    M, N, KD = par[-2], par[-1], kernel.reduction_ranges[0]
    k_ = sizes(KD)
    ty_ = llvm_type(c.dtype)
    isz = K.itemsize(c.dtype)
    lowering = epilogue_lowering(fn, kernel, sizes)
    a_sh, b_sh = shared
    tid = fn.op(f"zext i32 {fn.special('tid.x')} to i64")
    bx, by = fn.special("ctaid.x"), fn.special("ctaid.y")
    n0 = fn.op(f"mul i64 {fn.op(f'zext i32 {bx} to i64')}, {t.bn}")
    m0 = fn.op(f"mul i64 {fn.op(f'zext i32 {by} to i64')}, {t.bm}")
    bz = fn.op(f"zext i32 {fn.special('ctaid.z')} to i64")
    bidx = A.decompose(fn, bz, [sizes(b) for b in batch]) if batch else []
    tx = fn.op(f"urem i64 {tid}, {t.bn // t.tn}")
    ty = fn.op(f"udiv i64 {tid}, {t.bn // t.tn}")
    zero = const(0.0, c.dtype)

    def fetch(kt):
        """This thread's share of tile kt of X and Y, as registers."""
        k0 = fn.op(f"mul i64 {kt}, {t.bk}")
        xs, ys = [], []
        for j in range(t.bm * t.bk // t.threads):
            e = fn.op(f"add i64 {tid}, {t.threads * j}")
            i, kk = fn.op(f"udiv i64 {e}, {t.bk}"), fn.op(f"urem i64 {e}, {t.bk}")
            gm, gk = fn.op(f"add i64 {m0}, {i}"), fn.op(f"add i64 {k0}, {kk}")
            ok = fn.op(f"icmp ult i64 {gk}, {k_}")  # (a row past M: the clamped one, unstored)
            v = lowering(bidx + [A.clamp(fn, gm, M, sizes), 0, A.clamp(fn, gk, KD, sizes)])(c.x)
            xs.append((fn.op(f"add i64 {fn.op(f'mul i64 {kk}, {t.bm}')}, {i}"),
                       fn.op(f"select i1 {ok}, {ty_} {v}, {ty_} {zero}")))
        for j in range(t.bn * t.bk // t.threads):
            e = fn.op(f"add i64 {tid}, {t.threads * j}")
            kk, jn = fn.op(f"udiv i64 {e}, {t.bn}"), fn.op(f"urem i64 {e}, {t.bn}")
            gn, gk = fn.op(f"add i64 {n0}, {jn}"), fn.op(f"add i64 {k0}, {kk}")
            ok = fn.op(f"icmp ult i64 {gk}, {k_}")
            v = lowering(bidx + [0, A.clamp(fn, gn, N, sizes), A.clamp(fn, gk, KD, sizes)])(c.y)
            ys.append((fn.op(f"add i64 {fn.op(f'mul i64 {kk}, {t.bn}')}, {jn}"),
                       fn.op(f"select i1 {ok}, {ty_} {v}, {ty_} {zero}")))
        return xs, ys

    def stash(regs, buf):
        xs, ys = regs
        for arr, vals, size in ((a_sh, xs, t.bk * t.bm), (b_sh, ys, t.bk * t.bn)):
            base = fn.op(f"mul i64 {buf}, {size}")
            for off, v in vals:
                p = fn.op(f"getelementptr {ty_}, ptr addrspace(3) {arr}, i64 {fn.op(f'add i64 {base}, {off}')}")
                fn.raw(f"store {ty_} {v}, ptr addrspace(3) {p}")

    def split(tile_dim, per_thread, who):
        """The rows (or cols) a thread owns: two halves of the tile, per_thread/2 consecutive each."""
        half = per_thread // 2
        return [(fn.op(f"add i64 {fn.op(f'mul i64 {who}, {half}')}, {h * tile_dim // 2}"), half)
                for h in range(2)]

    rows, cols = split(t.bm, t.tm, ty), split(t.bn, t.tn, tx)
    accs = []
    for _ in range(t.tm * t.tn):
        slot = fn.alloca(ty_)
        fn.raw(f"store {ty_} {zero}, ptr {slot}")
        accs.append(slot)

    def read(arr, buf, size, stride, kk, spans):
        vals = []
        for start, width in spans:
            off = fn.op(f"add i64 {fn.op(f'mul i64 {buf}, {size}')}, {kk * stride}")
            p = fn.op(f"getelementptr {ty_}, ptr addrspace(3) {arr}, i64 {fn.op(f'add i64 {off}, {start}')}")
            vec = fn.op(f"load <{width} x {ty_}>, ptr addrspace(3) {p}, align {width * isz}")
            vals += [fn.op(f"extractelement <{width} x {ty_}> {vec}, i32 {i}") for i in range(width)]
        return vals

    num_k = sizes(opaque("ceildiv", KD, t.bk))
    if is_static(KD):
        stash(fetch("0"), "0")
    else:
        fn.if_then(fn.op(f"icmp ne i64 {k_}, 0"), lambda: stash(fetch("0"), "0"))
    fn.barrier()

    def step(kt):
        cur = fn.op(f"and i64 {kt}, 1")
        nxt = fetch(fn.op(f"add i64 {kt}, 1"))
        olds = [fn.op(f"load {ty_}, ptr {s}") for s in accs]
        for kk in range(t.bk):
            av = read(a_sh, cur, t.bk * t.bm, t.bm, kk, rows)
            bv = read(b_sh, cur, t.bk * t.bn, t.bn, kk, cols)
            olds = [fmuladd(fn, ty_, av[i], bv[j], olds[i * t.tn + j])
                    for i in range(t.tm) for j in range(t.tn)]
        for s, v in zip(accs, olds):
            fn.raw(f"store {ty_} {v}, ptr {s}")
        has_next = fn.op(f"icmp ult i64 {fn.op(f'add i64 {kt}, 1')}, {num_k}")
        fn.if_then(has_next, lambda: stash(nxt, fn.op(f"xor i64 {cur}, 1")))
        fn.barrier()

    fn.loop("0", str(num_k), "1", step)

    row_ids = [fn.op(f"add i64 {fn.op(f'add i64 {m0}, {s}')}, {i}") for s, w in rows for i in range(w)]
    for i, gm in enumerate(row_ids):
        j = 0
        for start, width in cols:
            totals = [fn.op(f"load {ty_}, ptr {accs[i * t.tn + j + k]}") for k in range(width)]
            store_span(fn, kernel, c, bidx, gm, fn.op(f"add i64 {n0}, {start}"), totals, lowering,
                       sizes)
            j += width


def fmuladd(fn: Function, ty_: str, a: str, b: str, c: str) -> str:
    """a * b + c, fused where the target has an FMA."""
    return fn.call(ty_, f"llvm.fmuladd.{_SUFFIX[ty_]}", [(ty_, a), (ty_, b), (ty_, c)])


def epilogue_lowering(fn: Function, kernel: K.Kernel, sizes=STATIC):
    """``lowering(loop, acc=None)``: a ScalarLowering of the kernel's init and epilogue
    expressions at the loop indices ``loop``, loading their operands straight from the bindings.
    Every matmul template stores its tile through it (``store_element``)."""
    n_loops = len(kernel.loop_ranges)
    lin_cache: dict = {}

    def lin(b, index):
        if (b, index) not in lin_cache:
            lin_cache[(b, index)] = A.emitted(linearize(kernel.bindings[b], index, n_loops), sizes)
        return lin_cache[(b, index)]

    def lowering(loop, acc=None):
        def load(e):
            ptr = A.element_ptr(fn, f"%b{e.binding}", e.dtype, A.offset(fn, lin(e.binding, e.index), loop))
            return A.load(fn, ptr, e.dtype)
        return ScalarLowering(fn, load, lambda d: loop[d], acc, kernel.location, kernel)
    return lowering


def store_span(fn: Function, kernel: K.Kernel, c: Contraction, bidx: list, gm: str, gn0: str,
               totals: list[str], lowering, sizes=STATIC) -> None:
    """C[gm, gn0 + j] = epilogue(init + totals[j]) for a thread's run of consecutive columns: one
    vector store where the output row is contiguous and aligned along n (known at compile time)
    and the whole run lies inside the output (checked at run time), else store_element per
    column. A SIMT tile's epilogue is most of the work of a short-K product (4096x16 @ 16x4096:
    64 MB written), and scalar stores spend four times the store instructions on it."""
    r = kernel.results[0]
    M, N = (sizes(d) for d in kernel.parallel_ranges[-2:])
    width, out_dtype, n_loops = len(totals), kernel.bindings[r.binding].dtype, len(kernel.loop_ranges)
    lin = linearize(kernel.bindings[r.binding], r.index, n_loops)
    columns = [fn.op(f"add i64 {gn0}, {j}") for j in range(width)]

    def scalar():
        for gn, total in zip(columns, totals):
            store_element(fn, kernel, c, bidx, gm, gn, total, lowering, sizes)

    if width == 1 or out_dtype == "i1" or not lin.contiguous(kernel.num_parallel - 1, width,
                                                             range(n_loops)):
        return scalar()
    st = storage_type(out_dtype)

    def vector():
        vec = "undef"
        for j, (gn, total) in enumerate(zip(columns, totals)):
            value = _result_value(fn, r, c, lowering, bidx + [gm, gn, 0], total)
            vec = fn.op(f"insertelement <{width} x {st}> {vec}, {st} {value}, i32 {j}")
        ptr = A.element_ptr(fn, f"%b{r.binding}", out_dtype,
                            A.offset(fn, A.emitted(lin, sizes), bidx + [gm, gn0, 0]))
        fn.raw(f"store <{width} x {st}> {vec}, ptr addrspace(1) {ptr}, "
               f"align {width * K.itemsize(out_dtype)}")

    end = fn.op(f"add i64 {gn0}, {width}")
    inside = fn.op(f"and i1 {fn.op(f'icmp ult i64 {gm}, {M}')}, {fn.op(f'icmp ule i64 {end}, {N}')}")
    fn.if_then(inside, vector)
    fn.if_then(fn.op(f"xor i1 {inside}, true"), scalar)


def store_element(fn: Function, kernel: K.Kernel, c: Contraction, bidx: list, gm: str, gn: str,
                  total: str, lowering, sizes=STATIC) -> None:
    """C[gm, gn] = epilogue(init + total), when (gm, gn) is inside the output."""
    r = kernel.results[0]
    M, N = (sizes(d) for d in kernel.parallel_ranges[-2:])
    out_dtype = kernel.bindings[r.binding].dtype
    n_loops = len(kernel.loop_ranges)

    def store():
        loop = bidx + [gm, gn, 0]
        value = _result_value(fn, r, c, lowering, loop, total)
        lin = A.emitted(linearize(kernel.bindings[r.binding], r.index, n_loops), sizes)
        ptr = A.element_ptr(fn, f"%b{r.binding}", out_dtype, A.offset(fn, lin, loop))
        A.store(fn, ptr, out_dtype, value)

    ok = fn.op(f"and i1 {fn.op(f'icmp ult i64 {gm}, {M}')}, {fn.op(f'icmp ult i64 {gn}, {N}')}")
    fn.if_then(ok, store)


def _result_value(fn: Function, r: K.Result, c: Contraction, lowering, loop: list,
                  total: str) -> str:
    """epilogue(init + total) at ``loop``: the value a tile stores for one output element."""
    init = lowering(loop)(r.init) if r.init is not None else const(0.0, c.dtype)
    acc = fn.op(f"fadd {llvm_type(c.dtype)} {init}, {total}")
    return lowering(loop, lambda k: acc)(r.epilogue) if r.epilogue is not None else acc
