"""Rewrites a Kernel into the equivalent shape the emitters want.

After ``normalize``: every binding is a flat 1-D buffer indexed by one affine expression in
elements (so a load's stride along any loop is just a coefficient), parallel loops are ordered so
the first result is stored contiguously along the innermost one, and adjacent loops are merged
wherever every access allows it (a 37x53 elementwise op becomes one loop of 1961). The result
still satisfies ``kernel.evaluate`` semantics, which is how the tests check these rewrites.

Run-time sizes (``pyree.compiler.sizes``) go through unchanged: linearized coefficients become
size polynomials, and loops merge where the strides line up as polynomials (a ``[p0, p1]``
elementwise op becomes one loop of ``p0*p1``), which is an identity, not a guess. What would
compare sizes is skipped: loops whose strides are run-time sizes keep their order. Accesses that
cannot be proven in range for every size are left to the entry point's run-time checks
(``run_time_checks``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import NamedTuple

from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import (
    DTYPES,
    Acc,
    AffineExpr,
    Const,
    Expr,
    Final,
    Gather,
    Kernel,
    Load,
    LoopIndex,
    Result,
    Select,
    affine_bounds,
    affine_range,
    gather_offset,
    has_run_time_sizes,
    is_float,
    map_result,
    merge_loop,
    merge_loop_ranges,
    operands,
    result_nodes,
    scatter_offset,
    within,
)
from pyree.compiler.sizes import is_static, opaque, static_shape


def normalize(kernel: Kernel) -> Kernel:
    """A scatter kernel (``kernel.Scatter``) is only flattened: its stores have no stride to
    order or merge loops by; so is a line sort (``kernel.LineSort``), whose line is a loop."""
    check_accesses(kernel)
    if kernel.line is not None or kernel.results and kernel.results[0].scatter is not None:
        return flatten(kernel)
    return coalesce(order_parallel_loops(drop_unit_loops(flatten(kernel))))


def loads(kernel: Kernel) -> set[Load]:
    return {e for r in kernel.results for e in result_nodes(r) if isinstance(e, Load)}


def unsafe_loads(kernel: Kernel) -> set[Load]:
    """Loads of a normalized kernel that can fall outside their binding somewhere in the loop
    box; ``check_accesses`` allows them only inside Select arms, where they are guarded. With
    run-time sizes: those not proven in range that only Select arms reach (the entry point
    checks the others, ``run_time_checks``)."""
    if 0 in kernel.loop_ranges:
        return set()
    if has_run_time_sizes(kernel):
        checked = {ld for ld, ranges in _unguarded_accesses(kernel)
                   if isinstance(ld, Load) and ranges == kernel.loop_ranges}
        return {ld for ld in loads(kernel) if ld not in checked
                and within(ld.index[0], kernel.loop_ranges, kernel.bindings[ld.binding].shape[0])
                is not True}
    out = set()
    for ld in loads(kernel):
        lo, hi = affine_range(ld.index[0], kernel.loop_ranges)
        if lo < 0 or hi >= kernel.bindings[ld.binding].shape[0]:
            out.add(ld)
    return out


class AccessCheck(NamedTuple):
    """An access the kernel checks per dispatch: its index runs over [lo, hi] (sizes) in a
    binding of ``length`` elements, unless its loop box (``ranges``) is empty."""

    binding: int
    lo: object
    hi: object
    length: object
    ranges: tuple


def run_time_checks(kernel: Kernel) -> list[AccessCheck]:
    """Each access of a normalized kernel with run-time sizes that runs outside Select arms and
    is not proven to stay inside its binding for every size: the entry point checks these
    against the sizes of each dispatch before it runs any."""
    seen, out = set(), []
    for node, ranges in _unguarded_accesses(kernel):
        binding, index = node.binding, node.index[0]
        length = kernel.bindings[binding].shape[0]
        if within(index, ranges, length) is not True and (binding, index, ranges) not in seen:
            seen.add((binding, index, ranges))
            spans = [c * (n - 1) for c, n in zip(index.coeffs, ranges)]
            out.append(AccessCheck(binding, index.const + sum(opaque("min", 0, s) for s in spans),
                                   index.const + sum(opaque("max", 0, s) for s in spans),
                                   length, ranges))
    # a gather's index is clamped into its binding, which must then hold an element: one whose
    # length is a run-time size is checked to (element 0 of an empty binding is past its end)
    for node, ranges in _unguarded_gathers(kernel):
        length = kernel.bindings[node.binding].shape[0]
        if not is_static(length) and (node.binding, ranges) not in seen:
            seen.add((node.binding, ranges))
            out.append(AccessCheck(node.binding, 0, 0, length, ranges))
    return out


def _unguarded_gathers(kernel: Kernel):
    """(Gather, the loop box it runs over) for each gather outside Select arms."""
    at_init = kernel.parallel_ranges + (1,) * len(kernel.reduction_ranges)
    for r in kernel.results:
        for expr, ranges in ((r.value, kernel.loop_ranges), (r.init, at_init), (r.epilogue, at_init)):
            for e, guarded in _nodes_with_guard(expr) if expr is not None else ():
                if isinstance(e, Gather) and not guarded:
                    yield e, ranges


def _unguarded_accesses(kernel: Kernel):
    """(Load or Result, the loop box it runs over) for each store and each load outside Select
    arms: the accesses that run wherever their expression does."""
    at_init = kernel.parallel_ranges + (1,) * len(kernel.reduction_ranges)
    for r in kernel.results:
        for expr, ranges in ((r.value, kernel.loop_ranges), (r.init, at_init), (r.epilogue, at_init)):
            for e, guarded in _nodes_with_guard(expr) if expr is not None else ():
                if isinstance(e, Load) and not guarded:
                    yield e, ranges
        yield r, kernel.loop_ranges if r.row else at_init


def check_accesses(kernel: Kernel) -> None:
    """Every load and store stays inside its binding with the binding's dtype and access.

    The exported kernel trusts these bounds, so a bug upstream must stop here, not become an
    out-of-bounds access at run time. Loads inside a Select's arms are exempt from the range
    check: they are only evaluated where chosen (tensor.pad), and the emitter guards them.
    A Gather needs no range check (its index is clamped), only a non-empty binding.
    """
    where = f" in kernel '{kernel.name}'" + (f" ({kernel.location})" if kernel.location else "")
    n_loops = len(kernel.loop_ranges)
    if not 0 <= kernel.num_parallel <= n_loops:
        raise CompileError(f"num_parallel {kernel.num_parallel} out of range{where}")
    at_init = kernel.parallel_ranges + (1,) * len(kernel.reduction_ranges)
    dtypes = {b.dtype for b in kernel.bindings} | {
        e.dtype for r in kernel.results for e in result_nodes(r)}
    if dtypes - set(DTYPES):
        raise CompileError(f"llvm-cpu does not support dtype {', '.join(sorted(dtypes - set(DTYPES)))}"
                           f"{where}")

    def check(binding: int, index: tuple[AffineExpr, ...], ranges, what: str, guarded: bool):
        if not 0 <= binding < len(kernel.bindings):
            raise CompileError(f"{what} names binding {binding}, which does not exist{where}")
        b = kernel.bindings[binding]
        if len(index) != len(b.shape) or any(len(ix.coeffs) != n_loops for ix in index):
            raise CompileError(f"{what} of binding {binding} has a malformed index{where}")
        if guarded or 0 in ranges:
            return b
        for dim, (ix, size) in enumerate(zip(index, b.shape)):
            if static_shape((*ix.coeffs, ix.const, size, *ranges)):
                lo, hi = affine_range(ix, ranges)
                out = lo < 0 or hi >= size
            else:  # out for every run-time size; where not proven in, checked at run time
                out = within(ix, ranges, size) is False
                lo, hi = affine_bounds(ix, ranges) if out else (None, None)
            if out:
                raise CompileError(f"{what} of binding {binding} reaches index [{lo}, {hi}] "
                                   f"of dim {dim} (size {size}){where}")
        return b

    reductions = len(kernel.reductions)
    if any(r.scatter is not None for r in kernel.results):
        _check_scatter(kernel, where)
    if any(r.row for r in kernel.results[:reductions]) or (reductions and kernel.row_results
                                                           and not kernel.reduction_ranges):
        raise CompileError(f"row results must follow the reductions of a reduction kernel{where}")
    for k, r in enumerate(kernel.results):
        if r.row and (r.init is not None or r.epilogue is not None):
            raise CompileError(f"row result {k} has an init or epilogue{where}")
        for expr, ranges in ((r.value, kernel.loop_ranges), (r.init, at_init), (r.epilogue, at_init)):
            for e, guarded in _nodes_with_guard(expr) if expr is not None else ():
                if isinstance(e, Load):
                    b = check(e.binding, e.index, ranges, "a load", guarded)
                    if b.dtype != e.dtype:
                        raise CompileError(f"a load reads {b.dtype} binding {e.binding} as "
                                           f"{e.dtype}{where}")
                if isinstance(e, Gather):
                    if not 0 <= e.binding < len(kernel.bindings) \
                            or len(e.index) != len(kernel.bindings[e.binding].shape):
                        raise CompileError(f"a gather of binding {e.binding} has a malformed "
                                           f"index{where}")
                    b = kernel.bindings[e.binding]
                    if b.dtype != e.dtype or any(is_float(ix.dtype) for ix in e.index):
                        raise CompileError(f"a gather reads {b.dtype} binding {e.binding} as "
                                           f"{e.dtype} or at a float index{where}")
                    if 0 in b.shape and 0 not in ranges:
                        raise CompileError(f"a gather reads empty binding {e.binding}{where}")
                if isinstance(e, Acc) and (expr is r.init or r.row
                                           or not 0 <= e.result < reductions):
                    raise CompileError(f"result {k} uses Acc({e.result}) where it is undefined{where}")
                if isinstance(e, Final) and not 0 <= e.result < min(k, reductions):
                    raise CompileError(f"result {k} uses Final({e.result}), which is not an "
                                       f"earlier reduction{where}")
        if r.scatter is not None:
            continue  # stored at its place (_check_scatter)
        if not r.row and any(c for ix in r.index for c in ix.coeffs[kernel.num_parallel:]):
            raise CompileError(f"result {k} is indexed by a reduction loop{where}")
        b = check(r.binding, r.index, kernel.loop_ranges if r.row else at_init, f"result {k}",
                  guarded=False)
        stored = (r.epilogue or r.value).dtype
        if b.access == "read":
            raise CompileError(f"result {k} stores into read-only binding {r.binding}{where}")
        if b.dtype != stored:
            raise CompileError(f"result {k} stores {stored} into {b.dtype} binding {r.binding}{where}")


def _check_scatter(kernel: Kernel, where: str) -> None:
    """A scatter result is the kernel's one result, over parallel loops only, with an index
    expression per dim of its read-write binding and a starting input of its dtype."""
    r = kernel.results[0]
    if len(kernel.results) != 1 or r.scatter is None or kernel.reduction_ranges \
            or r.init is not None or r.epilogue is not None or r.row:
        raise CompileError(f"a scatter result must be the only result of a kernel without "
                           f"reduction loops{where}")
    if not 0 <= r.binding < len(kernel.bindings) or kernel.bindings[r.binding].access != "read_write":
        raise CompileError(f"a scatter result stores into binding {r.binding}, which is not "
                           f"read-write{where}")
    b = kernel.bindings[r.binding]
    if len(r.scatter.place) != len(b.shape) or any(ix.dtype != "index" for ix in r.scatter.place):
        raise CompileError(f"a scatter of binding {r.binding} has a malformed place{where}")
    start = r.scatter.start
    if not 0 <= start < len(kernel.bindings) or kernel.bindings[start].dtype != b.dtype \
            or kernel.bindings[start].shape != b.shape:
        raise CompileError(f"a scatter starts from binding {start}, which does not match "
                           f"binding {r.binding}{where}")


def _nodes_with_guard(expr: Expr):
    """(node, inside a Select arm) for every node reachable from ``expr``."""
    seen = set()
    stack = [(expr, False)]
    while stack:
        e, guarded = stack.pop()
        if (e, guarded) in seen:
            continue
        seen.add((e, guarded))
        yield e, guarded
        if isinstance(e, Select):
            stack += [(e.cond, guarded), (e.a, True), (e.b, True)]
        else:
            stack += [(c, guarded) for c in operands(e)]


def flatten(kernel: Kernel) -> Kernel:
    """Each binding becomes 1-D; each index becomes one affine expression in elements."""
    def flat(binding: int, index: tuple[AffineExpr, ...]) -> tuple[AffineExpr]:
        shape = kernel.bindings[binding].shape
        strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
        coeffs = [0] * len(kernel.loop_ranges)
        const = 0
        for s, ix in zip(strides, index):
            coeffs = [c + s * x for c, x in zip(coeffs, ix.coeffs)]
            const += s * ix.const
        return (AffineExpr(tuple(coeffs), const),)

    def leaf(e):
        return replace(e, index=flat(e.binding, e.index)) if isinstance(e, Load) else e

    def gather(e: Gather) -> Gather:
        shape = kernel.bindings[e.binding].shape
        return replace(e, index=(gather_offset(e.index, shape, kernel.loop_ranges),))

    def flat_result(r: Result) -> Result:
        if r.scatter is None:
            return _map_result(r, leaf, index=flat(r.binding, r.index), gather=gather)
        out = _map_result(r, leaf, index=(), gather=gather)
        place = scatter_offset(out.scatter.place, kernel.bindings[r.binding].shape)
        disjoint = sorted({e.dim for e in out.scatter.place if isinstance(e, LoopIndex)})
        return replace(out, scatter=replace(out.scatter, place=(place,), disjoint=tuple(disjoint)))

    return replace(
        kernel,
        bindings=tuple(replace(b, shape=(math.prod(b.shape),)) for b in kernel.bindings),
        results=tuple(flat_result(r) for r in kernel.results))


def drop_unit_loops(kernel: Kernel) -> Kernel:
    """Removes loops of one iteration (a reduction keeps its last one): an (M, 1) x K matmul
    is then a matvec, not a micro-kernel wasting all but one lane."""
    ranges, n_par = kernel.loop_ranges, kernel.num_parallel
    drop = [d for d in range(len(ranges)) if ranges[d] == 1]
    if len(ranges) > n_par and all(ranges[d] == 1 for d in range(n_par, len(ranges))):
        drop = [d for d in drop if d < len(ranges) - 1]
    if not drop:
        return kernel
    keep = [d for d in range(len(ranges)) if d not in drop]

    def shrink(ix: AffineExpr) -> AffineExpr:
        return AffineExpr(tuple(ix.coeffs[d] for d in keep), ix.const)

    def leaf(e):
        if isinstance(e, LoopIndex):
            return Const(0, e.dtype) if e.dim in drop else replace(e, dim=keep.index(e.dim))
        return replace(e, index=tuple(shrink(ix) for ix in e.index))

    return replace(
        kernel, loop_ranges=tuple(ranges[d] for d in keep),
        num_parallel=sum(1 for d in keep if d < n_par),
        results=tuple(_map_result(r, leaf, index=tuple(shrink(ix) for ix in r.index))
                      for r in kernel.results))


def order_parallel_loops(kernel: Kernel) -> Kernel:
    """Parallel loops sorted by the first result's stride, largest outermost (stable)."""
    np_ = kernel.num_parallel
    if not kernel.results or np_ < 2:
        return kernel
    stride = kernel.results[0].index[0].coeffs
    if not static_shape(stride[:np_]):
        return kernel
    key = [math.inf if stride[d] == 0 else abs(stride[d]) for d in range(np_)]
    order = sorted(range(np_), key=lambda d: -key[d])
    perm = order + list(range(np_, len(kernel.loop_ranges)))
    if perm == list(range(len(perm))):
        return kernel

    def permute(ix: AffineExpr) -> AffineExpr:
        return AffineExpr(tuple(ix.coeffs[d] for d in perm), ix.const)

    def leaf(e):
        if isinstance(e, LoopIndex):
            return replace(e, dim=perm.index(e.dim))
        return replace(e, index=tuple(permute(ix) for ix in e.index))

    return replace(
        kernel, loop_ranges=tuple(kernel.loop_ranges[d] for d in perm),
        results=tuple(_map_result(r, leaf, index=tuple(permute(ix) for ix in r.index))
                      for r in kernel.results))


