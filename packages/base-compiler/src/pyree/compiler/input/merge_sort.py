"""A stable sort along a line in O(n log^2 n) as plain Generics: a bottom-up merge sort whose
every pass is a gather (each output place finds what it holds; nothing is written at a computed
place), so no backend needs a sorting kernel.

What the passes sort: for an order by one key of at most 32 bits (``sort_order.ordinal``), the
i64 pairs ``ordinal << 32 | place``, which order as the sort does, ties by place, so a plain
``<`` of distinct integers sorts them stably, and the passes read their neighbours' pairs
directly (contiguous on a GPU). For any other order they carry ``perm``, the input place of
the element each place now holds, and read the compared operands through it. Either way a last
Generic moves every operand by the permutation once.

First each run of a few tens (``first_run``) is ordered by counting, as ``sort_scan`` counts
whole lines. Then pass ``r`` (doubling up to ``n``) merges the sorted runs
``A = [base, base + r)`` and ``B = [base + r, base + 2r)`` (clipped at ``n``). Output place
``k`` (``t = k - base`` into its pair) holds, of the merge's first ``t`` elements, ``a`` from
``A`` and ``t - a`` from ``B``: ``a`` is the largest split whose last ``A`` element goes before
the ``B`` element it passes (merge path), found by a binary search written as a reduction over
the bits of ``a``, high to low (``acc = lo``; ``acc + 2^b`` where that split still holds),
which is no associative fold, so every backend runs it one step after another per place. ``k``
then holds ``A[a]`` unless ``B[t - a]`` is strictly less (ties take ``A``: stable). One
Generic per pass keeps the kernels few: each costs a launch on a GPU and its code generation at
compile time.

This needs ``less`` to be a strict weak order (``sort_order.strict_order``): for one that is
not, the splits of neighbouring places may disagree and an element be taken twice.
"""
from __future__ import annotations

from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.sort_order import Less, Order, ordinal
from pyree.compiler.kernel import (
    Acc,
    AffineExpr,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    LoopIndex,
    Result,
    Select,
    Unary,
)
from pyree.compiler.tensor_program import Generic, Value

INDEX = "i32"  # places along a line: lines are far shorter than 2**31
PASS_COST = 16  # loop steps per element that one more Generic (a trip through memory) is worth
SEARCH_STEP = 4  # a search step reads two places (through perm: four gathers, two after two)


def merge_sort(fn, operands: list[Value], d: int, order: Order, origin: str,
               where: str) -> list[Value]:
    """``operands`` sorted along ``d`` (a static length) by ``order``."""
    n = operands[0].shape[d]
    ordinal_of = ordinal(order)
    if ordinal_of is not None:  # sort (ordinal, place) pairs, then move the operands by place
        pairs = _pairs(fn, operands, d, ordinal_of, origin, where)
        return _move(fn, operands, d, _places(fn, _sorted(fn, [pairs], d, n, _below, {0}, True,
                                                          origin, where), origin, where),
                     origin, where)
    perm = _sorted(fn, operands, d, n, order.less, order.compared, False, origin, where)
    return _move(fn, operands, d, perm, origin, where)


def _sorted(fn, operands: list[Value], d: int, n: int, less: Less, compared: set[int],
            carry: bool, origin: str, where: str) -> Value:
    """The runs ordered by counting, then merged: the permutation (each place's input index),
    or (``carry``) ``operands[0]`` itself sorted."""
    r = first_run(n)
    sorted_ = _sorted_runs(fn, operands, d, r, less, compared, carry, origin, where) \
        if r > 1 else (operands[0] if carry else None)
    while r < n:
        sorted_ = _merge(fn, [sorted_] if carry else operands, None if carry else sorted_, d, r,
                         less, compared, carry, origin, where)
        r *= 2
    return sorted_


def _below(a: list, b: list) -> Expr:
    return Compare("lt", a[0], b[0])


