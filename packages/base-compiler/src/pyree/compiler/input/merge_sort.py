"""A stable sort along a line in O(n log^2 n) as plain Generics: a bottom-up merge sort whose
every pass is a gather (each output place finds what it holds; nothing is written at a computed
place), so no backend needs a sorting kernel.

First each run of a few tens (``first_run``) is sorted by counting, as ``sort_scan`` counts
whole lines. Then pass ``r`` (doubling up to ``n``) merges the sorted runs ``A = [base, base + r)`` and
``B = [base + r, base + 2r)`` (clipped at ``n``) into ``[base, base + 2r)``. Output place ``k``
(``t = k - base`` into its pair) holds, of the merge's first ``t`` elements, ``a`` from ``A``
and ``t - a`` from ``B``; ``a`` is the largest split whose last ``A`` element precedes the
``B`` element it would pass (merge path), found by a binary search written as a reduction over
the bits of ``a``, high to low: ``acc = lo``; ``acc + 2^b`` where that split still holds. Then
``k`` holds ``A[a]`` unless ``B[t - a]`` is strictly less (ties take ``A``: stable). One
Generic finds each place's source index, a second moves every operand there.

This needs ``less`` to be a strict weak order (``sort_order.strict_order``): for one that is
not, the splits of neighbouring places may disagree and an element be taken twice.
"""

from __future__ import annotations

from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.scalar import zero
from pyree.compiler.input.sort_order import Less
from pyree.compiler.kernel import (
    Acc,
    AffineExpr,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Gather,
    LoopIndex,
    Result,
    Select,
    Unary,
)
from pyree.compiler.tensor_program import Generic, Value

INDEX = "i32"  # places along a line: lines are far shorter than 2**31
PASS_COST = 16  # loop steps per element that one more Generic (a trip through memory) is worth


def merge_sort(fn, operands: list[Value], d: int, less: Less, compared: set[int], origin: str,
               where: str) -> list[Value]:
    """``operands`` sorted along ``d`` (a static length) by ``less``, which reads the
    operands numbered in ``compared``."""
    n = operands[0].shape[d]
    r = first_run(n)
    if r > 1:
        operands = _sorted_runs(fn, operands, d, r, less, compared, origin, where)
    while r < n:
        source = _merge_path(fn, operands, d, r, less, compared, origin, where)
        operands = _move(fn, operands, d, source, origin, where)
        r *= 2
    return operands


def first_run(n: int) -> int:
    """The length of the runs sorted by counting before the first merge: the cheapest by
    ``sort_cost``."""
    return min((1 << p for p in range(max(n - 1, 0).bit_length() + 1)),
               key=lambda r: (sort_cost(n, r), r))


def sort_cost(n: int, run: int) -> int:
    """Loop steps per element of a merge sort of a line of ``n`` from runs of ``run`` sorted by
    counting (two Generics of ``run`` steps: ranks, then the pick), each of the merges taking
    the bits of its run length to search and one step to move, where every Generic also costs
    a trip through memory, counted as ``PASS_COST`` steps."""
    cost = 2 * (run + PASS_COST) if run > 1 else 0
    r = run
    while r < n:
        cost += r.bit_length() + 1 + 2 * PASS_COST
        r *= 2
    return cost


def _c(v: int) -> Const:
    return Const(v, INDEX)


def _op(op: str, a: Expr, b: Expr) -> Expr:
    return Binary(op, a, b, INDEX)


def _and(a: Expr, b: Expr) -> Expr:
    return Binary("and", a, b, "i1")


