"""Elementwise Generics whose inputs are all constants are computed at compile time.

Exported models carry work on weights that is the same on every call: batchnorm's
``1 / sqrt(var + eps)`` per channel, the transposed classifier weight. Each was a dispatch per
call, and a CPU dispatch costs tens of microseconds on local-task whatever its size (MobileNet v2
had 52 such kernels among 125). Folding them leaves constants that the epilogues read directly.

Evaluation is numpy over the whole loop box at once, for the ops whose numpy result is the
kernel IR's exactly (IEEE arithmetic, comparisons, selects, exact casts); a Generic using
anything else is left to run on the device. Both arms of a Select are evaluated here, at clamped
indices, and the chosen one kept. A result much larger than its inputs (a widened weight) is not
folded (``_widens``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from pyree.compiler import sizes
from pyree.compiler.kernel import (
    DTYPES,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Load,
    LoopIndex,
    Select,
    Unary,
    is_float,
    walk,
)
from pyree.compiler.tensor_program import (
    Constant,
    Function,
    Generic,
    Value,
    View,
    has_run_time_sizes,
    is_line_walk,
    is_scatter,
)

MAX_ELEMENTS = 1 << 22
MAX_WIDENED_BYTES = 1 << 16

_UNARY = {"neg": np.negative, "abs": np.abs, "sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil,
          "trunc": np.trunc}
_FLOAT_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
                 "max": np.maximum, "min": np.minimum}
_INT_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "and": np.bitwise_and,
               "or": np.bitwise_or, "xor": np.bitwise_xor}
_EXACT_CASTS = {"fpext", "fptrunc", "sitofp"}
_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}


class _Unsupported(Exception):
    pass


def fold_constants(function: Function) -> Function:
    known: dict[Value, np.ndarray] = {}
    ops = []
    for op in function.ops:
        if has_run_time_sizes(op):  # never all-constant: constants have static shapes
            pass
        elif record_constant(op, known):
            pass
        elif (isinstance(op, Generic) and not is_scatter(op) and not is_line_walk(op)
              and all(v in known for v in op.inputs)
              and not _widens(op, [known[v] for v in op.inputs])):
            data = evaluate_elementwise(op, [known[v] for v in op.inputs])
            if data is not None:
                known[op.results[0]] = data
                op = Constant(op.results[0], data=data, location=op.location)
        ops.append(op)
    return dataclasses.replace(function, ops=ops)


def _widens(op: Generic, inputs: list[np.ndarray]) -> bool:
    """A result of more than ``MAX_WIDENED_BYTES`` that is larger than its largest input: an f16
    weight extended to f32 (and transposed) for a product. Left to run, the cast fuses into the
    product's loads: the module and every read keep the narrow weight, and an f16 x f16 product
    stays one the tensor cores take (folded, GPT-2's f16 linears ran as f16 x f32 on the SIMT
    template)."""
    nbytes = sum(int(np.prod(v.shape, dtype=np.int64)) * np.dtype(DTYPES[v.dtype]).itemsize
                 for v in op.results if v.dtype in DTYPES)
    return nbytes > MAX_WIDENED_BYTES and nbytes > max((a.nbytes for a in inputs), default=0)


def record_constant(op, known: dict[Value, np.ndarray]) -> bool:
    """Adds the value of a Constant, or of a whole same-dtype View of a known value, to ``known``;
    False for any other op. A parameter's value is known only at run time, a mutable global's
    changes from call to call: never recorded."""
    if isinstance(op, Constant):
        if (op.parameter is None and not op.mutable  # (a splat may have run-time dims)
                and all(sizes.is_static(d) for d in op.result.shape)):
            known[op.result] = (op.data if op.data is not None else
                                _splat(op.splat, op.result.dtype, op.result.shape))
        return True
    if (isinstance(op, View) and op.source in known and op.byte_offset == 0
            and op.result.dtype == op.source.dtype
            and all(sizes.is_static(d) for d in op.result.shape)  # (a hidden size: a ? view)
            and known[op.source].size == int(np.prod(op.result.shape, dtype=np.int64))):
        source = known[op.source]
        known[op.result] = (_splat(source.flat[0], op.result.dtype, op.result.shape)
                            if source.size and not any(source.strides) else
                            source.reshape(op.result.shape))
        return True
    return False


def _splat(value, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """A read-only array of ``shape`` holding ``value`` everywhere, in one element's memory: a
    splat may be far larger than any array folding computes (10^9 elements are 4 GB)."""
    return np.broadcast_to(np.array(value, DTYPES[dtype]), shape)


def evaluate_elementwise(op: Generic, inputs: list[np.ndarray]) -> np.ndarray | None:
    """The result of a one-result elementwise Generic, or None where folding does not apply."""
    result = op.results[0]
    if (len(op.outputs) != 1 or result.dtype not in DTYPES or op.num_parallel != len(op.loop_ranges)
            or not 0 < int(np.prod(op.loop_ranges)) <= MAX_ELEMENTS):
        return None
    grid = np.indices(op.loop_ranges).reshape(len(op.loop_ranges), int(np.prod(op.loop_ranges)))

    def index(ix, shape=None):
        flat = ix.const + sum(c * grid[d] for d, c in enumerate(ix.coeffs) if c)
        flat = np.broadcast_to(np.asarray(flat, np.int64), grid.shape[1:])
        return flat if shape is None else np.clip(flat, 0, shape - 1)

    def ev(e: Expr, memo: dict) -> np.ndarray:
        if e in memo:
            return memo[e]
        if e.dtype not in DTYPES:
            raise _Unsupported(e)
        dtype = DTYPES[e.dtype]
        if isinstance(e, Load):
            array = inputs[e.binding]
            v = array[tuple(index(ix, n) for ix, n in zip(e.index, array.shape))]
        elif isinstance(e, Const):
            v = np.full(grid.shape[1:], e.value, dtype)
        elif isinstance(e, LoopIndex):
            v = grid[e.dim].astype(dtype)
        elif isinstance(e, Cast) and e.op in _EXACT_CASTS:
            x = ev(e.x, memo)
            if e.op == "sitofp" and e.x.dtype == "i1":  # a signed i1's true is -1
                x = -x.astype(np.int8)
            if e.op == "fptrunc" and e.dtype == "bf16":  # through f32, as the kernels round
                x = x.astype(np.float32)
            v = x.astype(dtype)
        elif isinstance(e, Unary) and is_float(e.dtype) and e.op in _UNARY:
            v = _UNARY[e.op](ev(e.x, memo))
        elif (isinstance(e, Binary) and e.op in (_FLOAT_BINARY if is_float(e.dtype) else _INT_BINARY)
              and (e.dtype != "i1" or e.op in ("and", "or", "xor"))):
            table = _FLOAT_BINARY if is_float(e.dtype) else _INT_BINARY
            v = table[e.op](ev(e.a, memo), ev(e.b, memo))
        elif isinstance(e, Compare) and e.predicate.lstrip("u") in _COMPARE:
            a, b = ev(e.a, memo), ev(e.b, memo)
            v = _COMPARE[e.predicate.lstrip("u")](a, b)
            if a.dtype.kind == "f":
                nan = np.isnan(a) | np.isnan(b)
                v = v | nan if e.predicate.startswith("u") else v & ~nan
        elif isinstance(e, Select):
            v = np.where(ev(e.cond, memo), ev(e.a, memo), ev(e.b, memo))
        else:
            raise _Unsupported(e)
        if v.dtype != dtype:
            raise _Unsupported(e)
        memo[e] = v
        return v

    with np.errstate(all="ignore"):
        try:
            memo: dict = {}
            for e in walk(op.outputs[0].value):  # operands first: ev recurses one level
                values = ev(e, memo)
        except _Unsupported:
            return None
    out = np.zeros(result.shape, DTYPES[result.dtype])
    values = np.broadcast_to(values, grid.shape[1:])
    out[tuple(index(ix) for ix in op.outputs[0].index)] = values if out.ndim else values[0]
    return out
