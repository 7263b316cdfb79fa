"""Implicit GEMM: a convolution's patches computed where its GEMM reads them, never written.

``rewrite_convolutions`` (flow/convolution.py) turns a convolution into an im2col copy and a GEMM
that reads the copy's patches through collapsing views. Where every target is cuda and the
convolution is 16-bit with channels in whole 8-element chunks (or, in cuda's TF32 modes, f32 with
channels in 4-element chunks), the image is read channels-last
and the copy marked ``IMPLICIT_PATCHES``; that copy is inlined into the GEMM here: an element the
GEMM reads at view index I is the copy's value (the image element) at the patches index whose
row-major offset is I's. The patches index's digits are the view offset divided by the patches'
strides; a group of loop terms whose span stays inside its own digits (the view's K walks
(kh, kw, c), its N walks (oh, ow)) gives its digits by one division and one remainder by
constants, with no carry from any other group. The tensor-core templates then stage each
16-byte chunk of a patch with one ``cp.async`` (codegen/cuda/gathered.py). A 3x3
convolution's patches are 9x its image: writing and reading them back was a large part of
ResNet's f16 3x3 convolution time.
"""

from __future__ import annotations

import dataclasses
import math

from pyree.compiler.flow.convolution import IMPLICIT_PATCHES
from pyree.compiler.flow.rewrite import (
    dedupe_inputs,
    drop_unread,
    fold_decided,
    map_results,
    transform,
)
from pyree.compiler.kernel import (
    AffineExpr,
    Binary,
    Cast,
    Const,
    Expr,
    Gather,
    Load,
    LoopIndex,
    itemsize,
)
from pyree.compiler.tensor_program import Function, Generic, Op, Value, View, is_scatter, read_by

DIGIT = "ui32"   # digits: unsigned divisions by constants
INDEX = "i32"    # gather indices: an image index may sit one row before the image (a pad)


def inline_patches(function: Function) -> Function:
    """``function`` with every patches copy that one GEMM reads inlined into that GEMM."""
    ops = list(function.ops)
    readers: dict[int, list[Op]] = {}
    for op in ops:
        for v in read_by(op):
            readers.setdefault(id(v), []).append(op)
    results = {id(v) for v in function.results}
    defining = {id(r): op for op in ops for r in _defined(op)}
    dropped: set[int] = set()
    for i, op in enumerate(ops):
        if not isinstance(op, Generic) or op.num_parallel == len(op.loop_ranges):
            continue
        for b, value in enumerate(op.inputs):
            found = _patches_chain(value, op, defining, readers, results)
            if found is not None:
                copy, offset, chain = found
                op = _inline(op, b, copy, offset)   # renumbers the inputs: one per GEMM
                dropped |= {id(x) for x in chain}
                break
        ops[i] = op
    return dataclasses.replace(function, ops=[op for op in ops if id(op) not in dropped])


def _defined(op: Op) -> list[Value]:
    if isinstance(op, Generic):
        return op.results
    return [op.result] if isinstance(op, View) else []


def _patches_chain(value: Value, reader: Generic, defining, readers, results):
    """(copy, element offset of ``value`` in the copy's result, [views.., copy]) when ``value`` is
    a patches copy's result under views that nothing else reads, else None."""
    offset, chain = 0, []
    while True:
        if id(value) in results or [id(r) for r in readers.get(id(value), [])] != [id(reader)]:
            return None
        op = defining.get(id(value))
        if isinstance(op, View):
            size = itemsize(value.dtype)
            if op.byte_offset % size:
                return None
            offset += op.byte_offset // size
            chain.append(op)
            reader, value = op, op.source
            continue
        if not isinstance(op, Generic) or is_scatter(op) or not _is_patches_copy(op):
            return None
        return op, offset, chain + [op]


def _is_patches_copy(op: Generic) -> bool:
    """The im2col copy as convolution.py writes it: one result, written at the loop index."""
    if op.origin != IMPLICIT_PATCHES or len(op.outputs) != 1 or op.num_parallel != len(op.loop_ranges):
        return False
    out = op.outputs[0]
    return (out.init is None and out.epilogue is None and math.prod(op.loop_ranges) < 2**31
            and op.loop_ranges == op.results[0].shape
            and out.index == AffineExpr.identity(len(op.loop_ranges)))


def _inline(gemm: Generic, binding: int, copy: Generic, offset: int) -> Generic:
    base = len(gemm.inputs)
    value = copy.outputs[0].value
    view_shape = gemm.inputs[binding].shape

    def leaf(e: Expr) -> Expr | None:
        if isinstance(e, Load) and e.binding == binding:
            digits = patch_digits(e.index, view_shape, offset, copy.loop_ranges, gemm.loop_ranges)
            return _at(value, digits, base)
        return None

    outputs = tuple(dataclasses.replace(r, value=fold_decided(r.value, gemm.loop_ranges))
                    for r in map_results(gemm.outputs, leaf))
    fused = dataclasses.replace(gemm, inputs=gemm.inputs + list(copy.inputs), outputs=outputs)
    return dedupe_inputs(drop_unread(fused))


