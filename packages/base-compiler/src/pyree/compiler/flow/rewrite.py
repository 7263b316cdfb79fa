"""Rewrites of kernel-IR expressions that fusion needs: substitute loads, move between loop spaces."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyree.compiler.kernel import (
    MAX_DEPTH,
    AffineExpr,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Gather,
    Load,
    LoopIndex,
    Result,
    Select,
    Unary,
    compose,
    decided,
    depth,
    map_result,
    result_nodes,
    result_roots,
    size_value,
    transform,
    walk,
)
from pyree.compiler.sizes import is_static, negative_part

if TYPE_CHECKING:
    from pyree.compiler.tensor_program import Generic, Value

LoopMap = tuple[AffineExpr, ...]  # old loop d -> affine expression over the new loops


def affine_value(expr: AffineExpr) -> Expr:
    """An index-typed expression computing ``expr`` from LoopIndex values (for remapped
    linalg.index). A coefficient or the constant may be a run-time size (a producer read at a
    run-time offset): the kernel is given it, as its non-negative parts where it has negative
    terms (``n - 1`` as ``n`` and ``1``: ``n`` may be 0), as push constants always are."""
    terms: list[Expr] = []
    for d, c in enumerate(expr.coeffs):
        if is_static(c) and c == 1:
            terms.append(LoopIndex(d))
        elif not (is_static(c) and c == 0):
            terms.append(Binary("mul", _index_value(c), LoopIndex(d), "index"))
    if not (is_static(expr.const) and expr.const == 0) or not terms:
        terms.append(_index_value(expr.const))
    out = terms[0]
    for t in terms[1:]:
        out = Binary("add", out, t, "index")
    return out


def _index_value(value) -> Expr:
    if is_static(value):
        return Const(value, "index")
    plus, minus = value + negative_part(value), negative_part(value)
    if is_static(minus) and minus == 0:
        return size_value(value, "index")
    return Binary("sub", size_value(plus, "index"), size_value(minus, "index"), "index")


def remap_loops(expr: Expr, loop_map: LoopMap, num_new_loops: int,
                binding_map: Callable[[int], int]) -> Expr:
    """Moves ``expr`` into another loop space and renumbers its bindings."""

    def leaf(e: Expr) -> Expr | None:
        if isinstance(e, Load):
            return Load(binding_map(e.binding),
                        tuple(compose(ix, loop_map, num_new_loops) for ix in e.index), e.dtype)
        if isinstance(e, Gather):  # its index is already in the new loop space
            return dataclasses.replace(e, binding=binding_map(e.binding))
        if isinstance(e, LoopIndex):
            return affine_value(compose(AffineExpr(tuple(int(d == e.dim) for d in range(len(loop_map)))),
                                        loop_map, num_new_loops))
        return None

    return transform(expr, leaf)


def plain_positions(index: tuple[AffineExpr, ...]) -> dict[int, int]:
    """{position: loop} for each position of ``index`` that reads one loop as itself
    (coefficient 1, no constant)."""
    plain = {}
    for i, ix in enumerate(index):
        nz = [d for d, c in enumerate(ix.coeffs) if c != 0]
        if ix.const == 0 and len(nz) == 1 and ix.coeffs[nz[0]] == 1:
            plain[i] = nz[0]
    return plain


def position_loops(index: tuple[AffineExpr, ...]) -> tuple[int, ...] | None:
    """The loop each position of ``index`` reads as itself, or None where a position reads
    anything else."""
    plain = plain_positions(index)
    return tuple(plain[i] for i in range(len(index))) if len(plain) == len(index) else None


def without_unit_loops(ix: AffineExpr, loop_ranges) -> AffineExpr:
    """``ix`` without the terms of loops of static extent 1, which are always 0."""
    return AffineExpr(tuple(0 if is_static(n) and n == 1 else c
                            for c, n in zip(ix.coeffs, loop_ranges)), ix.const)


def permutation_dims(index: tuple[AffineExpr, ...], num_loops: int) -> tuple[int, ...] | None:
    """For an index that is a permutation of all ``num_loops`` loops, the loop of each position."""
    dims = position_loops(index)
    if dims is None or len(index) != num_loops or sorted(dims) != list(range(num_loops)):
        return None
    return dims


def is_data_movement(expr: Expr) -> bool:
    """Only loads, casts and constants: what region formation inlines even into a reduction's
    per-step value (a matmul's operands), since nothing is recomputed there."""
    return all(isinstance(e, (Load, Cast, Const)) for e in walk(expr))


def is_guarded_data_movement(expr: Expr) -> bool:
    """Data movement behind bounds checks that read no tensor (a ``tensor.pad``'s select)."""
    if isinstance(expr, Select):
        return (not any(isinstance(e, (Load, Gather)) for e in walk(expr.cond))
                and is_guarded_data_movement(expr.a) and is_guarded_data_movement(expr.b))
    if isinstance(expr, Cast):
        return is_guarded_data_movement(expr.x)
    return isinstance(expr, (Load, Const))


def within_depth(op: Generic) -> bool:
    """Whether no expression of ``op`` nests deeper than ``MAX_DEPTH`` (kernel/ir.py)."""
    return all(depth(root) <= MAX_DEPTH for r in op.outputs for root in result_roots(r))


def map_results(results: tuple[Result, ...], leaf: Callable[[Expr], Expr | None]) -> tuple[Result, ...]:
    """``map_result`` of each result."""
    return tuple(map_result(r, leaf) for r in results)


def drop_unread(op: Generic) -> Generic:
    """``op`` without the inputs it never reads (a scatter's starting value counts as read)."""
    read = sorted({e.binding for r in op.outputs for e in result_nodes(r)
                   if isinstance(e, (Load, Gather))}
                  | {r.scatter.start for r in op.outputs if r.scatter is not None})
    return _renumber(op, [op.inputs[b] for b in read], {b: i for i, b in enumerate(read)})


def dedupe_inputs(op: Generic) -> Generic:
    unique: list[Value] = []
    for v in op.inputs:
        if not any(v is u for u in unique):
            unique.append(v)
    index = {b: next(i for i, u in enumerate(unique) if u is v) for b, v in enumerate(op.inputs)}
    return _renumber(op, unique, index)


def _renumber(op: Generic, inputs: list[Value], index: dict[int, int]) -> Generic:
    def leaf(e: Expr) -> Expr | None:
        if isinstance(e, (Load, Gather)) and index[e.binding] != e.binding:
            return dataclasses.replace(e, binding=index[e.binding])
        return None

    outputs = tuple(r if r.scatter is None else dataclasses.replace(
        r, scatter=dataclasses.replace(r.scatter, start=index[r.scatter.start]))
        for r in map_results(op.outputs, leaf))
    return dataclasses.replace(op, inputs=inputs, outputs=outputs)


def fold_decided(e: Expr, loop_ranges: tuple[int, ...]) -> Expr:
    """``e`` with the comparisons its loop box decides folded away, and the selects and logic
    they decide: a convolution's pad checks on the dims it does not pad (flow/implicit_gemm.py),
    a concatenation's branches at a constant position (flow/scatter_loops.py)."""
    memo: dict[Expr, Expr] = {}

    def go(x: Expr) -> Expr:
        if x not in memo:
            memo[x] = simplify(x)
        return memo[x]

    def simplify(x: Expr) -> Expr:
        if isinstance(x, (Unary, Cast)):
            return dataclasses.replace(x, x=go(x.x))
        if isinstance(x, Compare):
            known = decided(x, loop_ranges)
            return dataclasses.replace(x, a=go(x.a), b=go(x.b)) if known is None else Const(known, "i1")
        if isinstance(x, Binary):
            a, b = go(x.a), go(x.b)
            if x.dtype == "i1" and x.op in ("and", "or"):
                unit = Const(x.op == "and", "i1")
                if a == unit or b == unit:
                    return b if a == unit else a
            return dataclasses.replace(x, a=a, b=b)
        if isinstance(x, Select):
            cond = go(x.cond)
            if cond in (Const(True, "i1"), Const(False, "i1")):
                return go(x.a if cond.value else x.b)
            return dataclasses.replace(x, cond=cond, a=go(x.a), b=go(x.b))
        return x
    return go(e)
