"""A sort's comparator recognised as a strict weak order, which a merge sort needs: merge path
with a comparator that is not one (NaN under ``<``) can duplicate or lose elements.

Recognised: ``key(lhs) <pred> key(rhs)``, one comparison of the same expression of the lhs
operands as of the rhs ones, with an order predicate (lt, le, gt, ge; ordered or unordered for
floats). torch-mlir writes ``arith.cmpf ole``/``oge`` of the values (``cmpi sle``/``sge`` for
ints); StableHLO's TOTALORDER compare is an integer compare of the float's bits
(``input/stablehlo/elementwise.py``). Also lexicographic orders, as JAX writes a sort with
several keys: ``k0(lhs) < k0(rhs) or (k0(lhs) == k0(rhs) and rest)`` for integer keys ``k0``
(whose ``==`` is exact). An integer key is a total order already. A float key is
made one the way PyTorch and numpy sort: NaN after everything ascending (``lt``, ``le``) and so
before everything descending (``gt``, ``ge``), NaNs tied among themselves, -0.0 tied with 0.0;
ties keep input order, so the sort stays stable. Anything else is left to the counting sort,
which builds a permutation from any comparator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from pyree.compiler.input.inputs import Inputs
from pyree.compiler.kernel import (
    Acc,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Final,
    Gather,
    Load,
    LoopIndex,
    Select,
    SizeValue,
    Unary,
    int_bits,
    is_float,
    is_unsigned,
    transform,
    walk,
)

# (lhs elements, rhs elements) -> i1 "lhs strictly before rhs"; an element not compared may be None
Less = Callable[[list, list], Expr]
_ASCENDING = {"lt", "le", "ult", "ule"}
_DESCENDING = {"gt", "ge", "ugt", "uge"}


class Order(NamedTuple):
    """A recognised order: ``less`` a strict weak order (made total for a float key as the
    module says), ``compared`` the operands it reads, ``levels`` its keys (expressions of the
    lhs stand-ins), most significant first, each ascending or not."""

    less: Less
    compared: set[int]
    levels: list[tuple[Expr, bool]]


def strict_order(comparator, dtypes: list[str]) -> Order | None:
    """The ``Order`` that ``comparator`` (``sort_scan.Comparator``) is on operands of
    ``dtypes``, or None where it is none recognised."""
    m = len(dtypes)
    lhs = [Load(-1 - n, (), t) for n, t in enumerate(dtypes)]  # stand-ins no region can produce
    rhs = [Load(-1 - m - n, (), t) for n, t in enumerate(dtypes)]
    inputs = Inputs()
    e = comparator(lhs, rhs, inputs)
    levels = [] if not inputs.values else None
    while levels is not None:  # lexicographic: k0 < k0' or (k0 == k0' and rest)
        tie = _tie_broken(e, rhs)
        if tie is None:
            levels.append(_key_order(e, rhs))
            break
        levels.append(tie[0])
        e = tie[1]
    if levels is None or None in levels:
        return None
    compared = {-1 - x.binding for key, _ in levels for x in walk(key) if isinstance(x, Load)}

    def less(a: list, b: list) -> Expr:
        out = None
        for key, ascending in reversed(levels):  # the last level first
            ka, kb = _substitute(key, a), _substitute(key, b)
            if not ascending:  # descending: ascending with the sides swapped
                ka, kb = kb, ka
            level, level_after = _less(ka, kb), _less(kb, ka)
            out = level if out is None else Binary(
                "or", level, Binary("and", Unary("not", level_after, "i1"), out, "i1"), "i1")
        return out
    return Order(less, compared, levels)


def _less(ka: Expr, kb: Expr) -> Expr:
    """``ka < kb``; for a float key, NaN above every number (last ascending, first descending)."""
    below = Compare("lt", ka, kb)
    if not is_float(ka.dtype):
        return below
    nan_above = Binary("and", Compare("uno", kb, kb), Compare("ord", ka, ka), "i1")
    return Binary("or", below, nan_above, "i1")


def _key_order(e: Expr, rhs: list) -> tuple[Expr, bool] | None:
    """``(key, ascending)`` where ``e`` is ``key(lhs) <pred> key(rhs)`` with an order
    predicate, ``key`` an expression of the lhs stand-ins alone; None otherwise."""
    if not isinstance(e, Compare) or e.predicate not in _ASCENDING | _DESCENDING:
        return None
    lhs_stand_ins = {-1 - n for n in range(len(rhs))}
    reads = False
    for node in walk(e.a):
        if isinstance(node, (Gather, LoopIndex, SizeValue, Acc, Final)):
            return None
        if isinstance(node, Load):
            if node.binding not in lhs_stand_ins:
                return None
            reads = True
    if not reads or _substitute(e.a, rhs) != e.b:
        return None
    return e.a, e.predicate in _ASCENDING


def _tie_broken(e: Expr, rhs: list) -> tuple[tuple[Expr, bool] | None, Expr] | None:
    """``(level, rest)`` where ``e`` is ``level or (equal and rest)``, ``level`` an order of an
    integer key (``_key_order``) and ``equal`` that key's equality (exact only for integers:
    a float ``==`` leaves NaN unequal to itself, which the float order ties); None otherwise."""
    if not (isinstance(e, Binary) and e.op == "or"):
        return None
    for first, second in ((e.a, e.b), (e.b, e.a)):
        level = _key_order(first, rhs)
        if level is None or is_float(level[0].dtype) or not (
                isinstance(second, Binary) and second.op == "and"):
            continue
        key_rhs = _substitute(level[0], rhs)
        for equal, rest in ((second.a, second.b), (second.b, second.a)):
            if isinstance(equal, Compare) and equal.predicate == "eq" and \
                    {equal.a, equal.b} == {level[0], key_rhs}:
                return level, rest
    return None


def _substitute(key: Expr, elements: list) -> Expr:
    """``key`` (over the lhs stand-ins) with stand-in ``n`` replaced by ``elements[n]``."""
    return transform(key, lambda x: elements[-1 - x.binding] if isinstance(x, Load) else None)


def single_key(order: Order, elements: list) -> tuple[Expr, bool] | None:
    """The one key of ``order`` at ``elements`` (operand ``n``'s element at ``n``) and whether
    it ascends; None for an order by several keys."""
    if len(order.levels) != 1:
        return None
    key, ascending = order.levels[0]
    return _substitute(key, elements), ascending


def ordinal(order: Order) -> Callable[[list], Expr] | None:
    """For an order by one key of at most 32 bits: the i32 of an element's key that orders as
    ``order.less`` does (a float, widened to f32 exactly, made total as the module says: -0.0 as
    0.0, every NaN as one NaN above +inf, then the bits as a signed integer that orders like the
    float); None for other orders. Two elements tie exactly where their ordinals are equal."""
    if len(order.levels) != 1:
        return None
    key, ascending = order.levels[0]
    width = int_bits(key.dtype)
    if width > 32:
        return None

    def of(elements: list) -> Expr:
        x = _substitute(key, elements)
        if is_float(x.dtype):
            if x.dtype != "f32":  # exactly, -0.0 and NaN kept: no 16-bit integer arithmetic
                x = Cast("fpext", x, "f32")
            x = Select(Compare("eq", x, Const(0.0, x.dtype)), Const(0.0, x.dtype), x, x.dtype)
            x = Select(Compare("uno", x, x), Const(float("nan"), x.dtype), x, x.dtype)
            bits = Cast("bitcast", x, "i32")
            magnitude = Binary("and", Binary("shr", bits, Const(31, "i32"), "i32"),
                               Const(2**31 - 1, "i32"), "i32")
            x = Binary("xor", bits, magnitude, "i32")  # negatives: magnitude flipped
        elif is_unsigned(x.dtype) and width == 32:  # unsigned order as signed: flip the top bit
            x = Binary("xor", Cast("bitcast", x, "i32"), Const(-2**31, "i32"), "i32")
        if x.dtype != "i32":
            x = Cast("extui" if is_unsigned(x.dtype) or x.dtype == "i1" else "extsi", x, "i32")
        return x if ascending else Unary("not", x, "i32")  # not: -x - 1, the order reversed
    return of