def _at(value: Expr, digits: list[Expr], base: int) -> Expr:
    """The copy's ``value`` at the patches index ``digits`` (DIGIT expressions), its loads turned
    into gathers of the GEMM's bindings from ``base`` on."""
    def index(ix: AffineExpr) -> Expr:
        return _affine([Cast("bitcast", d, INDEX) for d in digits], ix, INDEX)

    def leaf(e: Expr) -> Expr | None:
        if isinstance(e, Load):
            return Gather(e.binding + base, tuple(index(ix) for ix in e.index), e.dtype)
        if isinstance(e, Gather):
            return dataclasses.replace(e, binding=e.binding + base)
        if isinstance(e, LoopIndex):
            return Cast("extui", digits[e.dim], e.dtype)
        return None
    return transform(value, leaf)


def _affine(terms: list[Expr], ix: AffineExpr, dtype: str) -> Expr:
    out: Expr | None = None
    for c, t in zip(ix.coeffs, terms):
        if c:
            t = t if c == 1 else Binary("mul", t, Const(c, dtype), dtype)
            out = t if out is None else Binary("add", out, t, dtype)
    if out is None or ix.const:
        k = Const(ix.const, dtype)
        out = k if out is None else Binary("add", out, k, dtype)
    return out


def patch_digits(index: tuple[AffineExpr, ...], view_shape: tuple[int, ...], offset: int,
                 shape: tuple[int, ...], loop_ranges: tuple[int, ...]) -> list[Expr]:
    """The row-major index in ``shape`` of the element a read at ``index`` (over loops of
    ``loop_ranges``) of a ``view_shape`` view, ``offset`` elements into the buffer, lands on:
    one DIGIT expression per dim."""
    flat = [0] * len(loop_ranges)
    const = offset
    for stride, ix in zip(_strides(view_shape), index):
        const += stride * ix.const
        for d, c in enumerate(ix.coeffs):
            flat[d] += stride * c
    terms = [(c, d) for d, c in enumerate(flat) if c and loop_ranges[d] > 1]
    digits = _carry_free(terms, const, shape, loop_ranges)
    if digits is None:
        digits = _divided(terms, const, shape)
    return digits


def _strides(shape: tuple[int, ...]) -> list[int]:
    return [math.prod(shape[i + 1:]) for i in range(len(shape))]


def _loop(d: int) -> Expr:
    return Cast("trunci", LoopIndex(d), DIGIT)


def _carry_free(terms, const: int, shape, loop_ranges) -> list[Expr] | None:
    """Digits group by group, where no two groups share a digit and no group overflows the
    digits it spans; else None. A group is the terms (and the constant) whose coefficient's
    largest dividing stride is the same dim's: a split K's chunk and the walk inside a chunk
    (288 chunk + k) are one walk over K's digits."""
    strides = _strides(shape)
    groups: dict[int, tuple[list[Expr], int]] = {}
    sources = [(c, _loop(d), loop_ranges[d] - 1) for c, d in terms]
    if const:
        sources.append((const, None, 1))
    for c, x, top in sources:
        if c < 0:
            return None
        j = next(i for i, s in enumerate(strides) if c % s == 0)
        q = c // strides[j]
        values, high = groups.get(j, ([], 0))
        groups[j] = (values + [Const(q, DIGIT) if x is None else _scaled(x, q)], high + q * top)
    parts: list[list[Expr]] = [[] for _ in shape]
    owner: dict[int, int] = {}
    for j, (values, high) in groups.items():
        value, radix, i = _sum(values), 1, j
        while True:
            if i < 0 or owner.setdefault(i, j) != j:
                return None
            digit = value if radix == 1 else Binary("div", value, Const(radix, DIGIT), DIGIT)
            if high // radix >= shape[i]:
                digit = Binary("rem", digit, Const(shape[i], DIGIT), DIGIT)
            parts[i].append(digit)
            radix *= shape[i]
            if high < radix:
                break
            i -= 1
    return [_sum(p) for p in parts]


def _divided(terms, const: int, shape) -> list[Expr]:
    """Digits of the whole offset, each a division and a remainder: right for any read inside
    the buffer, carries and all (a negative coefficient wraps modulo 2**32, and so does the sum,
    back to the offset, which is below 2**31)."""
    flat = _sum([_scaled(_loop(d), c % 2**32) for c, d in terms]
                + ([Const(const % 2**32, DIGIT)] if const else []))
    out = []
    for i, (s, n) in enumerate(zip(_strides(shape), shape)):
        digit = flat if s == 1 else Binary("div", flat, Const(s, DIGIT), DIGIT)
        out.append(digit if i == 0 else Binary("rem", digit, Const(n, DIGIT), DIGIT))
    return out


def _scaled(x: Expr, c: int) -> Expr:
    return x if c == 1 else Binary("mul", x, Const(c, DIGIT), DIGIT)


def _sum(parts: list[Expr]) -> Expr:
    if not parts:
        return Const(0, DIGIT)
    out = parts[0]
    for p in parts[1:]:
        out = Binary("add", out, p, DIGIT)
    return out
