"""Sort, top-k and scan (``tm_tensor``, ``iree_linalg_ext``) as reduction Generics: counting
instead of a sorting network, so no backend needs a new kernel shape.

The counting sort of operands ``x_0..x_k`` along dimension ``d`` (length ``n``) with comparator
``cmp`` (true: the left element may stay before the right; MLIR's reference implementation
bubble-sorts with it):
  1. ``rank[i] = #{j : before(j, i)}``, ``before(j, i) = less(j, i) or (not less(i, j) and j < i)``
     with ``less(a, b) = cmp(a, b) and not cmp(b, a)``: the comparator made strict, ties kept in
     input order (stable, as the reference's bubble sort is for ``<=``/``>=`` comparators).
  2. ``position[i] = #{j : rank[j] < rank[i] or (rank[j] == rank[i] and j < i)}``: always a
     permutation, even for a comparator that is no strict weak order (NaNs under ``<``), so the
     result is a rearrangement of the input and never holds values that were not there. A
     recognised order (float keys made total: NaN last ascending) has distinct ranks already,
     and skips this step.
  3. ``out_k[p] = x_k[i]`` for the ``i`` whose position is ``p`` (``p < k`` for top-k).
A whole sort of a long line by a comparator recognised as a strict weak order (``sort_order``)
is a merge sort instead (``merge_sort``: O(n log^2 n)).
Scan: ``out[i]`` folds the combiner over the line up to ``i`` (inclusive: ``x[0..i]``; exclusive:
the accumulator's initial value, then ``x[0..i-1]``), one reduction masked by the step's index;
an inclusive scan whose combiner is one associative op (cumsum, cumprod) over a long line runs in
blocks instead (``_blocked_scan``: O(n^1.5)). Each counting step is O(n^2) per line and
parallel over every other index: right for short lines and top-k over a vocabulary.

Where every target walks a line on one core (``Backend.line_walks``: llvm-cpu) and the shape is
static, a sort or top-k by a recognised order is step 1's ranks marked ``kernel.LineSort`` (the
target sorts the line: O(n log n), a top-k's best k kept in a heap), then each operand stored
at its rank, ranks from ``k`` on skipped (``_scattered``); and a scan along a contiguous line is
the one-pass reduction marked ``kernel.LineScan`` (the target folds along the line once).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pyree.compiler.errors import CompileError
from pyree.compiler.input import threshold_top_k
from pyree.compiler.input.body import convert, lower_block
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.merge_sort import first_run, merge_sort, sort_cost
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.sort_order import strict_order
from pyree.compiler.input.tensor_ops import iota
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import (
    FOLDS,
    Acc,
    AffineExpr,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    LineScan,
    LineSort,
    Load,
    LoopIndex,
    Result,
    Scatter,
    Select,
    Unary,
    fold_identity,
    size_value,
)
from pyree.compiler.sizes import is_static, static_shape
from pyree.compiler.tensor_program import Constant, Generic, Value, View
from xdsl.ir import Operation

COUNT = "i32"  # ranks and positions: lines are far shorter than 2**31
BITS = {"f16": "i16", "bf16": "i16", "f32": "i32", "f64": "i64"}  # a float's bits, to or together
# (lhs elements, rhs elements, the Generic's inputs) -> i1: "lhs may stay before rhs"
Comparator = Callable[[list[Expr], list[Expr], Inputs], Expr]


def lower_sort(fn: FunctionLowering, op: Operation) -> None:
    """``sort dimension(d) outs(x_0, ...)``: the sorted operands."""
    where = location_of(op)
    num_ins = op.properties["num_ins"].value.data  # ins(x) outs(empty): x sorted into empty
    operands = [fn.tensor(v, where) for v in op.operands[:num_ins or None]]
    d = op.properties["dimension"].value.data
    k = _leading_slice(op, operands[0].shape, d)
    if k is not None:  # only the first k are read: a top-k (the slices then take all of it)
        sorted_values = top_k(fn, region_comparators(fn, op, len(operands), where), operands, d,
                              k, op.name, where)
    else:
        comparator = region_comparator(fn, op, len(operands), len(operands[0].shape) + 1, where)
        sorted_values = sort_values(fn, operands, d, None, comparator, op.name, where)
    for result, value in zip(op.results, sorted_values, strict=True):
        fn.env[result] = value


def _leading_slice(op: Operation, shape: tuple[int, ...], d: int) -> int | None:
    """``k`` where every use of the sort's results is a static ``tensor.extract_slice`` of
    their first ``k < n`` along ``d``, whole along the other dimensions: PyTorch's ``topk``,
    which torch-mlir lowers to a whole sort and a slice. A line of run-time length stays a sort
    (its slice then checks the length at run time)."""
    if not is_static(shape[d]):
        return None
    lengths = set()
    for result in op.results:
        for use in result.uses:
            user = use.operation
            if user.name != "tensor.extract_slice" or user.offsets or user.sizes or user.strides:
                return None
            offsets, sizes, strides = (list(p.get_values()) for p in (
                user.static_offsets, user.static_sizes, user.static_strides))
            if any(offsets) or any(s != 1 for s in strides) or any(
                    n != shape[j] for j, n in enumerate(sizes) if j != d):
                return None
            lengths.add(sizes[d])
    return lengths.pop() if len(lengths) == 1 and 0 < min(lengths) < shape[d] else None


def lower_topk(fn: FunctionLowering, op: Operation) -> None:
    """``topk dimension(d) ins(values[, indices]) outs(out_values, out_indices)``: the first
    ``k`` (the outputs' length along ``d``) of the values sorted by the comparator, with their
    indices (given, else the positions along ``d``)."""
    where = location_of(op)
    num_ins = op.properties["num_ins"].value.data
    ins = [fn.tensor(v, where) for v in op.operands[:num_ins]]
    d = op.properties["dimension"].value.data
    if num_ins == 1:
        ins.append(iota(fn, ins[0].shape, d, tensor_type_of(op.results[1].type, where)[0], where))
    k = tensor_type_of(op.results[0].type, where)[1][d]
    for result, value in zip(op.results, top_k(fn, region_comparators(fn, op, 1, where), ins, d, k,
                                               op.name, where), strict=True):
        fn.env[result] = value


def top_k(fn: FunctionLowering, comparators: Callable[[int], Comparator], operands: list[Value],
          d: int, k: int, origin: str, where: str) -> list[Value]:
    """The first ``k`` along ``d`` of ``operands`` sorted by ``comparators(loops)`` (the
    comparator inside a Generic of that many loops), as ``topk_plan`` finds it cheapest: whole,
    or each chunk's first ``k`` and then theirs (and the rest past the last whole chunk); each
    first ``k`` by counting, or as the head of a merge sort."""
    rank, n = len(operands[0].shape), operands[0].shape[d]
    comparator = comparators(rank + 1)
    order = strict_order(comparator, [v.dtype for v in operands])
    ordered = order is not None
    if ordered and _by_sorting(fn, operands[0].shape, d):
        return sort_values(fn, operands, d, k, comparator, origin, where)
    others = [q for j, q in enumerate(operands[0].shape) if j != d]
    lines = math.prod(others) if all(is_static(q) for q in others) else 1
    plan = topk_plan(n, k, ordered, lines)
    if threshold_top_k.applies(operands[0].shape, d, k, order) and \
            threshold_top_k.search_cost(n, k, lines, order, fn.dispatch_cost) < plan.cost:
        return threshold_top_k.threshold_top_k(fn, operands, d, k, order, emit_scan, origin, where)
    if plan.chunk:  # the first k of each chunk, then the first k of those and of the rest
        chunks = [_regroup(fn, v, d, plan.chunk, where) for v in operands]
        firsts = _first_k(fn, chunks, d + 1, k, comparators(rank + 2), plan.chunk_merges, origin,
                          where)
        candidates = [_regroup(fn, v, d, None, where) for v in firsts]
        if n % plan.chunk:
            candidates = [_with_rest(fn, c, v, d, n - n % plan.chunk, where)
                          for c, v in zip(candidates, operands)]
        operands = candidates
    return _first_k(fn, operands, d, k, comparator, plan.merges, origin, where)


def _with_rest(fn: FunctionLowering, candidates: Value, v: Value, d: int, start: int,
               where: str) -> Value:
    """``candidates`` followed along ``d`` by ``v``'s elements from ``start`` on (those past
    the whole chunks), which come after every chunk's in the line, as in ``v``."""
    shape, rank = candidates.shape, len(candidates.shape)
    m = shape[d]
    out_shape = shape[:d] + (m + v.shape[d] - start,) + shape[d + 1:]
    here, inputs = AffineExpr.identity(rank), Inputs()
    rest = here[:d] + (AffineExpr(here[d].coeffs, start - m),) + here[d + 1:]
    value = Select(Compare("lt", LoopIndex(d), Const(m, "index")), inputs.load(candidates, here),
                   inputs.load(v, rest), v.dtype)
    out = fn.new_value(v.dtype, out_shape, "candidates")
    fn.emit(Generic(inputs.values, [out], (Result(0, here, value),), out_shape, rank, where,
                    "topk"))
    return out


