"""Questions passes and backends ask of kernel-IR expressions: phases and folds, the contraction
shape, bounds of integer expressions, lowering order, and the one bottom-up expression mapper;
and of a kernel's run-time sizes: where they are, their push constants, bounds of an access."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
from pyree.compiler import sizes
from pyree.compiler.kernel.ir import (
    DTYPES,
    INT_CASTS,
    Acc,
    AffineExpr,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Final,
    Gather,
    Kernel,
    Load,
    LoopIndex,
    Result,
    Select,
    SizeValue,
    cast_keeps,
    int_bits,
    int_range,
    is_float,
    is_unsigned,
    map_result,
    operands,
    result_nodes,
    size_value,
    walk,
)


def is_row_kernel(results: tuple[Result, ...]) -> bool:
    """Whether ``results`` need more than one pass over the reduction range."""
    return any(r.row for r in results) or any(
        isinstance(e, Final) for r in results for e in result_nodes(r))


def phases(results: tuple[Result, ...]) -> list[list[int]]:
    """The reduction results (positions) grouped by phase: a result reading ``Final(j)`` folds in
    a phase after j's. A single phase for a kernel without Finals."""
    phase: dict[int, int] = {}
    for k, r in enumerate(results):
        if r.row:
            continue
        reads = [e.result for e in result_nodes(r) if isinstance(e, Final)]
        phase[k] = 1 + max((phase[j] for j in reads), default=-1)
    return [[k for k in phase if phase[k] == n] for n in range(max(phase.values(), default=-1) + 1)]


def lowering_order(expr: Expr, done, eager=None) -> list[Expr]:
    """The sub-expressions of ``expr`` (``expr`` last) that a memoized recursive lowering
    reaches through ``eager(node)`` (default: every operand but a Select's arms, which a
    backend may branch around) and has not in ``done``, in the order it lowers them: operands
    left to right, each before its users. A backend that lowers these first recurses one level
    per Select instead of once per node: a fused chain with its math expanded nests thousands
    of nodes deep."""
    eager = eager or _eager
    order, seen = [], set()
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
        elif node not in seen and node not in done:
            seen.add(node)
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(eager(node)))
    return order


def _eager(e: Expr) -> tuple[Expr, ...]:
    return (e.cond,) if isinstance(e, Select) else operands(e)


def contains(expr: Expr, hit, memo: dict) -> bool:
    """Whether some node of ``expr`` satisfies ``hit``. ``memo`` (node -> answer) is the
    caller's to keep across calls: asked of every Select's arms, where each arm holds the
    whole chain below it, walking afresh made a deep kernel's lowering quadratic."""
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, expanded = stack.pop()
        if node in memo:
            continue
        if expanded:
            memo[node] = bool(hit(node)) or any(memo[c] for c in operands(node))
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in operands(node) if c not in memo)
    return memo[expr]


def reads(expr: Expr) -> list[Load | Gather]:
    """The Loads and Gathers in ``expr``: everything that reads a binding."""
    return [e for e in walk(expr) if isinstance(e, (Load, Gather))]


FOLDS = ("add", "mul", "max", "min", "and", "or", "xor")


def fold_pattern(results: tuple[Result, ...]) -> list[tuple[str, Expr]] | None:
    """Per result (op, f) when every update is ``Acc <op> f`` with ``f`` free of accumulators: an
    associative fold, which may be split and reassociated (parallel reductions)."""
    out = []
    for k, r in enumerate(results):
        v = r.value
        if not isinstance(v, Binary) or v.op not in FOLDS:
            return None
        if v.a == Acc(k, v.dtype):
            f = v.b
        elif v.b == Acc(k, v.dtype):
            f = v.a
        else:
            return None
        if any(isinstance(e, Acc) for e in walk(f)):
            return None
        out.append((v.op, f))
    return out



def reads_along_outputs(num_parallel: int, num_loops: int, folds, shape_of) -> bool:
    """Whether the folds' per-output reads (those that move with the outputs' last loop; a
    vector every output shares is cached) are contiguous along that loop and not along the
    innermost reduction loop: a column fold, which a block (workgroup) per output reads one
    element a row (a [k, n] weight's column: GPT-2's c_fc split six ways, 18432 partial outputs
    of 128 terms each, 32 rows of 6 KB a load), where a thread per output reads whole rows
    across its neighbours. ``shape_of(binding)``: a load's binding's shape (static)."""
    if not num_parallel:
        return False
    out, inner = num_parallel - 1, num_loops - 1
    moving = []
    for _, term in folds:
        for e in walk(term):
            if not isinstance(e, Load):
                continue
            shape = shape_of(e.binding)
            if not all(isinstance(n, int) for n in shape):
                return False
            coeffs = [0] * num_loops
            for d, ix in enumerate(e.index):
                stride = math.prod(shape[d + 1:])
                coeffs = [c + stride * x for c, x in zip(coeffs, ix.coeffs)]
            if coeffs[out] != 0:
                moving.append(coeffs)
    return bool(moving) and all(c[out] == 1 and c[inner] != 1 for c in moving)


