"""Arg-max and arg-min folds (torch's ``argmax``) as plain folds that run in parallel.

torch-mlir writes ``argmax`` over a row as one reduction with two results updated together:
``m = max(m, x)`` (``arith.maximumf``) and ``i = x > m ? j : i``. The index update reads the
other result's accumulator, so it is no associative fold (``kernel.fold_pattern``): every backend
ran it one element after another, one thread per row (GPT-2's 50257-word argmax took 0.95 ms of
a 1.7 ms decode step on the H200). Here it becomes plain folds, which the reduction templates
run across a block and ``split_reduction`` spreads over the GPU:

1. ``first_nan = min(x is NaN ? j : N)`` (float rows): ``maximumf`` makes the value NaN from the
   first NaN on, and nothing compares greater than NaN, so the index never moves past it;
2. ``top = max(j < first_nan ? x : identity)``: the running maximum just before that;
3. ``best = min(j < first_nan and x == top ? j : N)``: where the index last moved, the first
   element equal to the maximum (the update is strict);
4. elementwise: value ``first_nan < N ? NaN : top``; index ``first_nan < N ? j(first_nan) :
   top == identity ? init : j(best)`` (an element equal to the identity never moves the index).

Without NaN this is the sequential loop's answer exactly, -inf and ties included, for
``max``/``gt`` and ``min``/``lt`` on floats and integers; any other shape of two-result fold is
left as it was. A row holding NaN gets the first NaN's index, where the loop's strict compare
would leave the index at the maximum before it: the value is NaN, so the index names the element
that gave it, as PyTorch, numpy and JAX answer (torch-mlir's compare is what skipped it; this is
the one place pyree departs from the loop as written).

Where only the index is read (``argmax``) of a row of 8- or 16-bit elements at most 65536 long
(a language model's vocabulary in f16 or bf16), folds 2 and 3 are one: the maximum of an i32 key
whose high half orders the elements as the fold does (the float's bits made to sort as signed
integers, -0 as +0, so that equal elements tie) and whose low half is 65535 - j, so that of equal
elements the first wins. One fold fewer reads the row (and two kernels fewer where a GPU splits
each fold in two); the value itself is not kept by the key (-0 and +0 tie there).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from pyree.compiler.flow.rewrite import drop_unread
from pyree.compiler.kernel import (
    DTYPES,
    Acc,
    AffineExpr,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Load,
    LoopIndex,
    Result,
    Select,
    Unary,
    fold_identity,
    is_float,
    itemsize,
    size_value,
    transform,
    walk,
)
from pyree.compiler.tensor_program import Function, Generic, Op, Value, read_by, sources_of

_STRICT = {"max": "gt", "min": "lt"}
_FLIPPED = {"gt": "lt", "lt": "gt"}


def split_arg_folds(function: Function) -> Function:
    used = {id(v) for op in function.ops for v in read_by(op)} | {id(v) for v in function.results}
    ops = [new for op in function.ops for new in split_arg_fold(op, used)]
    return dataclasses.replace(function, ops=ops)


def split_arg_fold(op: Op, used: set[int] | None = None) -> list[Op]:
    """``[op]``, or the four ops above for an arg-max/min fold; where nothing reads the index
    (``used``: the ids of the values something reads; torch's softmax takes ``max.dim``'s
    values alone), just the value's own fold."""
    found = _match(op)
    if found is None:
        return [op]
    value_k, index_k, fold, f, position = found
    if used is not None and id(op.results[op.outputs[index_k].binding]) not in used:
        r = op.outputs[value_k]
        return [dataclasses.replace(op, results=[op.results[r.binding]],
                                    outputs=(dataclasses.replace(r, binding=0),))]
    n, p = len(op.loop_ranges), op.num_parallel
    r = p  # the one reduction loop
    extent = size_value(op.loop_ranges[r], "index")
    dtype = f.dtype
    identity = Const(fold_identity(fold, dtype), dtype)
    j = LoopIndex(r)
    here = tuple(AffineExpr.loop(n, d) for d in range(p))
    shape = tuple(op.loop_ranges[:p])
    inputs, ops = list(op.inputs), []

    def fold_op(name: str, value_dtype: str, fold_name: str, term: Expr, init: Expr) -> Load:
        """A reduction over op's loops folding ``term`` into a new tensor; a Load of it."""
        result = Value(value_dtype, shape, f"{name}")
        ops.append(drop_unread(Generic(
            inputs=list(inputs), results=[result],
            outputs=(Result(0, here, Binary(fold_name, Acc(0, value_dtype), term, value_dtype), init),),
            loop_ranges=op.loop_ranges, num_parallel=p, location=op.location,
            origin=f"{op.origin} ({name})", sources=sources_of(op))))
        inputs.append(result)
        return Load(len(inputs) - 1, here, value_dtype)

    before_nan = None
    if is_float(dtype):
        first_nan = fold_op("first_nan", "index", "min",
                            Select(Compare("une", f, f), j, extent, "index"), extent)
        before_nan = Compare("lt", j, first_nan)
    kept = f if before_nan is None else Select(before_nan, f, identity, dtype)
    value_read = used is None or id(op.results[op.outputs[value_k].binding]) in used
    if not value_read and _keyed(dtype) and isinstance(op.loop_ranges[r], int) \
            and 1 <= op.loop_ranges[r] <= KEY_POSITIONS:
        key = fold_op("key", "i32", "max", _key(kept, fold, j), Const(-2**31, "i32"))
        at = tuple(AffineExpr.loop(p, d) for d in range(p))
        key_p = Load(key.binding, at, "i32")
        first = Cast("extui", Binary("sub", Const(KEY_POSITIONS - 1, "i32"),
                                     Binary("and", key_p, Const(KEY_POSITIONS - 1, "i32"), "i32"),
                                     "i32"), "index")
        moved_identity = Compare("eq", Binary("shr", key_p, Const(16, "i32"), "i32"),
                                 Const(_order(fold_identity(fold, dtype), fold, dtype), "i32"))
        index = _nan_first(Select(moved_identity, op.outputs[index_k].init,
                                  transform(position, lambda e: first if e == j else None), position.dtype),
                           position, first_nan if before_nan is not None else None, at, extent, j)
        r_ = op.outputs[index_k]
        ops.append(drop_unread(Generic(
            inputs=list(inputs), results=[op.results[r_.binding]],
            outputs=(Result(0, tuple(AffineExpr(ix.coeffs[:p], ix.const) for ix in r_.index), index),),
            loop_ranges=tuple(op.loop_ranges[:p]), num_parallel=p, location=op.location,
            origin=f"{op.origin} (arg fold)", sources=sources_of(op))))
        return ops
    top = fold_op("top", dtype, fold, kept, identity)
    equal = Compare("eq", f, top)
    chosen = equal if before_nan is None else Binary("and", before_nan, equal, "i1")
    best = fold_op("best", "index", "min", Select(chosen, j, extent, "index"), extent)

    # the original results, elementwise over the parallel loops
    at = tuple(AffineExpr.loop(p, d) for d in range(p))

    def moved(e: Load) -> Load:
        return Load(e.binding, at, e.dtype)
    top_p, best_p = moved(top), moved(best)
    value = top_p
    if before_nan is not None:
        nan = Const(float("nan"), dtype)
        value = Select(Compare("lt", moved(first_nan), extent), nan, top_p, dtype)
    index_init = op.outputs[index_k].init
    picked = transform(position, lambda e: best_p if e == j else None)
    index = _nan_first(Select(Compare("eq", top_p, identity), index_init, picked, position.dtype),
                       position, first_nan if before_nan is not None else None, at, extent, j)
    outputs = []
    for k, expr in ((value_k, value), (index_k, index)):
        r_ = op.outputs[k]
        outputs.append(Result(r_.binding, tuple(AffineExpr(ix.coeffs[:p], ix.const) for ix in r_.index),
                              expr))
    ops.append(drop_unread(Generic(
        inputs=list(inputs), results=list(op.results), outputs=tuple(outputs),
        loop_ranges=tuple(op.loop_ranges[:p]), num_parallel=p, location=op.location,
        origin=f"{op.origin} (arg fold)", sources=sources_of(op))))
    return ops