def _first_k(fn: FunctionLowering, operands: list[Value], d: int, k: int, comparator: Comparator,
             by_merging: bool, origin: str, where: str) -> list[Value]:
    if by_merging:
        whole = sort_values(fn, operands, d, None, comparator, origin, where)  # merged
        return [_leading(fn, v, d, k, origin, where) for v in whole]
    return sort_values(fn, operands, d, k, comparator, origin, where)


@dataclass(frozen=True)
class TopKPlan:
    """How ``top_k`` takes the first ``k`` of a line of ``n``: split in ``n // chunk`` chunks of
    ``chunk`` (None: whole), whose first ``k`` come from a merge sort of each (``chunk_merges``)
    or from counting; then the first ``k`` of what is left (the line, or the chunks' ``k`` each
    and the ``n % chunk`` past them) by merging (``merges``) or counting. ``cost``: loop
    steps over all the lines, as ``merge_sort.sort_cost`` counts them, and the Generics'."""

    cost: float
    chunk: int | None = None
    chunk_merges: bool = False
    merges: bool = False


# Loop steps per line that one more Generic is worth: a GPU launch (a few µs) in which an
# H200 runs about 8 million steps. It keeps short lines counted in few kernels, where
# merging would cost a launch per pass.
GENERIC_STEPS = 1 << 23


