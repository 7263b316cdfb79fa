"""reduce and reduce_window -> one reduction Generic with a result per operand.

The body region becomes each result's per-step value with ``Acc(k)`` for its accumulator
arguments, so multi-operand reductions (JAX's argmax: value and index) are one kernel whose
results read each other's accumulators. A window's padding reads the init value, as the spec
pads with it.

A window as long as its dim, padded by all but one element on one side (JAX's ``cumsum``,
``cumprod``, ``cummax``, ``cummin`` and ``cumlogsumexp``, forward or reversed), is a scan
(``sort_scan.emit_scan``: walked on the CPU, in blocks elsewhere where the body is a
monoid) when the init folded with itself is itself, so that the padding's inits count
once: a prefix folds the init, then the elements in order; a suffix scans the reversed line
folding each element with the fold of those after it, then the init (both are schedules the
spec allows). Counting the window element by element was O(n^2) per line (a cumsum of 512 x
2000 along either axis: 28-33 ms, JAX's CPU 5-11 ms) and unrolled short windows (a
cumlogsumexp down 5 rows compiled in 11 s).
"""

from __future__ import annotations

import itertools
import math

from pyree.compiler.input.function import FunctionLowering, fold
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.sort_scan import associative_fold, emit_scan
from pyree.compiler.input.stablehlo.common import affine_expr, all_of, in_range, ints
from pyree.compiler.input.stablehlo.elementwise import lower_region
from pyree.compiler.input.stablehlo.shape_ops import emit_padded
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import (
    Acc,
    AffineExpr,
    Const,
    Expr,
    Result,
    Select,
    fold_identity,
    is_float,
)
from pyree.compiler.sizes import static_shape
from pyree.compiler.tensor_program import Generic, Value
from xdsl.ir import Operation


def _emit_reduction(fn: FunctionLowering, op: Operation, inputs: Inputs, elements: list[Expr],
                    inits: list[Expr], ranges: tuple[int, ...], num_parallel: int) -> None:
    where = location_of(op)
    n = len(ranges)
    index = tuple(AffineExpr.loop(n, d) for d in range(num_parallel))
    results = [fn.bind_value(r, tensor_type_of(r.type, where, dynamic=True)[0], ranges[:num_parallel])
               if None in tensor_type_of(r.type, where, dynamic=True)[1]  # the kept loops' sizes
               else fn.result_value(r, where) for r in op.results]
    reduces = num_parallel < n
    accs = [Acc(k, r.dtype) for k, r in enumerate(results)] if reduces else inits
    values = lower_region(fn, op.regions[0].block, [*accs, *elements], inputs, where)
    outputs = tuple(Result(k, index, v, inits[k] if reduces else None)
                    for k, v in enumerate(values))
    fn.emit(Generic(inputs.values, results, outputs, ranges, num_parallel, where, op.name))


