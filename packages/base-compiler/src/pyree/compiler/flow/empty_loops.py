"""Ops over a static loop of size zero, settled before anything plans their kernels.

A zero-size tensor is valid everywhere (JAX's ``jnp.zeros((0, 5))``, a model's empty batch or
mask), but a kernel over an empty loop nest divided by zero in the GPU templates' grid
arithmetic (every elementwise, reduction and sort kernel on cuda and rocm) and in llvm-cpu's
matmul tiling. Such ops are settled here, for every target alike:

- a parallel loop of size zero: the op writes no element, so it becomes a constant of no
  elements per result (what reads them still finds them);
- a reduction loop of size zero (a sum over an empty axis, a product with K = 0): each result is
  its starting value passed through its epilogue (a sum 0, a max -inf or the given initial value,
  a mean 0 / 0 = NaN, as numpy and JAX answer), computed by a parallel op over the remaining loops.
"""

from __future__ import annotations

import dataclasses

from pyree.compiler.kernel import Acc, AffineExpr, Const, Final, Load, LoopIndex, Result, transform
from pyree.compiler.sizes import is_static
from pyree.compiler.tensor_program import Constant, Function, Generic, is_line_walk, is_scatter


def settle_empty_loops(function: Function) -> Function:
    ops = []
    for op in function.ops:
        if isinstance(op, Generic) and op.attention is None and not is_scatter(op) \
                and not is_line_walk(op):
            empty = [is_static(d) and d == 0 for d in op.loop_ranges]
            if any(empty[:op.num_parallel]):
                ops.extend(Constant(v, splat=0, location=op.location) for v in op.results)
                continue
            if any(empty):
                op = _without_reductions(op) or op
        ops.append(op)
    return dataclasses.replace(function, ops=ops)


def _without_reductions(op: Generic) -> Generic | None:
    """``op`` as a parallel op storing each result's epilogue of its starting value; None where a
    result has no starting value, is stored along the reduction (a row result) or reads another's
    stored value (a ``Final``)."""
    n = op.num_parallel
    if any(r.init is None or r.row or any(isinstance(e, Final) for root in (r.init, r.epilogue)
                                           if root is not None for e in _leaves(root))
           for r in op.outputs):
        return None

    def at_zero(index: tuple[AffineExpr, ...]) -> tuple[AffineExpr, ...]:
        """Evaluated where every reduction loop is 0: their coefficients go."""
        return tuple(AffineExpr(ix.coeffs[:n], ix.const) for ix in index)

    def leaf(e):
        if isinstance(e, Load):
            return dataclasses.replace(e, index=at_zero(e.index))
        if isinstance(e, LoopIndex) and e.dim >= n:
            return Const(0, e.dtype)
        return None

    starts = [transform(r.init, leaf) for r in op.outputs]

    def final(r: Result, start) -> Result:
        value = start if r.epilogue is None else transform(
            transform(r.epilogue, leaf), lambda e: starts[e.result] if isinstance(e, Acc) else None)
        return Result(r.binding, at_zero(r.index), value)

    outputs = tuple(final(r, s) for r, s in zip(op.outputs, starts))
    return dataclasses.replace(op, outputs=outputs, loop_ranges=op.loop_ranges[:n], num_parallel=n)


def _leaves(expr) -> list:
    found: list = []
    transform(expr, lambda e: found.append(e))  # (append returns None: nothing replaced)
    return found
