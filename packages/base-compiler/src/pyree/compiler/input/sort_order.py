"""A sort's comparator recognised as a strict weak order, which a merge sort needs: merge path
with a comparator that is not one (NaN under ``<``) can duplicate or lose elements.

Recognised: ``key(lhs) <pred> key(rhs)``, one comparison of the same expression of the lhs
operands as of the rhs ones, with an order predicate (lt, le, gt, ge; ordered or unordered for
floats). torch-mlir writes ``arith.cmpf ole``/``oge`` of the values (``cmpi sle``/``sge`` for
ints); StableHLO's TOTALORDER compare is an integer compare of the float's bits
(``input/stablehlo/elementwise.py``). An integer key is a total order already. A float key is
made one the way PyTorch and numpy sort: NaN after everything ascending (``lt``, ``le``) and so
before everything descending (``gt``, ``ge``), NaNs tied among themselves, -0.0 tied with 0.0;
ties keep input order, so the sort stays stable. Anything else is left to the counting sort,
which builds a permutation from any comparator.
"""

from __future__ import annotations

from collections.abc import Callable

from pyree.compiler.input.inputs import Inputs
from pyree.compiler.kernel import (
    Acc,
    Binary,
    Compare,
    Expr,
    Final,
    Gather,
    Load,
    LoopIndex,
    SizeValue,
    is_float,
    transform,
    walk,
)

# (lhs elements, rhs elements) -> i1 "lhs strictly before rhs"; an element not compared may be None
Less = Callable[[list, list], Expr]
_ASCENDING = {"lt", "le", "ult", "ule"}
_DESCENDING = {"gt", "ge", "ugt", "uge"}


def strict_order(comparator, dtypes: list[str]) -> tuple[Less, set[int]] | None:
    """``(less, compared)`` where ``comparator`` (``sort_scan.Comparator``) is a recognised
    order of operands of ``dtypes``: ``less`` a strict weak order (made total for a float key as
    the module says), ``compared`` the operands it reads; None otherwise."""
    m = len(dtypes)
    lhs = [Load(-1 - n, (), t) for n, t in enumerate(dtypes)]  # stand-ins no region can produce
    rhs = [Load(-1 - m - n, (), t) for n, t in enumerate(dtypes)]
    inputs = Inputs()
    e = comparator(lhs, rhs, inputs)
    if inputs.values or not isinstance(e, Compare) or e.predicate not in _ASCENDING | _DESCENDING:
        return None
    stand_ins = {x.binding: n for n, x in enumerate(lhs)}
    compared = set()
    for node in walk(e.a):
        if isinstance(node, (Gather, LoopIndex, SizeValue, Acc, Final)):
            return None
        if isinstance(node, Load):
            if node.binding not in stand_ins:
                return None
            compared.add(stand_ins[node.binding])
    if not compared or _substitute(e.a, rhs) != e.b:
        return None
    ascending = e.predicate in _ASCENDING

    def less(a: list, b: list) -> Expr:
        ka, kb = _substitute(e.a, a), _substitute(e.a, b)
        if not ascending:  # descending: ascending with the sides swapped
            ka, kb = kb, ka
        below = Compare("lt", ka, kb)
        if not is_float(ka.dtype):
            return below
        # a float key: NaN above every number, so last ascending and first descending
        nan_above = Binary("and", Compare("uno", kb, kb), Compare("ord", ka, ka), "i1")
        return Binary("or", below, nan_above, "i1")
    return less, compared


def _substitute(key: Expr, elements: list) -> Expr:
    """``key`` (over the lhs stand-ins) with stand-in ``n`` replaced by ``elements[n]``."""
    return transform(key, lambda x: elements[-1 - x.binding] if isinstance(x, Load) else None)