def fold_product(fold: tuple[str, Expr]) -> Binary | None:
    """The product ``a * b`` when a fold (``fold_pattern``'s ``(op, f)``) is ``acc + a * b``: the
    shape of every contraction, which the passes that prepare one (flow's convolution rewrite,
    split-K) and every backend's matmul templates look for. None for any other fold."""
    op, f = fold
    return f if op == "add" and isinstance(f, Binary) and f.op == "mul" else None


def contraction_product(result: Result) -> Binary | None:
    """``fold_product`` of a kernel's one reduction ``result``, with the product in the
    accumulator's dtype (no widening multiply)."""
    folds = fold_pattern((result,))
    product = fold_product(folds[0]) if folds else None
    return product if product is not None and product.dtype == result.value.dtype else None

def fold_identity(op: str, dtype: str) -> float | int | bool:
    """The value ``x <op> identity == x`` for every x of ``dtype`` (-0.0 for a float sum: -0.0
    + 0.0 is 0.0, so a sum of -0.0s that starts at 0.0 would lose its sign)."""
    if is_float(dtype):
        return {"add": -0.0, "mul": 1.0, "max": -np.inf, "min": np.inf}[op]
    if dtype == "i1":
        return op in ("and", "mul", "min")
    info = np.iinfo(DTYPES[dtype])
    return {"add": 0, "mul": 1, "or": 0, "xor": 0, "and": -1 if info.min < 0 else int(info.max),
            "max": int(info.min), "min": int(info.max)}[op]


def gather_offset(index: tuple[Expr, ...], shape: tuple, loop_ranges: tuple[int, ...] = ()) -> Expr:
    """The row-major element offset a Gather of a ``shape`` binding reads, with each index
    clamped into its dim (``loop_ranges`` lets a clamp go where the index is known in range).
    The arithmetic is i32 when the binding has fewer than 2**31 elements (no Int64 needed on
    GPUs for i32 ids), else index; an index is clamped in its own width or wider, so a huge
    i64 index clamps rather than wraps. A run-time dim (a ``sizes.Size``) enters as the
    dispatch's value of it (``SizeValue``), in index arithmetic."""
    static = sizes.static_shape(shape)
    dtype = "i32" if static and int(np.prod(shape, dtype=np.int64)) < 2**31 else "index"
    offset: Expr | None = None
    stride = 1
    for ix, n in reversed(list(zip(index, shape))):
        term = _clamped(ix, n, dtype, loop_ranges)
        if stride != 1:
            term = Binary("mul", term, size_value(stride, dtype), dtype)
        offset = term if offset is None else Binary("add", term, offset, dtype)
        stride = stride * n
    return offset if offset is not None else Const(0, dtype)


def scatter_offset(place: tuple[Expr, ...], shape: tuple) -> Expr:
    """The row-major element offset (index) a scatter result writes at ``place`` in a binding
    of ``shape``, or -1 where an index of ``place`` lies outside its dim: that update is
    skipped (``Scatter``), which every backend tests as ``0 <= offset < elements``."""
    inside: Expr | None = None
    offset: Expr = Const(0, "index")
    stride = 1
    for k, (ix, n) in reversed(list(enumerate(zip(place, shape)))):
        fits = Binary("and", Compare("ge", ix, Const(0, "index")),
                      Compare("lt", ix, size_value(n, "index")), "i1")
        inside = fits if inside is None else Binary("and", fits, inside, "i1")
        term = ix if stride == 1 else Binary("mul", ix, size_value(stride, "index"), "index")
        offset = term if k == len(place) - 1 else Binary("add", term, offset, "index")
        stride = stride * n
    return offset if inside is None else Select(inside, offset, Const(-1, "index"), "index")


