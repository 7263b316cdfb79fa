"""Row kernels: a chain of reductions over the same rows, and the elementwise op that reads them
element by element, fused into one dispatch (softmax, log_softmax, layernorm, rmsnorm).

After producer inlining and copying, a softmax is three Generics over the same loops (P | R):
``max[p] = fold(x)``, ``sum[p] = fold(exp(x - max[p]))``, ``out[p, r] = exp(x - max[p]) / sum[p]``.
Each reads the earlier results *row-wise*: at the same parallel point, broadcast along R, i.e. at
the very index the reduction stores them at. One rewrite, applied until it no longer fires, joins
a Generic B into the kernel of a reduction A that it reads row-wise (a row result of A's kernel
counts where B reads it at the element it stores: its value is recomputed there):
- B a reduction over A's loops: B folds in a later phase; its loads of A's results become
  ``Final``s (``kernel.phases``). Two reductions that one elementwise op reads row-wise (layernorm's
  mean and variance) join the same way, the later into the earlier (in the same phase when
  neither reads the other).
- B elementwise over A's loop space: B's results become row results of A's kernel (softmax's
  division; then a cast or a scale after it).
Every result stays materialized (a softmax's max and sum are a few bytes per row), so no op needs
to be its result's only user. B's loops correspond one to one to A's, in the order B's loads of
A's results give (softmax over a leading dim: the elementwise op's loops are permuted into A's
parallel-first order); a read through a view that only adds or drops unit dims (keepdim,
expand_shape) counts as row-wise.

Only rows that one workgroup per row suits are fused: a reduction that ``split_reduction`` splits
(few rows of many elements, log_softmax over GPT-2's 50257-word vocabulary for 32 rows) keeps its
partial folds, which spread it over the whole GPU, and its separate dispatches.
"""

from __future__ import annotations

import dataclasses

from pyree.compiler.flow.rewrite import (
    compose,
    dedupe_inputs,
    drop_unread,
    map_results,
    remap_loops,
    without_unit_loops,
)
from pyree.compiler.flow.split_reduction import is_contraction, split_reduction
from pyree.compiler.kernel import Acc, AffineExpr, Expr, Final, Gather, Load, fold_pattern, result_nodes
from pyree.compiler.tensor_program import (
    Generic,
    Op,
    Value,
    View,
    defined_by,
    is_line_walk,
    is_scatter,
    read_by,
    sources_of,
)


def fuse_rows_once(ops: list[Op]) -> bool:
    """Joins one Generic into the row kernel of a reduction it reads row-wise."""
    producers = {v: op for op in ops if isinstance(op, (Generic, View)) for v in defined_by(op)}
    for b in ops:
        if not isinstance(b, Generic) or is_scatter(b) or is_line_walk(b):
            continue
        sources = _row_sources(b, producers)
        if len(sources) > 1 and b.num_parallel == len(b.loop_ranges):
            # siblings, the later joining the earlier: over the same loops as b sees them
            (first, order, _), (second, other, _) = sorted(sources, key=lambda s: ops.index(s[0]))[:2]
            joined = order == other and first.num_parallel == second.num_parallel \
                and _join(ops, first, second, second, producers)
        else:
            joined = bool(sources) and _join(ops, sources[0][0], b, sources[0][2], producers)
        if joined:
            return True
    return False


def _reduction(op: Op) -> bool:
    """A reduction that one workgroup per row suits (split_reduction leaves it whole), and not a
    contraction, which would lose its matmul templates."""
    if not isinstance(op, Generic) or op.num_parallel == len(op.loop_ranges):
        return False
    folds = fold_pattern(tuple(r for r in op.outputs if not r.row))
    return len(split_reduction(op)) == 1 and not (
        folds is not None and len(folds) == 1 and is_contraction(folds[0], op.num_parallel))


def _row_sources(b: Generic, producers: dict) -> list[tuple[Generic, tuple[int, ...], Generic]]:
    """(reduction, b's loop -> its loop, b over its loops) for the reductions whose results b
    reads, each read only as ``_row_inputs``."""
    out = []
    for a in {id(a): a for a in map(producers.get, _bases(b, producers))
              if isinstance(a, Generic)}.values():
        order = None if a is b or not _reduction(a) else _loop_order(b, a, producers)
        if order is None:
            continue
        aligned = b if order == tuple(range(len(order))) else _moved(b, a, order)
        if _row_inputs(aligned, a, producers).keys() == {j for j, v in enumerate(b.inputs)
                                                          if _base(v, producers)[0] in a.results}:
            out.append((a, order, aligned))
    return out