def _nan_first(index: Expr, position: Expr, first_nan: Load | None, at: tuple, extent: Expr,
               j: LoopIndex) -> Expr:
    """``index``, or the first NaN's position where the row holds one (float rows)."""
    if first_nan is None:
        return index
    nan_at = Load(first_nan.binding, at, first_nan.dtype)
    return Select(Compare("lt", nan_at, extent), transform(position, lambda e: nan_at if e == j else None),
                  index, position.dtype)


KEY_POSITIONS = 1 << 16  # the low half of a key


def _keyed(dtype: str) -> bool:
    return dtype in ("f16", "bf16", "i8", "i16", "ui8", "ui16")


def _key(x: Expr, fold: str, j: Expr) -> Expr:
    """i32: x's place in the fold's order (``_order``) above 65535 - j."""
    if is_float(x.dtype):  # -0 as +0: equal elements tie, as the strict update has it
        zero = Const(0.0, x.dtype)
        x = Select(Compare("eq", x, zero), zero, x, x.dtype)
        bits = Cast("extsi", Cast("bitcast", x, "i16"), "i32")
        # the magnitude bits of a negative float flipped: its bits sort as signed integers
        place = Select(Compare("lt", bits, Const(0, "i32")),
                       Binary("xor", bits, Const(0x7FFF, "i32"), "i32"), bits, "i32")
    elif x.dtype.startswith("ui"):
        place = Binary("sub", Cast("extui", x, "i32"), Const(1 << (8 * itemsize(x.dtype) - 1), "i32"), "i32")
    else:
        place = Cast("extsi", x, "i32")
    if fold == "min":
        place = Unary("not", place, "i32")
    low = Binary("sub", Const(KEY_POSITIONS - 1, "i32"), Cast("trunci", j, "i32"), "i32")
    return Binary("or", Binary("shl", place, Const(16, "i32"), "i32"), low, "i32")


