"""Flash-decoding for fuse-attention's op (flow/attention.py): few long query rows would leave
most of a GPU idle, a block computing a row, so their keys are split into chunks, a block each,
whose softmax states a row kernel then combines (two kernels). A key count that no chunk count
divides well (a prime) gets equal chunks and a shorter last one: its keys past the end score
-inf and read 0 for every load (Selects, so that no load leaves its binding), where the op had
stayed whole, a block a row."""

from __future__ import annotations

import dataclasses

from pyree.compiler.flow.rewrite import affine_value, compose, drop_unread, remap_loops
from pyree.compiler.kernel import (
    Acc,
    AffineExpr,
    Binary,
    Compare,
    Const,
    Expr,
    Final,
    Load,
    Result,
    Select,
    Unary,
    is_float,
    transform,
)
from pyree.compiler.sizes import num_elements
from pyree.compiler.tensor_program import Generic, Value

# Fewer query rows than this leave most of a GPU idle (the value stands for a Hopper-class GPU's
# multiprocessor count): their keys are split into chunks of at least MIN_CHUNK_KEYS, for about
# two blocks a multiprocessor.
FEW_ROWS = 132
MIN_CHUNK_KEYS = 128


def split_keys(op: Generic) -> list[Generic]:
    """``[op]``, or, for few long rows, a partial attention op per chunk of keys and the row
    kernel that combines the chunks: ``m = max_s m_s``, weights ``exp(m_s - m)`` (0 for a chunk
    all -inf, 1 for every chunk of a row all -inf), ``l = sum_s w_s l_s`` and O's epilogue of
    ``init + sum_s w_s o_s / l`` (of the sum alone where the row is all -inf and torch selects
    0), the chain's special values kept."""
    att = op.attention
    e = att.e
    rows, keys = num_elements(op.loop_ranges[:e]), op.loop_ranges[e + 1]
    if rows >= FEW_ROWS:
        return [op]
    splits, chunk = _chunks(rows, keys)
    if splits < 2:
        return [op]
    width = len(op.loop_ranges) + 1
    # partial: the row loops, the chunk s, e | the key in the chunk, c
    key = AffineExpr(tuple(chunk if d == e else int(d == e + 2) for d in range(width)))
    moves = (*(AffineExpr.loop(width, d) for d in range(e)), AffineExpr.loop(width, e + 1),
             key, AffineExpr.loop(width, e + 3))
    inside = Compare("lt", affine_value(key), Const(keys, "index"))
    ragged = splits * chunk > keys  # the last chunk's keys past the end read nothing

    def outside_read(x: Expr) -> Expr | None:  # a key past the last: its loads not made
        if isinstance(x, Load) and any(ix.coeffs[e + 2] for ix in x.index):
            zero = False if x.dtype == "i1" else 0.0 if is_float(x.dtype) else 0
            return Select(inside, x, Const(zero, x.dtype), x.dtype)
        return None

    def moved(x: Expr) -> Expr:
        x = remap_loops(x, moves, width, lambda b: b)
        return transform(x, outside_read) if ragged else x

    ranges = (*op.loop_ranges[:e], splits, op.loop_ranges[e], chunk, op.loop_ranges[-1])
    out, name = op.outputs[0], op.results[0].name
    o = Value("f32", ranges[:e + 2], f"{name}_o")
    m, ell = (Value("f32", ranges[:e + 1], f"{name}_{x}") for x in ("m", "l"))
    state = tuple(AffineExpr.loop(width, d) for d in range(e + 1))
    unused = Const(0.0, "f32")
    partial = Generic(
        list(op.inputs), [o, m, ell],
        (Result(0, (*state, AffineExpr.loop(width, e + 1)), moved(out.value), Const(-0.0, "f32")),
         Result(1, state, unused), Result(2, state, unused)),
        ranges, e + 2, op.location, "attention (partial)", op.sources, dataclasses.replace(
            att, score_init=moved(att.score_init), score_step=moved(att.score_step),
            score=_absent(moved(att.score), inside) if ragged else moved(att.score),
            e=e + 1, partial=True))
    return [partial, _combine(op, o, m, ell, splits)]


def _chunks(rows: int, keys: int) -> tuple[int, int]:
    """(chunks, keys a chunk) for about two blocks a multiprocessor, chunks of at least
    MIN_CHUNK_KEYS: chunks that divide the keys where they make at least half as many blocks,
    else equal chunks and a shorter last one (1021 keys, a prime: 7 chunks of 146, the last of
    145; whole, its heads had run on a block each)."""
    most = min(-(-2 * FEW_ROWS // rows), keys // MIN_CHUNK_KEYS)
    exact = max((d for d in range(2, most + 1) if keys % d == 0), default=1)
    if 2 * exact >= most:
        return exact, keys // exact
    chunk = -(-keys // most)
    return -(-keys // chunk), chunk


def _absent(score: Expr, inside: Expr) -> Expr:
    """A key past the last scores -inf: weight 0, as a masked key, times the 0 its value reads."""
    return Select(inside, score, Const(float("-inf"), score.dtype), score.dtype)


def _combine(op: Generic, o: Value, m: Value, ell: Value, splits: int) -> Generic:
    """The row kernel over (row loops, e | s) finishing ``op`` from its chunks' states."""
    att, out = op.attention, op.outputs[0]
    e, width = att.e, att.e + 2
    s = AffineExpr.loop(width, e + 1)
    rows = tuple(AffineExpr.loop(width, d) for d in range(e))
    column = AffineExpr.loop(width, e)
    zero = AffineExpr((0,) * width)
    at_o = Load(0, (*rows, s, column), "f32")
    at_m, at_l = (Load(b, (*rows, s), "f32") for b in (1, 2))
    minus_inf = Const(float("-inf"), "f32")
    row_max, total = Final(0, "f32"), Final(1, "f32")
    dead = Compare("eq", row_max, minus_inf)
    weight = Select(dead, Const(1.0, "f32"), Select(
        Compare("eq", at_m, minus_inf), Const(0.0, "f32"),
        Unary("exp", Binary("sub", at_m, row_max, "f32"), "f32"), "f32"), "f32")
    moves = (*rows, column, zero, zero)  # O's init and epilogue at key and depth 0

    def moved(x: Expr) -> Expr:
        return remap_loops(x, moves, width, lambda b: b + 3)

    summed = Acc(2, "f32")
    weighted = Binary("div", summed, total, "f32")
    if att.masked_zero:
        weighted = Select(dead, summed, weighted, "f32")
    acc = Binary("add", moved(out.init), weighted, "f32")
    stored = transform(moved(out.epilogue), lambda x: acc if x == Acc(0, "f32") else None) \
        if out.epilogue is not None else acc
    here = (*rows, column)
    results = (
        Result(1, here, Binary("max", at_m, Acc(0, "f32"), "f32"), minus_inf),
        Result(2, here, Binary("add", Acc(1, "f32"), Binary("mul", at_l, weight, "f32"), "f32"),
               Const(-0.0, "f32")),
        Result(0, tuple(compose(ix, moves, width) for ix in out.index),
               Binary("add", summed, Binary("mul", at_o, weight, "f32"), "f32"),
               Const(-0.0, "f32"), stored))
    ranges = (*op.loop_ranges[:e + 1], splits)
    scratch = [Value("f32", ranges[:e + 1], f"{o.name}_{x}") for x in ("max", "sum")]
    return drop_unread(Generic([o, m, ell, *op.inputs], [op.results[0], *scratch], results,
                               ranges, e + 1, op.location, "attention (combine)", op.sources))