def _loop_order(b: Generic, a: Generic, producers: dict) -> tuple[int, ...] | None:
    """a's loop for each of b's, read off b's loads of a's results (loop i of b where a stores
    at loop j), the loops left over matched in order; None where ranges differ or a reduction
    loop of b would not stay the same reduction loop of a."""
    n = len(a.loop_ranges)
    if len(b.loop_ranges) != n or b.num_parallel not in (n, a.num_parallel):
        return None
    order: dict[int, int] = {}
    for j, value in enumerate(b.inputs):
        base, to_base = _base(value, producers)
        stored = next((r for r in a.outputs if a.results[r.binding] is base), None)
        for e in (e for r in b.outputs for e in result_nodes(r) if stored is not None
                  and isinstance(e, (Load, Gather)) and e.binding == j):
            if not isinstance(e, Load):
                return None
            for ix, at, size in zip(to_base(e.index), stored.index, base.shape):
                mine = _single_loop(without_unit_loops(ix, b.loop_ranges))
                theirs = _single_loop(without_unit_loops(at, a.loop_ranges))
                if size != 1 and (mine is None or theirs is None
                                  or order.setdefault(mine, theirs) != theirs):
                    return None
    if len(set(order.values())) != len(order):
        return None
    order.update(zip([d for d in range(n) if d not in order],
                     [d for d in range(n) if d not in order.values()]))
    if any(a.loop_ranges[order[d]] != b.loop_ranges[d] for d in range(n)) or (
            b.num_parallel < n and any(order[d] != d for d in range(b.num_parallel, n))):
        return None
    return tuple(order[d] for d in range(n))


def _single_loop(ix: AffineExpr) -> int | None:
    """d where ``ix`` is loop d itself."""
    nonzero = [d for d, c in enumerate(ix.coeffs) if c]
    return nonzero[0] if ix.const == 0 and len(nonzero) == 1 and ix.coeffs[nonzero[0]] == 1 else None


def _moved(b: Generic, a: Generic, order: tuple[int, ...]) -> Generic:
    """b with its loop d renumbered ``order[d]``: over a's loops."""
    n = len(order)
    loop_map = tuple(AffineExpr.loop(n, order[d]) for d in range(n))

    def go(e: Expr | None) -> Expr | None:
        return None if e is None else remap_loops(e, loop_map, n, lambda k: k)

    outputs = tuple(dataclasses.replace(r, index=tuple(compose(ix, loop_map, n) for ix in r.index),
                                        value=go(r.value), init=go(r.init), epilogue=go(r.epilogue))
                    for r in b.outputs)
    return dataclasses.replace(b, outputs=outputs, loop_ranges=a.loop_ranges)


def _bases(b: Generic, producers: dict) -> list[Value]:
    return [_base(v, producers)[0] for v in b.inputs]


def _row_inputs(b: Generic, a: Generic, producers: dict) -> dict[int, Expr]:
    """b's inputs that are (unit-dim views of) a's results, read only where a's kernel has them
    at hand: a reduction result row-wise (read as its ``Final``), or a row result at the very
    element a stores it (its value, recomputed there); each with what replaces b's loads of it."""
    out: dict[int, Expr] = {}
    for j, value in enumerate(b.inputs):
        base, to_base = _base(value, producers)
        k, stored = next(((k, r) for k, r in enumerate(a.outputs) if a.results[r.binding] is base),
                         (None, None))
        if stored is not None and all(
                isinstance(e, Load) and _same_element(to_base(e.index), stored.index, base.shape,
                                                      a.loop_ranges)
                for r in b.outputs for e in result_nodes(r)
                if isinstance(e, (Load, Gather)) and e.binding == j):
            out[j] = stored.value if stored.row else Final(k, base.dtype)
    return out


