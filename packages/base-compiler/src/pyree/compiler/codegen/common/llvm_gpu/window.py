"""Sliding-window folds (depthwise convolutions, pooling) of 5 x 5 taps and more: the input tile
in shared memory.

A depthwise convolution or a pooling folds, per output point, a window of its input that moves
with the output: ``acc + select(inside, x[oh*s + kh*d - p, ...], 0) * w[kh, ...]``. The
reduction template gave a window of 961 taps (RepLKNet's 31 x 31) a block per output and a tree
per block (0.19x PyTorch on the H200), one of 81 (9 x 9) a thread per output (0.52x), its time in
the guarded loads and the tap index arithmetic. Here a block computes a tile of outputs: its threads
first evaluate the window's input expression (the load and the padding's guard: ``window``, a
function of the input position alone) once per point of the tile's input footprint into shared
memory, then each thread folds its outputs' taps from there in nested loops, unguarded.

Which subexpression is the window: pairs ``(p, r)`` of a parallel and a reduction loop that some
load indexes together as ``cp*p + cr*r`` (stride, dilation); the window is the one largest
subexpression that reaches the loops of the pairs only through multiples of those combinations
(the guard's ``oh + kh >= 15`` among them), so that one value per input position serves every
tap that reads it. The taps' other operands (the filter) are read per tap as in any kernel.
Staging evaluates the window at stand-in loop values with the same combinations (``p = p0 + v,
r = 0``, or ``r = v`` where the stride is not 1), its loads clamped into their bindings: a
footprint point that no output of the tile reads may hold anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.addressing import ceil_div
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.llvm_gpu import addressing as A
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function, Module, llvm_type, storage_type
from pyree.compiler.codegen.common.llvm_gpu.reduction import (
    identity,
    lowering,
    offsets,
    phase_finals,
    store_results,
)
from pyree.compiler.codegen.common.llvm_gpu.scalar import ScalarLowering
from pyree.compiler.codegen.common.llvm_gpu.size_values import STATIC

# Smaller windows stay on the reduction template's thread per output. Measured on the H200
# (BENCHMARKS.md, thirty-third session): 2-D windows of 25 taps (5 x 5) and up run 1.3-6x
# faster staged, a 3 x 3 max pool no faster; a 1-D window of 31 taps no faster, of 255 7x.
MIN_TAPS = 25
MIN_TAPS_1D = 128
THREADS = 256
# Fewer outputs per block than this (a global pool's one per channel) fold better as the
# reduction template's block per output.
MIN_THREADS = 64
INNER_TILE = 32  # outputs along the innermost windowed loop per block (2-D and up)
MAX_ROWS = 4  # outputs per thread along the next windowed loop
MIN_BLOCKS = 264  # two per multiprocessor of an H100/H200: fewer rows per thread below
SHARED_BYTES = 48 * 1024
UNROLL = 4


@dataclass(frozen=True)
class Pair:
    parallel: int
    reduction: int
    cp: int  # the parallel loop's coefficient (the stride)
    cr: int  # the reduction loop's (the dilation)


@dataclass(frozen=True)
class Plan:
    fold: tuple[str, K.Expr]
    window: K.Expr
    pairs: tuple[Pair, ...]  # by parallel loop
    tiles: tuple[int, ...]  # outputs per block along each pair's parallel loop
    footprint: tuple[int, ...]  # the staged input positions along each pair
    width: int  # threads along the innermost pair
    stack: int  # threads along the pair before it (1 with one pair)
    rows: int  # outputs per thread along the pair before the innermost


def plan(kernel: K.Kernel, target) -> Plan | None:
    if (kernel.attention is not None or K.has_run_time_sizes(kernel) or len(kernel.results) != 1
            or kernel.row_results or math.prod(kernel.reduction_ranges) < MIN_TAPS):
        return None
    folds = K.fold_pattern(kernel.results)
    if folds is None:
        return None
    op, f = folds[0]
    pairs = _pairs(kernel, f)
    if not pairs or (len(pairs) == 1 and math.prod(kernel.reduction_ranges) < MIN_TAPS_1D):
        return None
    window = _window(kernel, f, pairs)
    if window is None:
        return None
    return _tiling(kernel, (op, f), window, pairs)


def _pairs(kernel: K.Kernel, f: K.Expr) -> tuple[Pair, ...] | None:
    """The (parallel, reduction) loop pairs the loads of ``f`` index together; None where a loop
    pairs two ways, or where neither coefficient is 1 (no stand-in values reach every footprint
    position)."""
    npar = kernel.num_parallel
    found: dict[int, Pair] = {}
    for e in K.walk(f):
        if not isinstance(e, K.Load):
            continue
        for ix in e.index:
            par = [d for d in range(npar) if ix.coeffs[d]]
            red = [d for d in range(npar, len(ix.coeffs)) if ix.coeffs[d]]
            if len(par) != 1 or len(red) != 1:
                continue
            pair = Pair(par[0], red[0], ix.coeffs[par[0]], ix.coeffs[red[0]])
            if pair.cp <= 0 or pair.cr <= 0 or min(pair.cp, pair.cr) != 1:
                return None
            if found.setdefault(pair.parallel, pair) != pair:
                return None
    reductions = [p.reduction for p in found.values()]
    if len(set(reductions)) != len(reductions):
        return None
    return tuple(found[d] for d in sorted(found))


def _affine(e: K.Expr, memo: dict):
    """``e`` as an affine form of the loops ({loop: coefficient}, constant), where it is integer
    arithmetic of loop indices and constants; else None."""
    if e in memo:
        return memo[e]
    out = None
    if isinstance(e, K.LoopIndex):
        out = ({e.dim: 1}, 0)
    elif isinstance(e, K.Const) and not K.is_float(e.dtype) and e.dtype != "i1":
        out = ({}, int(e.value))
    elif isinstance(e, K.Binary) and e.op in ("add", "sub", "mul") and not K.is_float(e.dtype) \
            and e.dtype != "i1":
        a, b = _affine(e.a, memo), _affine(e.b, memo)
        if a is not None and b is not None:
            out = _combine(e.op, a, b)
    memo[e] = out
    return out


def _combine(op: str, a, b):
    if op == "mul":
        if a[0] and b[0]:
            return None
        (coeffs, c), k = (a, b[1]) if not b[0] else (b, a[1])
        return ({d: v * k for d, v in coeffs.items() if v * k}, c * k)
    sign = 1 if op == "add" else -1
    coeffs = dict(a[0])
    for d, v in b[0].items():
        coeffs[d] = coeffs.get(d, 0) + sign * v
    return ({d: v for d, v in coeffs.items() if v}, a[1] + sign * b[1])


def _window(kernel: K.Kernel, f: K.Expr, pairs: tuple[Pair, ...]) -> K.Expr | None:
    """The one largest subexpression of ``f`` that depends on the pairs' loops only through
    their combinations and holds a load that pairs them; None if there is not exactly one."""
    paired = {p.reduction for p in pairs}
    unpaired = [d for d in range(kernel.num_parallel, len(kernel.loop_ranges)) if d not in paired]
    memo: dict = {}

    def fits(coeffs: dict) -> bool:  # a multiple of each pair's combination
        return (all(coeffs.get(p.parallel, 0) * p.cr == coeffs.get(p.reduction, 0) * p.cp
                    for p in pairs) and not any(coeffs.get(d, 0) for d in unpaired))

    def moves(coeffs: dict) -> bool:
        return any(coeffs.get(p.parallel, 0) or coeffs.get(p.reduction, 0) for p in pairs)

    shaped, moving, mixes, parents = {}, {}, {}, {}
    for e in K.walk(f):  # operands first
        form = _affine(e, memo)
        if form is not None:
            coeffs = form[0]
            shaped[e], moving[e], mixes[e] = fits(coeffs), moves(coeffs), False
        elif isinstance(e, K.Load):
            forms = [{d: c for d, c in enumerate(ix.coeffs) if c} for ix in e.index]
            shaped[e] = all(fits(c) for c in forms)
            moving[e] = any(moves(c) for c in forms)
            mixes[e] = any(moves(c) and any(c.get(p.reduction, 0) for p in pairs) for c in forms)
        elif isinstance(e, (K.Acc, K.Final)):
            shaped[e], moving[e], mixes[e] = False, False, False
        else:
            ops = K.operands(e)
            shaped[e] = all(shaped[c] for c in ops)
            moving[e] = any(moving[c] for c in ops)
            mixes[e] = any(mixes[c] for c in ops)
        for c in K.operands(e):
            parents.setdefault(c, []).append(e)
    tops = [e for e in shaped if shaped[e] and moving[e]
            and (e is f or any(not shaped[p] for p in parents.get(e, ())))]
    if len(tops) != 1 or not mixes[tops[0]] or tops[0].dtype == "i1":
        return None
    return tops[0]


def _tiling(kernel: K.Kernel, fold, window: K.Expr, pairs: tuple[Pair, ...]) -> Plan | None:
    ranges = kernel.loop_ranges
    inner = pairs[-1]
    outer = pairs[-2] if len(pairs) > 1 else None
    width = min(ranges[inner.parallel], INNER_TILE if outer else THREADS)
    stack = min(ranges[outer.parallel], max(1, THREADS // width)) if outer else 1
    if width * stack < MIN_THREADS:
        return None
    fixed = math.prod(n for d, n in enumerate(kernel.parallel_ranges)
                      if d not in {p.parallel for p in pairs})
    elem = K.itemsize(window.dtype)
    for rows in range(MAX_ROWS, 0, -1):
        tiles = tuple(width if p is inner else stack * rows if p is outer else 1 for p in pairs)
        if outer and rows > 1 and tiles[-2] > ranges[outer.parallel]:
            continue
        footprint = tuple(p.cp * (t - 1) + p.cr * (ranges[p.reduction] - 1) + 1
                          for p, t in zip(pairs, tiles))
        blocks = fixed * math.prod(ceil_div(ranges[p.parallel], t) for p, t in zip(pairs, tiles))
        if math.prod(footprint) * elem > SHARED_BYTES or (rows > 1 and blocks < MIN_BLOCKS):
            continue
        return Plan(fold, window, pairs, tiles, footprint, width, stack, rows)
    return None


def emit(module: Module, kernel: K.Kernel, name: str, plan: Plan) -> Launch:
    fn = Function(module)
    ranges, npar = kernel.loop_ranges, kernel.num_parallel
    pairs, tiles = plan.pairs, plan.tiles
    by_loop = {p.parallel: i for i, p in enumerate(pairs)}
    fixed = [d for d in range(npar) if d not in by_loop]
    counts = [ceil_div(ranges[p.parallel], t) for p, t in zip(pairs, tiles)]
    block = fn.op(f"zext i32 {fn.special('ctaid.x')} to i64")
    coords = A.decompose(fn, block, tuple(ranges[d] for d in fixed) + tuple(counts))
    fixed_values = dict(zip(fixed, coords))
    origin = [fn.op(f"mul i64 {c}, {t}") for c, t in zip(coords[len(fixed):], tiles)]
    tid = fn.op(f"zext i32 {fn.special('tid.x')} to i64")
    threads = plan.width * plan.stack
    lin = offsets(kernel, STATIC)
    op, f = plan.fold
    ty = llvm_type(f.dtype)

    # Stage: the window at every footprint position.
    st = storage_type(plan.window.dtype)
    shared = module.shared_array(f"{name}_window", st, math.prod(plan.footprint), 16)

    def stage(q):
        v = A.decompose(fn, q, plan.footprint)
        loop = [fixed_values.get(d, "0") for d in range(len(ranges))]
        for i, p in enumerate(pairs):
            if p.cp == 1:
                loop[p.parallel] = fn.op(f"add i64 {origin[i]}, {v[i]}")
            else:
                loop[p.parallel], loop[p.reduction] = origin[i], v[i]
        value = _clamped(fn, kernel, loop, lin)(plan.window)
        cell = fn.op(f"getelementptr {st}, ptr addrspace(3) {shared}, i64 {q}")
        fn.raw(f"store {st} {value}, ptr addrspace(3) {cell}")

    fn.loop(tid, str(math.prod(plan.footprint)), str(threads), stage)
    fn.barrier()

    # Fold: each thread's outputs, nested loops over the taps.
    along = [None] * len(pairs)  # each pair's offset in the tile, per output row
    along[-1] = [fn.op(f"urem i64 {tid}, {plan.width}")]
    if len(pairs) > 1:
        row = fn.op(f"udiv i64 {tid}, {plan.width}")
        along[-2] = [fn.op(f"add i64 {row}, {j * plan.stack}") for j in range(plan.rows)]
    outputs = []  # per output row: (parallel loop values clamped into range, inside?)
    for j in range(plan.rows):
        p, inside = [None] * npar, "true"
        for d in fixed:
            p[d] = fixed_values[d]
        offs = []
        for i, pair in enumerate(pairs):
            t = along[i][j if i == len(pairs) - 2 else 0] if along[i] is not None else "0"
            value = fn.op(f"add i64 {origin[i]}, {t}")
            inside = fn.op(f"and i1 {inside}, {fn.op(f'icmp ult i64 {value}, {ranges[pair.parallel]}')}")
            last = str(ranges[pair.parallel] - 1)
            p[pair.parallel] = fn.call("i64", "llvm.umin.i64", [("i64", value), ("i64", last)])
            offs.append(fn.op(f"sub i64 {p[pair.parallel]}, {origin[i]}"))
        outputs.append((p, inside, offs))

    strides = [math.prod(plan.footprint[i + 1:]) for i in range(len(pairs))]
    red = list(range(npar, len(ranges)))
    totals = []
    for p, _, _ in outputs:
        slot = fn.alloca(ty)
        init = lowering(fn, kernel, p + [0] * len(red), lin)(kernel.results[0].init)
        fn.raw(f"store {ty} {init}, ptr {slot}")
        totals.append(slot)
    combine = ScalarLowering(fn, None, None, location=kernel.location)._binary

    def taps(level: int, r: list):
        if level < len(red) - 1:
            fn.loop("0", str(ranges[red[level]]), "1", lambda i: taps(level + 1, r + [i]))
            return
        partials = [fn.alloca(ty) for _ in outputs]
        for slot in partials:
            fn.raw(f"store {ty} {identity(op, f.dtype)}, ptr {slot}")

        def tap(i):
            rs = r + [i]
            for (p, _, offs), slot in zip(outputs, partials):
                off = "0"
                for k, pair in enumerate(pairs):
                    pos = fn.op(f"add i64 {fn.op(f'mul i64 {offs[k]}, {pair.cp}')}, "
                                f"{fn.op(f'mul i64 {rs[pair.reduction - npar]}, {pair.cr}')}")
                    off = fn.op(f"add i64 {off}, {fn.op(f'mul i64 {pos}, {strides[k]}')}")
                cell = fn.op(f"getelementptr {st}, ptr addrspace(3) {shared}, i64 {off}")
                lower = lowering(fn, kernel, p + rs, lin)
                lower.cache[plan.window] = fn.op(f"load {st}, ptr addrspace(3) {cell}")
                old = fn.op(f"load {ty}, ptr {slot}")
                fn.raw(f"store {ty} {combine(op, old, lower(f), f.dtype)}, ptr {slot}")

        fn.loop("0", str(ranges[red[-1]]), "1", tap, unroll=UNROLL)
        for slot, total in zip(partials, totals):
            both = combine(op, fn.op(f"load {ty}, ptr {total}"), fn.op(f"load {ty}, ptr {slot}"), f.dtype)
            fn.raw(f"store {ty} {both}, ptr {total}")

    taps(0, [])
    for (p, inside, _), total in zip(outputs, totals):
        zeros = p + [0] * len(red)
        acc = fn.op(f"load {ty}, ptr {total}")
        fn.if_then(inside, lambda zeros=zeros, p=p, acc=acc: store_results(
            fn, kernel, zeros, lin, phase_finals(fn, kernel, p, lin, {0: acc}, [0])))
    module.add_kernel(name, A.kernel_params(kernel), fn, block_size=threads)
    return Launch((math.prod(ranges[d] for d in fixed) * math.prod(counts), 1, 1), (threads, 1, 1))


def _clamped(fn: Function, kernel: K.Kernel, loop: list, lin) -> ScalarLowering:
    """A lowering at stand-in loop values whose loads stay inside their bindings."""
    def load(e: K.Load):
        size = math.prod(kernel.bindings[e.binding].shape)
        off = A.clamp(fn, A.offset(fn, lin(e.binding, e.index), loop), size)
        return A.load(fn, A.element_ptr(fn, f"%b{e.binding}", e.dtype, off), e.dtype)
    return ScalarLowering(fn, load, lambda d: loop[d], None, kernel.location, kernel)
