"""Long reductions with few outputs, split in two: partial folds, then a fold of the partials.

Every backend's reduction template gives one output to one workgroup (or one thread). A sum of
10M elements to one scalar, or a max over a 50257-wide vocabulary for 32 rows, then runs on one
or a few multiprocessors of a GPU with 132 (3.2 ms for the 10M sum on the H100, against 34 us in
PyTorch), or on one core of a CPU. An associative fold (``acc = acc <op> f``, ``kernel.fold_pattern``)
whose outputs are fewer than ``FEW_OUTPUTS`` and whose reduction is at least ``LONG_REDUCTION`` long
becomes:

- a partial Generic: the first reduction loop (extent N) split into S chunks of C = ceil(N / S) as
  a new parallel loop ``s`` and a reduction loop ``c``, folding ``f`` at ``s * C + c`` (the
  fold's identity past N) into a ``(outputs..., S)`` tensor in the fold's own dtype;
- a final Generic with the original results: folds the S partials, then applies the original
  init and epilogue, so its users and fused epilogues are unchanged.

S gives about ``TARGET_PARTIALS`` partial outputs, with chunks of at least ``MIN_CHUNK``. Floats are
reassociated, as every parallel reduction already does.
"""

from __future__ import annotations

import dataclasses
import math

from pyree.compiler.flow.regions import drop_unread
from pyree.compiler.flow.rewrite import affine_value, compose, remap_loops
from pyree.compiler.flow.tensor_program import Function, Generic, Op, Value
from pyree.compiler.kernel import (
    Acc,
    AffineExpr,
    Binary,
    Compare,
    Const,
    Load,
    Result,
    Select,
    fold_identity,
    fold_pattern,
)

FEW_OUTPUTS = 256
LONG_REDUCTION = 16384
TARGET_PARTIALS = 512
MIN_CHUNK = 1024


def split_reductions(function: Function) -> Function:
    ops = [new for op in function.ops for new in split_reduction(op)]
    return dataclasses.replace(function, ops=ops)


def split_reduction(op: Op) -> list[Op]:
    """``[op]``, or ``[partial, final]`` for a long fold with few outputs."""
    if not isinstance(op, Generic) or op.num_parallel == len(op.loop_ranges):
        return [op]
    folds = fold_pattern(op.outputs)
    outputs = math.prod(op.loop_ranges[:op.num_parallel])
    if (folds is None or any(f.dtype == "i1" for _, f in folds) or outputs >= FEW_OUTPUTS
            or math.prod(op.loop_ranges[op.num_parallel:]) < LONG_REDUCTION):
        return [op]
    extent = op.loop_ranges[op.num_parallel]
    splits = min(-(-TARGET_PARTIALS // outputs), extent // MIN_CHUNK)
    if splits < 2:
        return [op]
    chunk = -(-extent // splits)
    splits = -(-extent // chunk)
    partial = _partial(op, folds, splits, chunk)
    return [partial, _final(op, folds, partial.results, splits)]


def _unit(n: int, d: int) -> AffineExpr:
    return AffineExpr.loop(n, d)


def _partial(op: Generic, folds, splits: int, chunk: int) -> Generic:
    """Loops (parallel..., s | c, other reductions...); result k[..., s] folds its chunk."""
    n, p = len(op.loop_ranges), op.num_parallel
    new = n + 1
    loop_map = [_unit(new, d if d < p else d + 1) for d in range(n)]
    loop_map[p] = AffineExpr(tuple(chunk if d == p else int(d == p + 1) for d in range(new)))
    position = affine_value(loop_map[p])
    index = tuple(_unit(new, d) for d in range(p + 1))
    shape = tuple(op.loop_ranges[:p]) + (splits,)
    results, outputs = [], []
    for k, (fold, f) in enumerate(folds):
        identity = Const(fold_identity(fold, f.dtype), f.dtype)
        moved = remap_loops(f, tuple(loop_map), new, lambda b: b)
        if splits * chunk != op.loop_ranges[p]:  # the last chunk runs past the extent
            inside = Compare("lt", position, Const(op.loop_ranges[p], "index"))
            moved = Select(inside, moved, identity, f.dtype)
        results.append(Value(f.dtype, shape))
        outputs.append(Result(k, index, Binary(fold, Acc(k, f.dtype), moved, f.dtype), identity))
    return drop_unread(Generic(
        inputs=list(op.inputs), results=results, outputs=tuple(outputs),
        loop_ranges=tuple(op.loop_ranges[:p]) + (splits, chunk) + tuple(op.loop_ranges[p + 1:]),
        num_parallel=p + 1, location=op.location, origin=f"{op.origin} (partial folds)"))


def _final(op: Generic, folds, partials: list[Value], splits: int) -> Generic:
    """Folds the partials over s; init and epilogue as before, at the reduction's first index."""
    n, p = len(op.loop_ranges), op.num_parallel
    new = p + 1
    at_start = tuple(_unit(new, d) if d < p else AffineExpr((0,) * new) for d in range(n))
    base = len(op.inputs)

    def move(e):
        return None if e is None else remap_loops(e, at_start, new, lambda b: b)

    outputs = []
    for k, ((fold, f), r) in enumerate(zip(folds, op.outputs)):
        partial = Load(base + k, tuple(_unit(new, d) for d in range(new)), f.dtype)
        outputs.append(Result(r.binding, tuple(compose(ix, at_start, new) for ix in r.index),
                              Binary(fold, Acc(k, f.dtype), partial, f.dtype),
                              move(r.init), move(r.epilogue)))
    return drop_unread(Generic(
        inputs=list(op.inputs) + list(partials), results=list(op.results), outputs=tuple(outputs),
        loop_ranges=tuple(op.loop_ranges[:p]) + (splits,),
        num_parallel=p, location=op.location, origin=op.origin))
