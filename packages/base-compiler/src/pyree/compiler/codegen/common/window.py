"""Sliding-window folds (depthwise convolutions, pooling) of 5 x 5 taps and more, staged in
shared memory: which kernels, which subexpression is the window, and the tiling. The GPU
emitters are ``llvm_gpu/window.py`` (cuda, rocm) and ``spirv/window.py``.

A depthwise convolution or a pooling folds, per output point, a window of its input that moves
with the output: ``acc + select(inside, x[oh*s + kh*d - p, ...], 0) * w[kh, ...]``. The
reduction templates gave a window of 961 taps (RepLKNet's 31 x 31) a block per output and a tree
per block (0.19x PyTorch on the H200), one of 81 (9 x 9) a thread per output (0.52x), their time
in the guarded loads and the tap index arithmetic. Staged, a block computes a tile of outputs:
its threads first evaluate the window's input expression (the load and the padding's guard:
``window``, a function of the input position alone) once per point of the tile's input
footprint into shared memory, then each thread folds its outputs' taps from there in nested
loops, unguarded.

Which subexpression is the window: pairs ``(p, r)`` of a parallel and a reduction loop that some
load indexes together as ``cp*p + cr*r`` (stride, dilation); the window is the one largest
subexpression that reaches the loops of the pairs only through multiples of those combinations
(the guard's ``oh + kh >= 15`` among them), so that one value per input position serves every
tap that reads it. The taps' other operands (the filter) are read per tap as in any kernel.
Staging evaluates the window at stand-in loop values with the same combinations (``p = p0 + v,
r = 0``, or ``r = v`` where the stride is not 1), its loads clamped into their
bindings: a footprint point that no output of the tile reads may hold anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.addressing import ceil_div

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

    @property
    def threads(self) -> int:
        return self.width * self.stack


def plan(kernel: K.Kernel, threads: int = THREADS, shared_bytes: int = SHARED_BYTES) -> Plan | None:
    """The staging of ``kernel`` (indexed by dim, as outlined) in blocks of at most ``threads``
    with at most ``shared_bytes`` of shared memory; None where it does not apply."""
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
    window = window_of(kernel, f, pairs)
    if window is None:
        return None
    return _tiling(kernel, (op, f), window, pairs, threads, shared_bytes)


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


def window_of(kernel: K.Kernel, f: K.Expr, pairs: tuple[Pair, ...],
              rows: bool = False) -> K.Expr | None:
    """The one largest subexpression of ``f`` that depends on the pairs' loops only through
    their combinations and holds a load that pairs them; None if there is not exactly one.
    Bindings may be flattened (their loads one linear index each): the combinations are
    checked on whatever affine forms the loads have. ``rows``: it may also depend on the
    reduction loops outside the pairs (the CPU stages a row of positions per combination of
    them, ``llvm_cpu/window.py``); else not."""
    paired = {p.reduction for p in pairs}
    unpaired = [] if rows else [d for d in range(kernel.num_parallel, len(kernel.loop_ranges))
                                if d not in paired]
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
    # A gather's clamp may be dropped where the loops keep its index in range, which stand-in
    # loop values do not.
    if any(isinstance(e, K.Gather) for e in K.walk(tops[0])):
        return None
    return tops[0]


def _tiling(kernel: K.Kernel, fold, window: K.Expr, pairs: tuple[Pair, ...], threads: int,
            shared_bytes: int) -> Plan | None:
    ranges = kernel.loop_ranges
    inner = pairs[-1]
    outer = pairs[-2] if len(pairs) > 1 else None
    width = min(ranges[inner.parallel], INNER_TILE if outer else threads)
    stack = min(ranges[outer.parallel], max(1, threads // width)) if outer else 1
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
        if math.prod(footprint) * elem > shared_bytes or (rows > 1 and blocks < MIN_BLOCKS):
            continue
        return Plan(fold, window, pairs, tiles, footprint, width, stack, rows)
    return None