def _order(value: float | int, fold: str, dtype: str) -> int:
    """The high half of ``_key`` for the constant ``value``."""
    if is_float(dtype):
        value = 0.0 if value == 0 else value
        bits = int(np.array(value, DTYPES[dtype]).view(np.int16))
        place = bits ^ 0x7FFF if bits < 0 else bits
    elif dtype.startswith("ui"):
        place = int(value) - (1 << (8 * itemsize(dtype) - 1))
    else:
        place = int(value)
    return ~place if fold == "min" else place


def _match(op: Op):
    """(value result, index result, fold, folded expression, index expression) of an arg fold."""
    if not isinstance(op, Generic) or len(op.outputs) != 2 or len(op.loop_ranges) != op.num_parallel + 1:
        return None
    if any(r.epilogue is not None or r.row for r in op.outputs):
        return None
    for value_k, index_k in ((0, 1), (1, 0)):
        rv, ri = op.outputs[value_k], op.outputs[index_k]
        v = rv.value
        if not isinstance(v, Binary) or v.op not in _STRICT:
            continue
        acc = Acc(value_k, v.dtype)
        f = v.b if v.a == acc else v.a if v.b == acc else None
        if f is None or _reads_acc(f) or rv.init != Const(fold_identity(v.op, v.dtype), v.dtype):
            continue
        s = ri.value
        if not (isinstance(s, Select) and s.b == Acc(index_k, s.dtype) and isinstance(s.cond, Compare)
                and isinstance(ri.init, Const)):
            continue
        c = s.cond
        if not ((c.predicate == _STRICT[v.op] and (c.a, c.b) == (f, acc)) or
                (c.predicate == _FLIPPED[_STRICT[v.op]] and (c.a, c.b) == (acc, f))):
            continue
        if not _is_position(s.a, op.num_parallel):
            continue
        return value_k, index_k, v.op, f, s.a
    return None


def _reads_acc(e: Expr) -> bool:
    return any(isinstance(x, Acc) for x in walk(e))


def _is_position(e: Expr, r: int) -> bool:
    """``e`` is the reduction loop's index, through integer casts only."""
    while isinstance(e, Cast) and e.op in ("bitcast", "index_cast", "extsi", "extui", "trunci"):
        e = e.x
    return e == LoopIndex(r)