def coalesce(kernel: Kernel) -> Kernel:
    """Merges loop d into loop d+1 while every access is linear across the pair."""
    indexed = {e.dim for r in kernel.results for e in result_nodes(r)
               if isinstance(e, LoopIndex)}
    accesses = [ld.index[0] for ld in loads(kernel)] + [r.index[0] for r in kernel.results]
    ranges = kernel.loop_ranges
    for d in range(len(ranges) - 1):
        if d + 1 == kernel.num_parallel or d in indexed or d + 1 in indexed:
            continue
        if all(ix.coeffs[d] == ix.coeffs[d + 1] * ranges[d + 1] for ix in accesses):
            return coalesce(_merge(kernel, d))
    return kernel


def _merge(kernel: Kernel, d: int) -> Kernel:
    ranges, num_parallel = merge_loop_ranges(kernel.loop_ranges, kernel.num_parallel, d)
    return replace(kernel, loop_ranges=ranges, num_parallel=num_parallel,
                   results=tuple(merge_loop(r, d) for r in kernel.results))


def _map_result(r: Result, leaf, index, gather=None) -> Result:
    """``r`` at ``index``, every Load and LoopIndex of its expressions replaced by ``leaf(node)``
    and every Gather (its index mapped) by ``gather(node)`` where given."""
    def node(e):
        if isinstance(e, (Load, LoopIndex)):
            return leaf(e)
        return gather(e) if gather is not None and isinstance(e, Gather) else None

    return map_result(r, node, index=index)