def _clamped(ix: Expr, n, dtype: str, loop_ranges: tuple[int, ...]) -> Expr:
    """``ix`` clamped into [0, n - 1], as ``dtype``; a side is left out where ``ix`` provably
    stays inside it. A widened narrow index is clamped before widening (the same value), so
    i32 ids need no 64-bit arithmetic."""
    while isinstance(ix, Cast) and int_bits(ix.x.dtype) <= int_bits(dtype) and (
            ix.op == "extui" if is_unsigned(ix.x.dtype) or ix.x.dtype == "i1" else ix.op == "extsi"):
        ix = ix.x
    if int_bits(ix.dtype) < int_bits(dtype):
        unsigned = is_unsigned(ix.dtype) or ix.dtype == "i1"
        ix = Cast("extui" if unsigned else "extsi", ix, dtype)
    lo, hi = interval(ix, loop_ranges)
    if lo < 0:
        ix = Binary("max", ix, Const(0, ix.dtype), ix.dtype)
    if not sizes.is_static(n):  # n - min(n, 1): the last index, 0 for an empty dim
        ix = Binary("min", ix, size_value(n - sizes.opaque("min", n, 1), ix.dtype), ix.dtype)
    elif hi > n - 1:
        ix = Binary("min", ix, Const(max(n - 1, 0), ix.dtype), ix.dtype)
    if ix.dtype != dtype:  # now in [0, n - 1], which dtype holds
        ix = Cast("trunci" if int_bits(ix.dtype) > int_bits(dtype) else "extui", ix, dtype)
    return ix


def decided(e: Compare, loop_ranges: tuple[int, ...]) -> bool | None:
    """The value of an integer comparison that holds (or fails) everywhere in the loop box, by
    the bounds of its sides; None where it depends on the point."""
    if is_float(e.a.dtype) or e.predicate not in ("lt", "le", "gt", "ge", "eq", "ne"):
        return None
    (alo, ahi), (blo, bhi) = interval(e.a, loop_ranges), interval(e.b, loop_ranges)
    if e.predicate in ("gt", "ge"):
        (alo, ahi), (blo, bhi) = (blo, bhi), (alo, ahi)
    strict = e.predicate in ("lt", "gt")
    if e.predicate in ("lt", "le", "gt", "ge"):
        if ahi < blo or (not strict and ahi <= blo):
            return True
        if alo > bhi or (strict and alo >= bhi):
            return False
        return None
    if alo == ahi == blo == bhi:
        return e.predicate == "eq"
    if ahi < blo or bhi < alo:
        return e.predicate == "ne"
    return None