def lower_reduce(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    half = len(op.operands) // 2
    xs = [fn.tensor(v, where) for v in op.operands[:half]]
    reduced = ints(op, "dimensions")
    shape = xs[0].shape
    kept = [d for d in range(len(shape)) if d not in reduced]
    order = kept + sorted(reduced)
    n = len(order)
    index = tuple(AffineExpr.loop(n, order.index(d)) for d in range(len(shape)))
    inputs = Inputs()
    elements = [inputs.load(x, index) for x in xs]
    inits = [fn.scalar(v, inputs, where) for v in op.operands[half:]]
    _emit_reduction(fn, op, inputs, elements, inits, tuple(shape[d] for d in order), len(kept))


def lower_reduce_window(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    half = len(op.operands) // 2
    xs = [fn.tensor(v, where) for v in op.operands[:half]]
    shape = xs[0].shape
    rank = len(shape)
    window = ints(op, "window_dimensions")
    strides = ints(op, "window_strides", [1] * rank)
    dilations = ints(op, "window_dilations", [1] * rank)
    padding = ints(op, "padding", [0] * 2 * rank)
    base = ints(op, "base_dilations", [1] * rank)
    if half == 1 and _prefix_scan(fn, op, xs[0], window, padding, strides + dilations + base, where):
        return
    if any(b != 1 for b in base):  # the spec's padded, dilated operand, made explicit
        xs = [emit_padded(fn, x, padding[::2], padding[1::2], [b - 1 for b in base], init,
                          where, op.name) for x, init in zip(xs, op.operands[half:])]
        shape, padding = xs[0].shape, [0] * 2 * rank
    out_shape = op.results[0].type.get_shape()
    n = 2 * rank  # output loops, then window loops
    index = []
    conds: list[Expr] = []
    for d in range(rank):
        coeffs = [0] * n
        coeffs[d], coeffs[rank + d] = strides[d], dilations[d]
        ix = AffineExpr(tuple(coeffs), -padding[2 * d])
        index.append(ix)
        if padding[2 * d] or padding[2 * d + 1]:
            conds += in_range(affine_expr(ix), 0, shape[d])
    inputs = Inputs()
    inits = [fn.scalar(v, inputs, where) for v in op.operands[half:]]
    elements = [inputs.load(x, tuple(index)) for x in xs]
    if conds:
        inside = all_of(conds)
        elements = [Select(inside, e, init, e.dtype) for e, init in zip(elements, inits)]
    _emit_reduction(fn, op, inputs, elements, inits, tuple(out_shape) + tuple(window), rank)


_SAME_ELEMENT = ("stablehlo.broadcast_in_dim", "stablehlo.reshape")


def _prefix_scan(fn: FunctionLowering, op: Operation, x: Value, window: list[int],
                 padding: list[int], unit: list[int], where: str) -> bool:
    """Emits the window reduction as a scan where it is one (see above); whether it did."""
    shape, rank = x.shape, len(x.shape)
    long = [d for d in range(rank) if window[d] != 1]
    if len(long) != 1 or any(u != 1 for u in unit) or not static_shape(shape):
        return False
    d, n = long[0], shape[long[0]]
    sides = (padding[2 * d], padding[2 * d + 1])
    if window[d] != n or n < 2 or sides not in ((n - 1, 0), (0, n - 1)) \
            or any(padding[2 * k] or padding[2 * k + 1] for k in range(rank) if k != d):
        return False
    init = op.operands[1]
    while isinstance(init.owner, Operation) and init.owner.name in _SAME_ELEMENT:  # JAX's init
        init = init.owner.operands[0]
    init = fn.scalar(init, Inputs(), where)
    block = op.regions[0].block

    def combine(previous: Expr, element: Expr, inputs: Inputs, loops: int) -> Expr:
        return lower_region(fn, block, [previous, element], inputs, where)[0]
    if not isinstance(init, Const):
        return False
    inputs = Inputs()
    twice = combine(init, init, inputs, 0)
    if inputs.values or fold(twice) != init:  # the padding's inits count once only if so
        return False
    associative = associative_fold(combine, x.dtype)
    seed = None if associative and init == Const(fold_identity(associative, x.dtype), x.dtype) \
        else init  # JAX's cumsum starts from +0.0, where the sum's identity is -0.0
    monoid = bool(associative) or _monoid_on_samples(combine, x.dtype)
    if sides == (0, n - 1) and not monoid:
        return False  # a suffix scan folds in another order: only a monoid's result keeps
    out = fn.result_value(op.results[0], where)
    if sides == (n - 1, 0):  # (in blocks for a monoid only: other bodies keep XLA's order)
        emit_scan(fn, x, d, combine, None, out, op.name, where, seed, monoid)
        return True
    flipped = tuple(AffineExpr.loop(rank, k, -1, n - 1) if k == d else AffineExpr.loop(rank, k)
                    for k in range(rank))

    def flip(source: Value, target: Value) -> None:
        inputs = Inputs()
        fn.emit(Generic(inputs.values, [target], (Result(0, AffineExpr.identity(rank),
                                                         inputs.load(source, flipped)),),
                        shape, rank, where, op.name))
    reversed_x, scanned = fn.new_value(x.dtype, shape, "reversed"), fn.new_value(x.dtype, shape, "scanned")
    flip(x, reversed_x)  # a suffix scan: the prefix scan of the reversed line, reversed, each
    # step the element's fold with the rest's (one op commutes: as it stands)
    step = combine if associative else lambda p, e, inputs, loops: combine(e, p, inputs, loops)
    emit_scan(fn, reversed_x, d, step, None, scanned, op.name, where, seed, monoid)
    flip(scanned, out)
    return True


def _monoid_on_samples(combine, dtype: str) -> bool:
    """Whether a body that is not one op (JAX's logaddexp) commutes and associates on sample
    values, special ones included (floats associate to rounding): the spec's monoid, whose
    windows may be folded in any schedule. A mean or a moving sum does not."""
    samples = [-2.5, -0.0, 1.0, 3.0, math.inf, -math.inf, math.nan] if is_float(dtype) \
        else [-3, 0, 1, 7]

    def f(a, b):
        return fold(combine(Const(a, dtype), Const(b, dtype), Inputs(), 0)).value
    pairs = {(a, b): f(a, b) for a in samples for b in samples}
    if any(pairs[a, b] != pairs[b, a] and pairs[a, b] == pairs[a, b] for a, b in pairs):
        return False  # (NaN != NaN: a NaN either way is the same answer)
    finite = [v for v in samples if math.isfinite(v)]
    for a, b, c in itertools.product(finite, repeat=3):
        left, right = f(pairs[a, b], c), f(a, pairs[b, c])
        if left != right and not (is_float(dtype) and math.isclose(left, right, rel_tol=1e-5,
                                                                   abs_tol=1e-6)):
            return False
    return True