def _pairs(fn, operands: list[Value], d: int, ordinal_of, origin: str, where: str) -> Value:
    """Each element's ordinal (``sort_order.ordinal``) in the high half of an i64, its place
    along ``d`` in the low half: pairs that order as the sort does, ties by place (stable),
    every pair distinct."""
    shape, rank = operands[0].shape, len(operands[0].shape)
    inputs, here = Inputs(), AffineExpr.identity(rank)
    high = Binary("shl", Cast("extsi", ordinal_of([inputs.load(v, here) for v in operands]), "i64"),
                  Const(32, "i64"), "i64")
    pair = Binary("or", high, Cast("extsi", _place(d), "i64"), "i64")
    value = fn.new_value("i64", shape, "sort_pairs")
    fn.emit(Generic(inputs.values, [value], (Result(0, here, pair),), shape, rank, where, origin))
    return value


def _places(fn, pairs: Value, origin: str, where: str) -> Value:
    """The places in the low halves of sorted ``pairs``: the permutation."""
    shape, rank = pairs.shape, len(pairs.shape)
    inputs, here = Inputs(), AffineExpr.identity(rank)
    place = Cast("trunci", inputs.load(pairs, here), INDEX)
    value = fn.new_value(INDEX, shape, "sort_perm")
    fn.emit(Generic(inputs.values, [value], (Result(0, here, place),), shape, rank, where, origin))
    return value


def first_run(n: int) -> int:
    """The length of the runs ordered by counting before the first merge, the cheapest by
    ``sort_cost``: ``n`` where counting the whole line is cheaper than any merging."""
    runs = [1 << p for p in range(max(n - 1, 0).bit_length())] + [n]
    return min(runs, key=lambda r: (sort_cost(n, r), r))


def sort_cost(n: int, run: int) -> int:
    """Loop steps per element of a sort of a line of ``n`` from runs of ``run`` ordered by
    counting (two Generics, ranks then the pick, of ``2 run - 1`` steps, or of ``n`` for the
    whole line), then merged (a Generic per merge: the bits of its run length to search, each
    worth ``SEARCH_STEP`` steps, one more to pick) and moved (one step); every Generic also
    costs a trip through memory, counted as ``PASS_COST`` steps."""
    if run >= n:
        return 2 * (n + PASS_COST)
    cost = 2 * (2 * run - 1 + PASS_COST) if run > 1 else 0
    while run < n:
        cost += SEARCH_STEP * run.bit_length() + 1 + PASS_COST
        run *= 2
    return cost + 1 + PASS_COST


def _c(v: int) -> Const:
    return Const(v, INDEX)


def _op(op: str, a: Expr, b: Expr) -> Expr:
    return Binary(op, a, b, INDEX)


def _and(a: Expr, b: Expr) -> Expr:
    return Binary("and", a, b, "i1")


def _place(d: int) -> Expr:
    return Cast("trunci", LoopIndex(d), INDEX)


