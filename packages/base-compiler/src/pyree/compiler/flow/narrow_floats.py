"""f16 and bf16 arithmetic in f32, rounded to the narrow type once, where a value leaves it.

PyTorch computes a half-precision op in f32 and rounds its result once, and accumulates every
reduction over f16 or bf16 data in f32: sums, means, softmax and normalisation statistics. The
linalg that torch-mlir (or any importer) hands over keeps the element types instead: a mean over
a 112x112 f16 feature map is an f16 accumulator taking 12544 terms, and a sigmoid spelled as four
f16 ops rounds four times. Compiled as written, EfficientNet-B0 in f16 was 4x less accurate than
PyTorch's f16 on the same weights. So, in every Generic after fusion (and in a fold about to be
split, so that its partials are f32 too):

- an accumulator of a narrow float type becomes f32 (its init extended exactly); the result
  stores its epilogue, computed in f32 from the f32 accumulator, rounded once (or the
  accumulator itself, rounded);
- arithmetic on narrow floats (+ - * /, max, min, math functions, selects) computes on f32
  values and rounds to the narrow type only where its value leaves arithmetic: a store, an
  explicit conversion of the program (torch-mlir's truncf after a convolution stays: that is
  PyTorch's own rounding between ops; a widening extf of an arithmetic result rounds first, since
  the program's value there is of the narrow type: JAX's ``(a.astype(f16) + 1).astype(f32)`` of
  65504 is 65504, and of 3e38 inf), a comparison, an integer conversion, or an operation that
  is discontinuous (floor, ceil, round, trunc, sign, rem: computed on the rounded value, so that
  the extra precision never changes which integer comes out).

One f32 add, subtract, multiply, divide or square root rounded to f16 or bf16 equals the
narrow op (f32 carries more than twice their precision plus two bits); a chain rounds once
instead of per op, as C compilers evaluate ``_Float16`` on x86 (excess precision,
FLT_EVAL_METHOD). Results can differ from op-by-op rounding only by being closer to exact.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from pyree.compiler.kernel import (
    DTYPES,
    Acc,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Gather,
    Result,
    Select,
    Unary,
)
from pyree.compiler.tensor_program import Function, Generic, is_line_walk, is_scatter

NARROW = ("f16", "bf16")
WIDE = "f32"
# Their operand is rounded first: with extra precision they could jump to another integer.
DISCONTINUOUS = {"floor", "ceil", "round", "roundeven", "trunc", "sign", "rem"}


def widen_narrow_floats(function: Function) -> Function:
    return dataclasses.replace(function, ops=[
        widen(op) if isinstance(op, Generic) and not is_scatter(op) and not is_line_walk(op) else op
        for op in function.ops])


def widened(e: Expr) -> Expr:
    """``e`` with its narrow-float arithmetic in f32, rounded once to its own type."""
    return _Widening(set()).narrow(e)


def widen(op: Generic) -> Generic:
    """``op`` with its narrow-float accumulators and arithmetic in f32."""
    reduces = op.num_parallel < len(op.loop_ranges)
    accs = {k for k, r in enumerate(op.outputs)
            if reduces and not r.row and r.value.dtype in NARROW}
    w = _Widening(accs)
    outputs = []
    for k, r in enumerate(op.outputs):
        if k in accs:
            finished = r.epilogue if r.epilogue is not None else Acc(k, r.value.dtype)
            r = dataclasses.replace(r, value=w.wide(r.value),
                                    init=None if r.init is None else w.wide(r.init),
                                    epilogue=w.narrow(finished))
        else:
            r = Result(r.binding, r.index, w.narrow(r.value), w.maybe(r.init), w.maybe(r.epilogue),
                       r.row)
        outputs.append(r)
    outputs = tuple(outputs)
    return op if outputs == op.outputs else dataclasses.replace(op, outputs=outputs)


class _Widening:
    """``narrow(e)``: e, of its own dtype, with the narrow arithmetic inside it done in f32;
    ``wide(e)``: a narrow-float e as an f32 expression, unrounded."""

    def __init__(self, accs: set[int]):
        self.accs = accs
        self._narrow: dict[Expr, Expr] = {}
        self._wide: dict[Expr, Expr] = {}

    def maybe(self, e: Expr | None) -> Expr | None:
        return None if e is None else self.narrow(e)

    def narrow(self, e: Expr) -> Expr:
        if e not in self._narrow:
            self._narrow[e] = self._narrow_of(e)
        return self._narrow[e]

    def wide(self, e: Expr) -> Expr:
        if e not in self._wide:
            self._wide[e] = self._wide_of(e)
        return self._wide[e]

    def _narrow_of(self, e: Expr) -> Expr:
        if e.dtype in NARROW and (_arithmetic(e) or isinstance(e, Acc) and e.result in self.accs):
            return Cast("fptrunc", self.wide(e), e.dtype)
        return _rebuild(e, self.narrow)

    def _wide_of(self, e: Expr) -> Expr:
        if isinstance(e, Acc) and e.result in self.accs:
            return Acc(e.result, WIDE)
        if isinstance(e, Const):
            with np.errstate(over="ignore"):
                return Const(float(DTYPES[e.dtype].type(e.value)), WIDE)
        if isinstance(e, Select):
            return Select(self.narrow(e.cond), self.wide(e.a), self.wide(e.b), WIDE)
        if isinstance(e, Unary) and e.op not in DISCONTINUOUS:
            return Unary(e.op, self.wide(e.x), WIDE)
        if isinstance(e, Binary) and e.op not in DISCONTINUOUS:
            return Binary(e.op, self.wide(e.a), self.wide(e.b), WIDE)
        if isinstance(e, (Unary, Binary)):  # on the rounded operands, exactly in f32
            return _rebuild(e, lambda x: Cast("fpext", self.narrow(x), WIDE), WIDE)
        return Cast("fpext", self.narrow(e), WIDE)  # a load, a conversion: already rounded


def _arithmetic(e: Expr) -> bool:
    return isinstance(e, (Unary, Binary, Select))


def _rebuild(e: Expr, child, dtype: str | None = None) -> Expr:
    """``e`` with ``child`` applied to each operand (and of ``dtype``, where given)."""
    if isinstance(e, (Unary, Cast)):
        new = {"x": child(e.x)}
    elif isinstance(e, (Binary, Compare)):
        new = {"a": child(e.a), "b": child(e.b)}
    elif isinstance(e, Select):
        new = {"cond": child(e.cond), "a": child(e.a), "b": child(e.b)}
    elif isinstance(e, Gather):
        new = {"index": tuple(child(ix) for ix in e.index)}
    else:
        return e
    return dataclasses.replace(e, **new, **({} if dtype is None else {"dtype": dtype}))