def _merge_path(fn, operands: list[Value], d: int, r: int, less: Less, compared: set[int],
                origin: str, where: str) -> Value:
    """Each place's source index along the line for the merge of runs of ``r``."""
    shape, rank = operands[0].shape, len(operands[0].shape)
    n = shape[d]
    bits = r.bit_length()  # the split ranges over at most r + 1 values
    inputs = Inputs()

    def at(place: Expr) -> list[Gather | None]:
        index = tuple(place if q == d else LoopIndex(q) for q in range(rank))
        return [inputs.gather(v, index, where) if m in compared else None
                for m, v in enumerate(operands)]

    k = Cast("trunci", LoopIndex(d), INDEX)
    t = _op("rem", k, _c(2 * r))
    base = _op("sub", k, t)
    a_len = _op("min", _c(r), _op("sub", _c(n), base))
    b_len = _op("max", _c(0), _op("min", _c(r), _op("sub", _c(n - r), base)))
    lo = _op("max", _c(0), _op("sub", t, b_len))
    hi = _op("min", t, a_len)

    def precedes(a: Expr, b: Expr) -> Expr:
        """Whether A[a] goes before B[b] in the merge: unless B[b] is less (ties: A first)."""
        return Unary("not", less(at(_op("add", _op("add", base, _c(r)), b)),
                                 at(_op("add", base, a))), "i1")

    acc = Acc(0, INDEX)
    bit = _op("sub", _c(bits - 1), Cast("trunci", LoopIndex(rank), INDEX))
    split = _op("add", acc, _op("shl", _c(1), bit))  # holds where A[split - 1] goes first
    holds = precedes(_op("sub", split, _c(1)), _op("sub", t, split))
    step = Select(_and(Compare("le", split, hi), holds), split, acc, INDEX)
    b = _op("sub", t, acc)
    from_a = _and(Compare("lt", acc, a_len),
                  Binary("or", Compare("ge", b, b_len), precedes(acc, b), "i1"))
    source = Select(from_a, _op("add", base, acc), _op("add", _op("add", base, _c(r)), b), INDEX)
    value = fn.new_value(INDEX, shape, "merge_source")
    here = AffineExpr.identity(rank + 1)[:rank]
    fn.emit(Generic(inputs.values, [value], (Result(0, here, step, init=lo, epilogue=source),),
                    shape + (bits,), rank, where, origin))
    return value


def _move(fn, operands: list[Value], d: int, source: Value, origin: str,
          where: str) -> list[Value]:
    """Every operand with the element at each place's source index along ``d``."""
    shape, rank = operands[0].shape, len(operands[0].shape)
    inputs = Inputs()
    here = AffineExpr.identity(rank)
    index = tuple(inputs.load(source, here) if q == d else LoopIndex(q) for q in range(rank))
    results, values = [], []
    for m, v in enumerate(operands):
        results.append(Result(m, here, inputs.gather(v, index, where)))
        values.append(fn.new_value(v.dtype, shape, f"merged{m}"))
    fn.emit(Generic(inputs.values, values, tuple(results), shape, rank, where, origin))
    return values


def _sorted_runs(fn, operands: list[Value], d: int, run: int, less: Less, compared: set[int],
                 origin: str, where: str) -> list[Value]:
    """``operands`` with each run of ``run`` along ``d`` (the last one shorter) sorted by
    counting: each element's rank in its run (how many of the run go before it: less, or tied
    and earlier), then each place takes the element whose rank it is."""
    shape, rank = operands[0].shape, len(operands[0].shape)
    n = shape[d]
    here = AffineExpr.identity(rank + 1)[:rank]
    i = Cast("trunci", LoopIndex(d), INDEX)
    j = Cast("trunci", LoopIndex(rank), INDEX)
    base = _op("sub", i, _op("rem", i, _c(run)))
    other = _op("add", base, j)  # the run's j-th element
    inside = Compare("lt", other, _c(n))

    def at(inputs: Inputs, v: Value, place: Expr) -> Gather:
        return inputs.gather(v, tuple(place if q == d else LoopIndex(q) for q in range(rank)),
                             where)

    inputs = Inputs()
    mine = [inputs.load(v, here) if m in compared else None for m, v in enumerate(operands)]
    theirs = [at(inputs, v, other) if m in compared else None for m, v in enumerate(operands)]
    before = Binary("or", less(theirs, mine), _and(Unary("not", less(mine, theirs), "i1"),
                                                  Compare("lt", other, i)), "i1")
    count = Binary("add", Acc(0, INDEX), Select(_and(inside, before), _c(1), _c(0), INDEX), INDEX)
    ranks = fn.new_value(INDEX, shape, "run_rank")
    fn.emit(Generic(inputs.values, [ranks], (Result(0, here, count, init=_c(0)),),
                    shape + (run,), rank, where, origin))

    inputs = Inputs()
    hit = _and(inside, Compare("eq", at(inputs, ranks, other), _op("sub", i, base)))
    results, values = [], []
    for m, v in enumerate(operands):
        results.append(Result(m, here, Select(hit, at(inputs, v, other), Acc(m, v.dtype), v.dtype),
                              init=zero(v.dtype)))
        values.append(fn.new_value(v.dtype, shape, f"runs{m}"))
    fn.emit(Generic(inputs.values, values, tuple(results), shape + (run,), rank, where, origin))
    return values