def _base(value: Value, producers: dict):
    """(the value a chain of unit-dim views of ``value`` reads, index map from loads of
    ``value`` to loads of it)."""
    maps = []
    while isinstance(view := producers.get(value), View) and view.byte_offset == 0 \
            and _squeezed(view.result.shape) == _squeezed(view.source.shape):
        maps.append((view.result.shape, view.source.shape))
        value = view.source

    def to_base(index: tuple[AffineExpr, ...]) -> tuple[AffineExpr, ...]:
        for shape, source in maps:
            kept = iter([ix for ix, n in zip(index, shape) if n != 1])
            loops = len(index[0].coeffs) if index else 0
            index = tuple(AffineExpr((0,) * loops) if n == 1 else next(kept) for n in source)
        return index
    return value, to_base


def _same_element(a: tuple[AffineExpr, ...], b: tuple[AffineExpr, ...], shape,
                  loop_ranges) -> bool:
    """Equal indices over ``loop_ranges``, but for dims of size 1 (where every in-range index
    is 0) and loops of extent 1 (always 0: a keepdim view's digits read ``m[d0, d1 + d2, 0]``
    where d2 walks a unit dim)."""
    return all(without_unit_loops(x, loop_ranges) == without_unit_loops(y, loop_ranges)
               for x, y, n in zip(a, b, shape) if n != 1)


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(n for n in shape if n != 1)


def _join(ops: list[Op], a: Generic, b: Generic, aligned: Generic, producers: dict) -> bool:
    """Replaces ``a`` and ``b`` (``aligned``: over a's loops) by their row kernel where the
    program order allows: at b's place (the ops between that read a's results move after it),
    or at a's."""
    if b.num_parallel < len(b.loop_ranges) and not _reduction(b):
        return False
    i, j = ops.index(a), ops.index(b)
    rows = _row_inputs(aligned, a, producers)
    if i > j or _depends(b, rows, a, producers):
        return False
    fused = _fused(a, aligned, rows)
    between = ops[i + 1:j]
    movers: list[Op] = []  # ops between them that read a's results: they follow the row kernel
    after = {id(v) for v in a.results}
    for op in between:
        if any(id(v) in after for v in read_by(op)):
            movers.append(op)
            after |= {id(v) for v in defined_by(op)}
    if not any(id(v) in after for v in fused.inputs):
        ops[i:j + 1] = [op for op in between if not any(op is m for m in movers)] + [fused] + movers
    elif not any(v is d for op in between for d in defined_by(op) for v in fused.inputs):
        ops[i:j + 1] = [fused] + between
    else:
        return False
    return True


def _depends(b: Generic, rows: dict[int, Expr], a: Generic, producers: dict) -> bool:
    """Whether b reads a's results other than through ``rows`` (through some other op): the row
    kernel would depend on itself."""
    stack = [v for j, v in enumerate(b.inputs) if j not in rows]
    seen: set[int] = set()
    while stack:
        v = stack.pop()
        if any(v is r for r in a.results):
            return True
        if id(v) not in seen:
            seen.add(id(v))
            if (op := producers.get(v)) is not None:
                stack.extend(read_by(op))
    return False


def _fused(a: Generic, b: Generic, rows: dict[int, Expr]) -> Generic:
    """a's reductions, b's reductions (a later phase where they read a), a's row results, b's
    results as row results when b is elementwise; b's loads of a's results replaced (``rows``)."""
    a_red = sum(not r.row for r in a.outputs)
    elementwise = b.num_parallel == len(b.loop_ranges)

    def leaf(e: Expr) -> Expr | None:
        if isinstance(e, (Acc, Final)):
            return dataclasses.replace(e, result=e.result + a_red)
        if isinstance(e, Load) and e.binding in rows:
            return rows[e.binding]  # over a's loops and bindings already
        if isinstance(e, (Load, Gather)):
            return dataclasses.replace(e, binding=len(a.inputs) + e.binding)
        return None

    moved = [dataclasses.replace(r, binding=len(a.results) + r.binding, row=r.row or elementwise)
             for r in map_results(b.outputs, leaf)]
    outputs = (tuple(r for r in a.outputs if not r.row) + tuple(r for r in moved if not r.row)
               + tuple(r for r in a.outputs if r.row) + tuple(r for r in moved if r.row))
    fused = Generic(inputs=a.inputs + b.inputs, results=a.results + b.results, outputs=outputs,
                    loop_ranges=a.loop_ranges, num_parallel=a.num_parallel, location=a.location,
                    origin=f"{a.origin}+{b.origin}", sources=sources_of(a, b))
    return dedupe_inputs(drop_unread(fused))