def topk_plan(n, k: int, ordered: bool, lines: int = 1) -> TopKPlan:
    """The cheapest plan for ``lines`` lines. Counting the first ``k`` of a line of ``m``
    compares every pair (``m * m``, then ``m * k`` to pick: two Generics); a merge sort (for a
    recognised order) costs ``m * sort_cost`` and a Generic per pass. Steps count per line,
    Generics once (a batch of 64 classifier rows of 1000 is counted in chunks, as one row of
    32000 is). The chunks' candidates keep the line's
    order, chunk by chunk, each chunk's in its sorted order, so ties still resolve by index,
    as in one pass. A vocabulary's top-50 (32000) is counted in chunks of 640; a top-1000 of a
    million merges chunks of 8192 (counting chunks had cost 25 times more steps)."""
    if not is_static(n):
        return TopKPlan(0.0)

    def first_k(m: int) -> tuple[int, int, bool]:  # loop steps, Generics, by merging
        counting = (m * m + m * k, 2, False)
        if ordered and merges(m):
            run = first_run(m)
            generics = 3 + (2 if run > 1 else 0) + (m - 1).bit_length() - (run - 1).bit_length()
            merging = (m * sort_cost(m, run), generics, True)
            return min(counting, merging, key=lambda p: p[0] + p[1] * GENERIC_STEPS)
        return counting

    steps, generics, by_merging = first_k(n)
    best = TopKPlan(lines * steps + generics * GENERIC_STEPS, merges=by_merging)
    for c in _chunk_sizes(n):
        if k < c <= n // 2:  # each chunk's Generics run once for all the chunks
            chunk_steps, chunk_generics, chunk_merges = first_k(c)
            rest_steps, rest_generics, rest_merges = first_k(n // c * k + n % c)
            regroupings = 2 + (n % c > 0)  # chunks, candidates, and the rest appended
            cost = (lines * (n // c * chunk_steps + rest_steps)
                    + (chunk_generics + rest_generics + regroupings) * GENERIC_STEPS)
            if cost < best.cost:
                best = TopKPlan(cost, c, chunk_merges, rest_merges)
    return best


def _chunk_sizes(n: int) -> list[int]:
    """The divisors of ``n`` and, for a line few divide (a prime), sizes about 19% apart, whose
    last chunk leaves a rest (fewer elements than a chunk) that joins the candidates whole."""
    small = [c for c in range(1, math.isqrt(n) + 1) if n % c == 0]
    steps = {round(2 ** (e / 4)) for e in range(4 * n.bit_length())}
    return sorted({*small, *(n // c for c in small), *(c for c in steps if c <= n)})


def _regroup(fn: FunctionLowering, v: Value, d: int, chunk: int | None, where: str) -> Value:
    """``v`` with dimension ``d`` split into (n / chunk, chunk), or (``chunk`` None) dimensions
    ``d`` and ``d + 1`` joined: a copy, so that the counting passes read plain lines."""
    shape, rank = v.shape, len(v.shape)
    if chunk is None:
        out_shape = shape[:d] + (shape[d] * shape[d + 1],) + shape[d + 2:]
    else:
        out_shape = shape[:d] + (shape[d] // chunk, chunk) + shape[d + 1:]
    loops = AffineExpr.identity(len(out_shape))
    out_rank = len(out_shape)
    if chunk is None:  # out[.., i, ..] = v[.., i // m, i % m, ..]: read v's loops, write joined
        m = shape[d + 1]
        index = AffineExpr.identity(rank)
        joined = AffineExpr(tuple(m if l == d else 1 if l == d + 1 else 0 for l in range(rank)))
        out_index = index[:d] + (joined,) + index[d + 2:]
        inputs = Inputs()
        value = fn.new_value(v.dtype, out_shape, "candidates")
        fn.emit(Generic(inputs.values, [value], (Result(0, out_index, inputs.load(v, index)),),
                        shape, rank, where, "topk"))
        return value
    split = AffineExpr(tuple(chunk if l == d else 1 if l == d + 1 else 0 for l in range(out_rank)))
    inputs = Inputs()
    value = fn.new_value(v.dtype, out_shape, "chunks")
    read = inputs.load(v, loops[:d] + (split,) + loops[d + 2:])
    fn.emit(Generic(inputs.values, [value], (Result(0, loops, read),), out_shape, out_rank, where,
                    "topk"))
    return value


def lower_scan(fn: FunctionLowering, op: Operation) -> None:
    """``scan dimension(d) inclusive(b) ins(x) outs(out, acc)``: (the scan, its last value).
    As MLIR's reference: ``out[0]`` is ``x[0]`` (inclusive) or the accumulator's initial value,
    ``out[i] = f(out[i-1], x[i])`` (inclusive) or ``f(out[i-1], x[i-1])``, and the accumulator
    ends as ``out[n-1]`` -- or as it began when the line has one element."""
    where = location_of(op)
    x = fn.tensor(op.operands[0], where)
    acc_init = fn.tensor(op.operands[2], where)
    d = op.properties["dimension"].value.data
    inclusive = bool(op.properties["inclusive"].value.data)
    shape, rank = x.shape, len(x.shape)
    n = shape[d]
    out = fn.bind_value(op.results[0], x.dtype, shape)  # run-time sizes too: the input's shape
    block = op.regions[0].block

    def combine(previous: Expr, element: Expr, inputs: Inputs, loops: int) -> Expr:
        return lower_block(fn, block, dict(zip(block.args, (previous, element))), inputs,
                           list(range(loops)), where)[0]

    first = (None if inclusive else
             lambda inputs, loops: inputs.load(acc_init, tuple(loops[k] for k in range(rank) if k != d)))
    emit_scan(fn, x, d, combine, first, out, op.name, where)
    inputs = Inputs()
    lines = AffineExpr.identity(rank - 1)
    if not is_static(n):  # the line's last element, at a run-time place (a line of 0: the start)
        at = tuple(Binary("sub", size_value(n, "index"), Const(1, "index"), "index") if k == d
                   else LoopIndex(k - (k > d)) for k in range(rank))
        last = Select(Compare("gt", size_value(n, "index"), Const(0, "index")),
                      inputs.gather(out, at, where), inputs.load(acc_init, lines), x.dtype)
    else:
        last = (inputs.load(out, tuple(AffineExpr((0,) * (rank - 1), n - 1) if k == d
                                       else lines[k - (k > d)] for k in range(rank)))
                if n > 1 else inputs.load(acc_init, lines))
    acc_out = fn.bind_value(op.results[1], acc_init.dtype, acc_init.shape)
    fn.emit(Generic(inputs.values, [acc_out], (Result(0, lines, last),), acc_init.shape,
                    rank - 1, where, op.name))


def emit_scan(fn: FunctionLowering, x: Value, d: int, combine, first, out: Value, origin: str,
              where: str, seed: Expr | None = None, associative: bool = False) -> None:
    """``out``: the scan of ``x`` along ``d`` (``first`` as ``_scan_pass``'s; None: inclusive),
    walked where the target walks the line, in blocks where the combiner is associative (one
    fold op, or ``associative``: the caller knows a body of several ops is) and the line long,
    else in one counted pass. ``combine(previous, element, inputs, loops)``. ``seed``
    (inclusive scans): a constant folded in before the first element."""
    shape, rank, n = x.shape, len(x.shape), x.shape[d]
    walked = _walks_line(fn, shape, d)
    fold = associative_fold(combine, x.dtype)
    blocks = (scan_chunk(n) if first is None and (fold or (associative and seed is not None))
              and not walked else None)
    if is_static(n) and n <= 1:
        inputs = Inputs()
        loops = AffineExpr.identity(rank)
        value = inputs.load(x, loops) if first is None else first(inputs, loops)
        if seed is not None:
            value = combine(seed, value, inputs, rank)
        fn.emit(Generic(inputs.values, [out], (Result(0, loops, value),), shape, rank, where, origin))
    elif blocks and blocks[1] == n:
        _blocked_scan(fn, x, d, blocks[0], fold, combine, out, origin, where, seed)
    elif blocks:  # the line padded at its end to whole blocks: no output reads the padding
        _padded_blocked_scan(fn, x, d, blocks, fold, combine, out, origin, where, seed)
    else:
        _scan_pass(fn, x, d, combine, first, out, origin, where, LineScan(d) if walked else None, seed)


def _padded_blocked_scan(fn: FunctionLowering, x: Value, d: int, blocks: tuple[int, int],
                         fold: str | None, combine, out: Value, origin: str, where: str,
                         seed: Expr | None) -> None:
    (chunk, length), shape, rank = blocks, x.shape, len(x.shape)
    n = shape[d]
    wide = shape[:d] + (length,) + shape[d + 1:]
    padded, scanned = fn.new_value(x.dtype, wide, "scan_padded"), fn.new_value(x.dtype, wide, "scanned")
    loops = AffineExpr.identity(rank)
    inputs = Inputs()
    value = Select(Compare("lt", LoopIndex(d), Const(n, "index")), inputs.load(x, loops),
                   Const(0, x.dtype), x.dtype)
    fn.emit(Generic(inputs.values, [padded], (Result(0, loops, value),), wide, rank, where, origin))
    _blocked_scan(fn, padded, d, chunk, fold, combine, scanned, origin, where, seed)
    inputs = Inputs()
    fn.emit(Generic(inputs.values, [out], (Result(0, loops, inputs.load(scanned, loops)),), shape,
                    rank, where, origin))


def _scan_pass(fn: FunctionLowering, x: Value, d: int, combine, first, out: Value, origin: str,
               where: str, line: LineScan | None = None, seed: Expr | None = None) -> None:
    """``out``: the scan of ``x`` along ``d`` in one pass, each element folding the line up to
    itself in order (exactly the reference's rounding). ``first(inputs, loops)`` is the exclusive
    scan's start; None makes it inclusive. ``line``: a target may walk the line instead."""
    shape, rank = x.shape, len(x.shape)
    inputs = Inputs()
    loops = AffineExpr.identity(rank + 1)  # the element's loops, then step j (it makes out[j + 1])
    here = loops[:rank]
    consumed = tuple(AffineExpr.loop(rank + 1, rank, const=int(first is None)) if k == d else loops[k]
                     for k in range(rank))
    step = combine(Acc(0, x.dtype), inputs.load(x, consumed), inputs, rank + 1)
    start = (inputs.load(x, tuple(AffineExpr((0,) * (rank + 1)) if k == d else loops[k]
                                  for k in range(rank))) if first is None
             else first(inputs, loops))
    if seed is not None:
        start = combine(seed, start, inputs, rank + 1)
    taken = Compare("lt", LoopIndex(rank), LoopIndex(d))  # step j makes out[j + 1]: j < i
    result = Result(0, here, Select(taken, step, Acc(0, x.dtype), x.dtype), init=start)
    fn.emit(Generic(inputs.values, [out], (result,), shape + (shape[d] - 1,), rank, where, origin,
                    line=line))


def _walks_line(fn: FunctionLowering, shape: tuple, d: int) -> bool:
    """Whether a scan along ``d`` of ``shape`` is walked (``kernel.LineScan``): where every
    target walks lines, the shape is static and the line contiguous (a line along an outer dim
    is scanned in blocks whose folds run along the rows, which a walk down a column would not
    keep in cache)."""
    return (fn.line_walks and static_shape(shape) and shape[d] >= 2
            and all(n == 1 for n in shape[d + 1:]))


def associative_fold(combine, dtype: str) -> str | None:
    """The fold (``add``, ``max``, ...) when the scan's combiner is one associative op of the
    running value and the element, in either order; None otherwise."""
    element = Load(-1, (), dtype)  # a stand-in no region can produce itself (a constant could)
    step = combine(Acc(0, dtype), element, Inputs(), 1)
    if isinstance(step, Binary) and step.op in FOLDS and {step.a, step.b} == {Acc(0, dtype), element}:
        return step.op
    return None


_PADDED_SCAN = 512  # a shorter line's pass costs less than the two more kernels padding takes


def scan_chunk(n) -> tuple[int, int] | None:
    """(the chunk length, the line's length padded to whole chunks) of a scan in blocks, or
    None where one pass costs no more than twice that. One pass folds every element's prefix,
    ``n * n / 2`` steps; blocks of ``c`` fold within each block (``n * c / 2``), then the
    blocks' totals (``(n / c)^2 / 2``), and add each block's offset (``n``): cumsum over 8192
    costs about 200 times less in blocks of 32. A chunk that divides ``n`` is taken unless
    padding the line (a copy in and out) to another's multiple costs less than half as much: a
    prime line (8191) had no blocks and took 35x PyTorch's cumsum on the H200."""
    if not is_static(n):
        return None

    def cost(c: int, length: int) -> float:
        return length * c / 2 + (length // c) ** 2 / 2 + length + (2 * length if length > n else 0)
    divisors = {(c, n): cost(c, n) for c in range(2, n // 2 + 1) if n % c == 0}
    padded = {(c, -(-n // c) * c): cost(c, -(-n // c) * c)
              for c in range(2, n // 2 + 1 if n >= _PADDED_SCAN else 2)}
    best = min(divisors, key=divisors.get, default=None)
    other = min(padded, key=padded.get, default=None)
    if other is not None and (best is None or 2 * padded[other] < divisors[best]):
        best, divisors = other, padded
    return best if best is not None and 2 * divisors[best] <= n * n / 2 else None


def _blocked_scan(fn: FunctionLowering, x: Value, d: int, chunk: int, fold: str | None, combine,
                  out: Value, origin: str, where: str, seed: Expr | None = None) -> None:
    """An inclusive scan with an associative combiner in blocks of ``chunk`` along ``d``: each
    block's own scan, the exclusive scan of the blocks' totals (from the fold's identity, or the
    seed: a body of several ops has no identity pyree knows), then
    ``out = f(offset of the block, block scan)``. Floats are summed in another order than the
    one-pass reference's (as a split reduction's are, and as GPU libraries scan): each element's
    rounding error is that of a two-level sum, not of one running sum."""
    shape, rank = x.shape, len(x.shape)
    blocks = shape[:d] + (shape[d] // chunk, chunk) + shape[d + 1:]
    split = fn.new_value(x.dtype, blocks, "scan_blocks")
    fn.emit(View(split, x, 0, where))
    local = fn.new_value(x.dtype, blocks, "block_scan")
    _scan_pass(fn, split, d + 1, combine, None, local, origin, where)
    # each block's total: its scan's last element
    inputs = Inputs()
    lines = AffineExpr.identity(rank)
    totals = fn.new_value(x.dtype, shape[:d] + (blocks[d],) + shape[d + 1:], "block_totals")
    last = inputs.load(local, lines[:d + 1] + (AffineExpr((0,) * rank, chunk - 1),) + lines[d + 1:])
    fn.emit(Generic(inputs.values, [totals], (Result(0, lines, last),), totals.shape, rank, where,
                    origin))
    start = Const(fold_identity(fold, x.dtype), x.dtype) if seed is None else seed
    offsets = fn.new_value(x.dtype, totals.shape, "block_offsets")
    _scan_pass(fn, totals, d, combine, lambda inputs, loops: start, offsets, origin, where)
    # out[.., c * chunk + r, ..] = f(offsets[.., c, ..], local[.., c, r, ..])
    inputs = Inputs()
    loops = AffineExpr.identity(rank + 1)
    joined = AffineExpr(tuple(chunk if k == d else 1 if k == d + 1 else 0 for k in range(rank + 1)))
    value = combine(inputs.load(offsets, loops[:d + 1] + loops[d + 2:]), inputs.load(local, loops),
                    inputs, rank + 1)
    fn.emit(Generic(inputs.values, [out], (Result(0, loops[:d] + (joined,) + loops[d + 2:], value),),
                    blocks, rank + 1, where, origin))


def sort_values(fn: FunctionLowering, operands: list[Value], d: int, k: int | None,
                comparator: Comparator, origin: str, where: str) -> list[Value]:
    """``operands`` sorted along ``d`` (the first ``k`` along it, when given) by ``comparator``,
    which builds the i1 "lhs may stay before rhs" from the operands' elements at two places.
    A whole sort by a recognised order (``sort_order``) of a line long enough is a merge sort
    (``merge_sort``); everything else counts."""
    shape, rank = operands[0].shape, len(operands[0].shape)
    if any(v.shape != shape for v in operands):
        raise CompileError(f"{origin}: operands of different shapes", where)
    order = strict_order(comparator, [v.dtype for v in operands])
    by_sorting = order is not None and _by_sorting(fn, shape, d)
    if k is None and order is not None and merges(shape[d]) and not by_sorting:
        return merge_sort(fn, operands, d, order, origin, where)
    loops = AffineExpr.identity(rank + 1)  # the element's loops, then j along d
    here = loops[:rank]
    there = tuple(AffineExpr.loop(rank + 1, rank) if k_ == d else loops[k_] for k_ in range(rank))
    j_first = Compare("lt", LoopIndex(rank), LoopIndex(d))

    inputs = Inputs()  # 1. each element's rank

    def at(index) -> list[Expr]:
        return [inputs.load(v, index) for v in operands]

    if order is not None:
        def strictly(a, b) -> Expr:
            return order.less(at(a), at(b))
    else:
        def strictly(a, b) -> Expr:
            return Binary("and", comparator(at(a), at(b), inputs),
                          Unary("not", comparator(at(b), at(a), inputs), "i1"), "i1")

    before = Binary("or", strictly(there, here),
                    Binary("and", Unary("not", strictly(here, there), "i1"), j_first, "i1"), "i1")
    line = LineSort(d, shape[d] if k is None else k) if by_sorting else None
    positions = _count(fn, inputs, before, shape, d, origin, where, "rank", line,
                       line.rank_dtype(shape[d]) if line else COUNT)
    if by_sorting:
        return [_scattered(fn, v, positions, d, k, origin, where) for v in operands]

    if order is None:  # 2. each element's position: its rank, ties broken by index
        inputs = Inputs()  # (a strict weak order's ranks are a permutation already)
        r_here, r_there = inputs.load(positions, here), inputs.load(positions, there)
        earlier = Binary("or", Compare("lt", r_there, r_here),
                         Binary("and", Compare("eq", r_there, r_here), j_first, "i1"), "i1")
        positions = _count(fn, inputs, earlier, shape, d, origin, where, "position")

    inputs = Inputs()  # 3. out[p] = the element at position p
    out_shape = tuple(k if k is not None and k_ == d else s for k_, s in enumerate(shape))
    hit = Compare("eq", inputs.load(positions, there), Cast("trunci", LoopIndex(d), COUNT))
    results, values = [], []
    for n, v in enumerate(operands):
        # The bits of the one element whose position is p, or-ed with zeros: a plain fold,
        # exact in any order (NaN payloads and -0.0 kept), which the GPU spreads over a block
        # like any sum, where picking the element in sequence took a thread a whole line.
        bits = BITS.get(v.dtype, v.dtype)
        element = inputs.load(v, there)
        if bits != v.dtype:
            element = Cast("bitcast", element, bits)
        none = Const(False if bits == "i1" else 0, bits)
        results.append(Result(n, here, Binary("or", Acc(n, bits), Select(hit, element, none, bits),
                                              bits), init=none,
                              epilogue=None if bits == v.dtype else Cast("bitcast", Acc(n, bits), v.dtype)))
        values.append(fn.new_value(v.dtype, out_shape, f"sorted{n}"))
    fn.emit(Generic(inputs.values, values, tuple(results), out_shape + (shape[d],), rank, where,
                    origin))
    return values


def _by_sorting(fn: FunctionLowering, shape: tuple, d: int) -> bool:
    """Whether lines along ``d`` of ``shape`` are ranked by sorting (``kernel.LineSort``):
    where every target sorts a line's ranks and the shape is static."""
    return fn.line_walks and static_shape(shape) and 2 <= shape[d] < 2**31


def _scattered(fn: FunctionLowering, v: Value, ranks: Value, d: int, k: int | None, origin: str,
               where: str) -> Value:
    """``v``'s elements stored at their ranks along ``d``, those ranked ``k`` or later
    skipped (past the result's end): a scatter of distinct places, each a plain store."""
    shape, rank = v.shape, len(v.shape)
    out_shape = tuple(k if k is not None and q == d else n for q, n in enumerate(shape))
    start = fn.new_value(v.dtype, out_shape, "sort_start")
    fn.emit(Constant(start, splat=False if v.dtype == "i1" else 0, location=where))
    inputs, here = Inputs(), AffineExpr.identity(rank)
    place = tuple(convert(inputs.load(ranks, here), "index") if q == d else LoopIndex(q)
                  for q in range(rank))
    result = Result(0, (), inputs.load(v, here), scatter=Scatter(place, inputs.binding(start)))
    value = fn.new_value(v.dtype, out_shape, "sorted")
    fn.emit(Generic(inputs.values, [value], (result,), shape, rank, where, origin))
    return value


def _leading(fn: FunctionLowering, v: Value, d: int, k: int, origin: str, where: str) -> Value:
    """The first ``k`` of ``v`` along ``d``."""
    shape = tuple(k if q == d else s for q, s in enumerate(v.shape))
    inputs, here = Inputs(), AffineExpr.identity(len(shape))
    read = inputs.load(v, here)
    value = fn.new_value(v.dtype, shape, "leading")
    fn.emit(Generic(inputs.values, [value], (Result(0, here, read),), shape, len(shape), where,
                    origin))
    return value


def merges(n) -> bool:
    """Whether a line of ``n`` sorts cheaper by merging than by counting it whole (a merge sort
    from runs of ``n``); the merge's places (up to ``2 n``) are i32."""
    return is_static(n) and n < 2**30 and first_run(n) < n


def region_comparators(fn: FunctionLowering, op: Operation, compared: int,
                       where: str) -> Callable[[int], Comparator]:
    """``region_comparator`` for a Generic of any number of loops (``top_k``'s passes)."""
    return lambda num_loops: region_comparator(fn, op, compared, num_loops, where)


def region_comparator(fn: FunctionLowering, op: Operation, compared: int,
                       num_loops: int, where: str) -> Comparator:
    """The op's comparator region (arguments: lhs, rhs of each of the first ``compared``
    operands) as a Comparator."""
    block = op.regions[0].block
    if len(block.args) != 2 * compared:
        raise CompileError(f"{op.name}: the comparator takes {len(block.args)} arguments, "
                           f"expected {2 * compared}", where)

    def comparator(lhs: list[Expr], rhs: list[Expr], inputs: Inputs) -> Expr:
        args = {}
        for n in range(compared):
            args[block.args[2 * n]], args[block.args[2 * n + 1]] = lhs[n], rhs[n]
        return lower_block(fn, block, args, inputs, list(range(num_loops)), where)[0]
    return comparator


def _count(fn: FunctionLowering, inputs: Inputs, condition: Expr, shape: tuple[int, ...],
           d: int, origin: str, where: str, name: str, line: LineSort | None = None,
           dtype: str = COUNT) -> Value:
    """``#{j : condition}`` for every element, ``j`` the reduction loop along dimension ``d``
    (``line``: the ranks of a strict total order, which a target may sort instead)."""
    rank = len(shape)
    value = fn.new_value(dtype, shape, name)
    step = Binary("add", Acc(0, dtype),
                  Select(condition, Const(1, dtype), Const(0, dtype), dtype), dtype)
    result = Result(0, AffineExpr.identity(rank + 1)[:rank], step, init=Const(0, dtype))
    fn.emit(Generic(inputs.values, [value], (result,), shape + (shape[d],), rank, where, origin,
                    line=line))
    return value