def _sorted_runs(fn, operands: list[Value], d: int, run: int, less: Less, compared: set[int],
                 carry: bool, origin: str, where: str) -> Value:
    """``perm`` (or with ``carry``, ``operands[0]`` itself) of each run of ``run`` along ``d``
    (the last one shorter) sorted by counting:
    each element's rank in its run (how many of the run go before it: less, or tied and
    earlier), then each place takes the element whose rank it is. The reductions run over the
    offsets ``-(run - 1) .. run - 1`` from the place, so that every read is an affine Load (no
    gather); the offsets outside the run are skipped, their Loads never made."""
    shape, rank = operands[0].shape, len(operands[0].shape)
    n = shape[d]
    loops = AffineExpr.identity(rank + 1)
    here = loops[:rank]
    offset = AffineExpr(tuple(int(q in (d, rank)) for q in range(rank + 1)), -(run - 1))
    there = tuple(offset if q == d else loops[q] for q in range(rank))
    i = _place(d)
    other = _op("add", i, _op("sub", _place(rank), _c(run - 1)))
    base = _op("sub", i, _op("rem", i, _c(run)))
    inside = _and(Compare("ge", other, base),
                  Compare("lt", other, _op("min", _op("add", base, _c(run)), _c(n))))
    loop_ranges = shape + (2 * run - 1,)

    inputs = Inputs()
    mine = [inputs.load(v, here) if m in compared else None for m, v in enumerate(operands)]
    theirs = [inputs.load(v, there) if m in compared else None for m, v in enumerate(operands)]
    before = Binary("or", less(theirs, mine), _and(Unary("not", less(mine, theirs), "i1"),
                                                  Compare("lt", other, i)), "i1")
    count = _op("add", Acc(0, INDEX), Select(inside, Select(before, _c(1), _c(0), INDEX), _c(0),
                                             INDEX))
    ranks = fn.new_value(INDEX, shape, "run_rank")
    fn.emit(Generic(inputs.values, [ranks], (Result(0, here, count, init=_c(0)),), loop_ranges,
                    rank, where, origin))

    inputs = Inputs()
    ranked_here = Compare("eq", inputs.load(ranks, there), _op("sub", i, base))
    dtype = operands[0].dtype if carry else INDEX
    taken, acc = inputs.load(operands[0], there) if carry else other, Acc(0, dtype)
    pick = Select(inside, Select(ranked_here, taken, acc, dtype), acc, dtype)
    runs = fn.new_value(dtype, shape, "sorted_runs")
    fn.emit(Generic(inputs.values, [runs], (Result(0, here, pick, init=Const(0, dtype)),),
                    loop_ranges, rank, where, origin))
    return runs


def _merge(fn, operands: list[Value], perm: Value | None, d: int, r: int, less: Less,
           compared: set[int], carry: bool, origin: str, where: str) -> Value:
    """``perm`` after merging its runs of ``r`` (None: the identity, runs of one), or with
    ``carry``, ``operands[0]`` (sorted in runs of ``r``) merged."""
    shape, rank = operands[0].shape, len(operands[0].shape)
    n = shape[d]
    bits = r.bit_length()  # the split ranges over at most r + 1 values
    inputs = Inputs()

    def line(v: Value, place: Expr) -> Expr:
        return inputs.gather(v, tuple(place if q == d else LoopIndex(q) for q in range(rank)),
                             where)

    def source(place: Expr) -> Expr:
        return place if perm is None else line(perm, place)

    def at(place: Expr) -> list:
        index = source(place)
        return [line(v, index) if m in compared else None for m, v in enumerate(operands)]

    k = _place(d)
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
    bit = _op("sub", _c(bits - 1), _place(rank))
    split = _op("add", acc, _op("shl", _c(1), bit))  # holds where A[split - 1] goes first
    holds = precedes(_op("sub", split, _c(1)), _op("sub", t, split))
    step = Select(Compare("le", split, hi), Select(holds, split, acc, INDEX), acc, INDEX)
    b = _op("sub", t, acc)
    from_a = _and(Compare("lt", acc, a_len),
                  Binary("or", Compare("ge", b, b_len), precedes(acc, b), "i1"))
    taken = source(Select(from_a, _op("add", base, acc), _op("add", _op("add", base, _c(r)), b),
                          INDEX))
    if carry:
        taken = line(operands[0], taken)
    merged = fn.new_value(taken.dtype, shape, "merged")
    here = AffineExpr.identity(rank + 1)[:rank]
    fn.emit(Generic(inputs.values, [merged], (Result(0, here, step, init=lo, epilogue=taken),),
                    shape + (bits,), rank, where, origin))
    return merged


def _move(fn, operands: list[Value], d: int, perm: Value, origin: str,
          where: str) -> list[Value]:
    """Every operand with the element at ``perm`` of each place along ``d``."""
    shape, rank = operands[0].shape, len(operands[0].shape)
    inputs = Inputs()
    here = AffineExpr.identity(rank)
    index = tuple(inputs.load(perm, here) if q == d else LoopIndex(q) for q in range(rank))
    results, values = [], []
    for m, v in enumerate(operands):
        results.append(Result(m, here, inputs.gather(v, index, where)))
        values.append(fn.new_value(v.dtype, shape, f"sorted{m}"))
    fn.emit(Generic(inputs.values, values, tuple(results), shape, rank, where, origin))
    return values