def interval(e: Expr, loop_ranges: tuple[int, ...]) -> tuple[int, int]:
    """Bounds of the integer expression ``e``: tight through loop indices, constants, integer
    casts, add/sub/mul/max/min and division or remainder of a non-negative value by a positive
    constant; the dtype's whole range elsewhere and wherever a step could
    wrap."""
    full = int_range(e.dtype)
    if isinstance(e, Const):
        out = (int(e.value), int(e.value))
    elif isinstance(e, LoopIndex) and e.dim < len(loop_ranges) \
            and sizes.is_static(loop_ranges[e.dim]) and loop_ranges[e.dim] > 0:
        out = (0, loop_ranges[e.dim] - 1)
    elif isinstance(e, SizeValue):  # a push constant: uint32
        out = (0, 2**32 - 1)
    elif isinstance(e, Cast) and e.op in INT_CASTS and not is_float(e.x.dtype):
        out = interval(e.x, loop_ranges)
        if e.op == "extsi" and e.x.dtype == "i1":  # true is -1
            out = (-out[1], -out[0])
        elif not cast_keeps(e.op, e.x.dtype, e.dtype, *out):
            return full
    elif isinstance(e, Binary) and e.op in ("add", "sub", "mul", "max", "min"):
        a, b = interval(e.a, loop_ranges), interval(e.b, loop_ranges)
        if e.op == "add":
            out = (a[0] + b[0], a[1] + b[1])
        elif e.op == "sub":
            out = (a[0] - b[1], a[1] - b[0])
        elif e.op == "mul":
            corners = [x * y for x in a for y in b]
            out = (min(corners), max(corners))
        else:
            pick = max if e.op == "max" else min
            out = (pick(a[0], b[0]), pick(a[1], b[1]))
    elif isinstance(e, Binary) and e.op in ("div", "rem") and isinstance(e.b, Const) and e.b.value > 0:
        lo, hi = interval(e.a, loop_ranges)
        if lo < 0:
            return full
        c = int(e.b.value)
        out = (lo // c, hi // c) if e.op == "div" else (lo, hi) if hi < c else (0, c - 1)
    else:
        return full
    return out if full[0] <= out[0] and out[1] <= full[1] else full



def affine_of(e: Expr, loop_ranges: tuple[int, ...]) -> AffineExpr | None:
    """``e``, an integer expression of the loops, as one affine map over them where ``interval``
    proves the steps that are not affine to be no-ops over the loop box: a cast that keeps every
    value, ``x rem c`` of ``x`` in [0, c), ``x div c`` of it (0), a max or min whose one side
    always wins, a Select whose condition always holds or never does (PyTorch's wrap of a
    negative index, ``i < 0 ? i + n : i``, of an ``i`` that never is). None otherwise."""
    n = len(loop_ranges)
    if isinstance(e, LoopIndex) and e.dim < n:
        return AffineExpr(tuple(int(k == e.dim) for k in range(n)))
    if isinstance(e, Const) and not is_float(e.dtype):
        return AffineExpr((0,) * n, int(e.value))
    if isinstance(e, Cast) and e.op in INT_CASTS and not is_float(e.x.dtype) and e.x.dtype != "i1":
        return affine_of(e.x, loop_ranges) if cast_keeps(
            e.op, e.x.dtype, e.dtype, *interval(e.x, loop_ranges)) else None
    if isinstance(e, Select):
        holds = decided(e.cond, loop_ranges) if isinstance(e.cond, Compare) else None
        return None if holds is None else affine_of(e.a if holds else e.b, loop_ranges)
    if not isinstance(e, Binary) or is_float(e.dtype) or interval(e, loop_ranges) == int_range(e.dtype):
        return None  # (a step that may wrap: its interval is the dtype's whole range)
    a_lo, a_hi = interval(e.a, loop_ranges)
    b_lo, b_hi = interval(e.b, loop_ranges)
    if e.op in ("max", "min"):
        a_wins = (a_lo >= b_hi) if e.op == "max" else (a_hi <= b_lo)
        b_wins = (b_lo >= a_hi) if e.op == "max" else (b_hi <= a_lo)
        return affine_of(e.a, loop_ranges) if a_wins else \
            affine_of(e.b, loop_ranges) if b_wins else None
    if e.op in ("div", "rem") and isinstance(e.b, Const) and 0 <= a_lo and a_hi < e.b.value:
        return affine_of(e.a, loop_ranges) if e.op == "rem" else AffineExpr((0,) * n)
    a, b = affine_of(e.a, loop_ranges), affine_of(e.b, loop_ranges)
    if a is None or b is None:
        return None
    if e.op in ("add", "sub"):
        sign = 1 if e.op == "add" else -1
        return AffineExpr(tuple(x + sign * y for x, y in zip(a.coeffs, b.coeffs)),
                          a.const + sign * b.const)
    if e.op == "mul" and (not any(a.coeffs) or not any(b.coeffs)):
        scale, other = (a.const, b) if not any(a.coeffs) else (b.const, a)
        return AffineExpr(tuple(scale * c for c in other.coeffs), scale * other.const)
    return None


# ---- run-time sizes ---------------------------------------------------------------------------
# A kernel's run-time sizes are ``sizes.Size`` polynomials over the symbols p0, p1, ...: symbol pk
# is the dispatch's push constant k. They appear in loop ranges, binding shapes and (once
# normalization linearizes indices) the coefficients and constants of affine indices.

_PUSH_CONSTANT = re.compile(r"p(\d+)")


def _affines(kernel: Kernel):
    for r in kernel.results:
        yield from r.index
        for e in result_nodes(r):
            if isinstance(e, Load):
                yield from e.index


def _size_values(kernel: Kernel):
    """The sizes the kernel's expressions read as values (``SizeValue``)."""
    for r in kernel.results:
        for e in result_nodes(r):
            if isinstance(e, SizeValue):
                yield e.size


def has_run_time_sizes(kernel: Kernel) -> bool:
    """Whether some loop range, binding dim or affine index of ``kernel`` is a run-time size."""
    if not (sizes.static_shape(kernel.loop_ranges)
            and all(sizes.static_shape(b.shape) for b in kernel.bindings)):
        return True
    return any(not sizes.static_shape(ix.coeffs + (ix.const,)) for ix in _affines(kernel)) \
        or any(True for _ in _size_values(kernel))


def push_constant(symbol: str) -> int:
    """The push constant a kernel's size symbol names (pk: k)."""
    match = _PUSH_CONSTANT.fullmatch(symbol)
    if match is None:
        raise ValueError(f"kernel size symbol '{symbol}' is not a push constant (p0, p1, ...)")
    return int(match.group(1))


def push_constant_count(kernel: Kernel) -> int:
    """How many push constants ``kernel`` reads: one past the highest it names."""
    found = set()
    for value in (*kernel.loop_ranges, *(d for b in kernel.bindings for d in b.shape),
                  *(v for ix in _affines(kernel) for v in (*ix.coeffs, ix.const)),
                  *_size_values(kernel)):
        if not sizes.is_static(value):
            found |= value.symbols()
    return 1 + max((push_constant(s) for s in found), default=-1)


def size_code(value) -> list[int]:
    """The SizeExpr program (schemas/common.fbs) of a kernel size, symbol k its push constant k."""
    symbols = value.symbols() if not sizes.is_static(value) else ()
    return sizes.code(value, {s: push_constant(s) for s in symbols})


def bind_sizes(kernel: Kernel, values: dict[str, int]) -> Kernel:
    """``kernel`` with each size symbol named in ``values`` replaced by its value: with all of
    them, the static kernel of one dispatch (what ``evaluate`` runs, and what tests compare a
    dynamic kernel's code with)."""
    def bind(ix: AffineExpr) -> AffineExpr:
        return AffineExpr(tuple(sizes.substitute(c, values) for c in ix.coeffs),
                          sizes.substitute(ix.const, values))

    def leaf(e):
        if isinstance(e, SizeValue):
            return size_value(sizes.substitute(e.size, values), e.dtype)
        return dataclasses.replace(e, index=tuple(bind(ix) for ix in e.index)) \
            if isinstance(e, Load) else None

    return dataclasses.replace(
        kernel, loop_ranges=tuple(sizes.substitute(n, values) for n in kernel.loop_ranges),
        bindings=tuple(dataclasses.replace(b, shape=tuple(sizes.substitute(d, values) for d in b.shape))
                       for b in kernel.bindings),
        results=tuple(map_result(r, leaf, index=tuple(bind(ix) for ix in r.index))
                      for r in kernel.results))


def affine_bounds(ix: AffineExpr, ranges) -> tuple | None:
    """(lo, hi) of ``ix`` over the non-empty loop box ``ranges``, as sizes when some range or
    coefficient is one; None where a coefficient's sign is not known (``sizes.nonnegative``).
    ``ir.affine_range`` where all are ints."""
    lo = hi = ix.const
    for c, n in zip(ix.coeffs, ranges):
        if sizes.is_static(c) and c == 0:
            continue
        span = c * (n - 1)
        if sizes.nonnegative(c):
            hi = hi + span
        elif sizes.nonnegative(-c):
            lo = lo + span
        else:
            return None
    return lo, hi


def within(ix: AffineExpr, ranges, size) -> bool | None:
    """Whether ``ix`` stays in [0, size) over every non-empty loop box ``ranges`` (True), leaves it
    somewhere in every one (False), or neither is proven for every run-time size (None)."""
    bounds = affine_bounds(ix, ranges)
    if bounds is None:
        return None
    lo, hi = bounds
    if sizes.nonnegative(lo) and sizes.nonnegative(size - 1 - hi):
        return True
    if sizes.nonnegative(-1 - lo) or sizes.nonnegative(hi - size):
        return False
    return None


def contiguous_along_parallel(kernel: Kernel) -> bool:
    """True when more loads are unit-stride along the innermost parallel loop than the
    innermost reduction loop. A load that does not move along the parallel loop (a vector-matrix
    product's vector) is one scalar per step in either order and does not vote: counting it
    made ``x @ W`` (W read along the parallel loop) walk W down its columns, several times slower.
    A stride may be a run-time size (dynamic.py), which moves along its loop."""
    if kernel.num_parallel == 0:
        return False
    p, r = kernel.num_parallel - 1, len(kernel.loop_ranges) - 1
    value_loads = {e for res in kernel.results for e in walk(res.value) if isinstance(e, Load)}
    along_r = sum(1 for ld in value_loads if ld.index[0].coeffs[r] == 1 and ld.index[0].coeffs[p] != 0)
    along_p = sum(1 for ld in value_loads if ld.index[0].coeffs[p] == 1 and ld.index[0].coeffs[r] != 1)
    return along_p > along_r
