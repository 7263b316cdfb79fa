"""The kernel IR's reference semantics in numpy, one scalar at a time: slow and exact, what tests
check every backend against."""

from __future__ import annotations

import math

import numpy as np
from pyree.compiler.kernel.analysis import (
    bind_sizes,
    gather_offset,
    has_run_time_sizes,
    phases,
)
from pyree.compiler.kernel.ir import (
    DTYPES,
    INT_CASTS,
    Acc,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Final,
    Gather,
    Kernel,
    Load,
    LoopIndex,
    Select,
    Unary,
    cast_int,
    is_float,
    operands,
    wrap,
)


def evaluate(kernel: Kernel, buffers: list[np.ndarray], params: dict[str, int] | None = None) -> None:
    """Reference semantics in numpy, one scalar at a time: slow, exact, for tests of backends.
    ``params`` gives a kernel with run-time sizes the value of each symbol (``{"p0": 7}``)."""
    import itertools

    if params is not None:
        kernel = bind_sizes(kernel, params)
    assert not has_run_time_sizes(kernel), f"kernel '{kernel.name}': its sizes need params"

    par = kernel.parallel_ranges
    red = kernel.reduction_ranges

    def ev(e: Expr, loop, accs):
        if isinstance(e, Load):
            return buffers[e.binding][tuple(ix(loop) for ix in e.index)]
        if isinstance(e, Gather):
            data = buffers[e.binding]
            return data.reshape(-1)[int(ev(gather_offset(e.index, data.shape), loop, accs))]
        if isinstance(e, Const):
            return DTYPES[e.dtype].type(e.value)
        if isinstance(e, LoopIndex):
            return np.int64(loop[e.dim])
        if isinstance(e, Acc):
            return accs[e.result]
        if isinstance(e, Final):
            return finals[e.result]
        if isinstance(e, Select):  # only the chosen side: the other may load out of range
            return ev(e.a if ev(e.cond, loop, accs) else e.b, loop, accs)
        return _apply(e, [ev(c, loop, accs) for c in operands(e)])

    if kernel.attention is not None:
        _attention(kernel, buffers, ev)
        return
    results = kernel.results
    if results and results[0].scatter is not None:
        _scatter(kernel, buffers, ev)
        return
    finals: dict[int, object] = {}
    for p in itertools.product(*[range(n) for n in par]):
        zeros = (0,) * len(red)
        if not red:
            for r in results:
                buffers[r.binding][tuple(ix(p) for ix in r.index)] = ev(r.value, p, None)
            continue
        for phase in phases(results):
            accs = {k: ev(results[k].init, p + zeros, None) for k in phase}
            for rr in itertools.product(*[range(n) for n in red]):
                accs = {k: ev(results[k].value, p + rr, accs) for k in phase}
            for k in phase:
                r = results[k]
                finals[k] = ev(r.epilogue, p + zeros, accs) if r.epilogue is not None else accs[k]
                buffers[r.binding][tuple(ix(p + zeros) for ix in r.index)] = finals[k]
        for rr in itertools.product(*[range(n) for n in red]):
            for r in kernel.row_results:
                buffers[r.binding][tuple(ix(p + rr) for ix in r.index)] = ev(r.value, p + rr, None)


def _scatter(kernel: Kernel, buffers: list[np.ndarray], ev) -> None:
    """``kernel.Scatter``'s loop: every point in order, its place skipped where outside. The
    result binding holds the starting contents already (the host copies them)."""
    import itertools

    r = kernel.results[0]
    out = buffers[r.binding]
    for p in itertools.product(*[range(n) for n in kernel.loop_ranges]):
        place = tuple(int(ev(ix, p, None)) for ix in r.scatter.place)
        if all(0 <= i < n for i, n in zip(place, out.shape)):
            out[place] = ev(r.value, p, {0: out[place]})


def _attention(kernel: Kernel, buffers: list[np.ndarray], ev) -> None:
    """``kernel.Attention``'s loop nest as written there, the probabilities of a row computed
    once (nothing of them depends on the column ``e``)."""
    import itertools

    att, out = kernel.attention, kernel.results[0]
    keys, depth = kernel.reduction_ranges
    f32 = np.float32
    rows: dict[tuple, list] = {}
    for p in itertools.product(*[range(n) for n in kernel.parallel_ranges]):
        row = p[:att.e] + (0,) + p[att.e + 1:]
        if row not in rows:
            s = []
            for j in range(keys):
                acc = ev(att.score_init, row + (j, 0), None)
                for c in range(depth):
                    acc = ev(att.score_step, row + (j, c), {0: acc})
                s.append(f32(ev(att.score, row + (j, 0), {0: acc})))
            with np.errstate(all="ignore"):
                m = f32(-np.inf)
                for x in s:
                    m = np.maximum(x, m)
                total = f32(0)
                for x in s:
                    total = f32(np.exp(x - m) + total)
                masked = att.masked_zero and all(x == -np.inf for x in s)
                if att.partial:  # unnormalized weights, and the state a combine needs
                    dead = m == -np.inf
                    weights = [f32(0) if dead else f32(DTYPES[att.p_dtype].type(np.exp(x - m)))
                               for x in s]
                    total = f32(0) if dead else total
                    rows[row] = weights, m, total
                else:
                    rows[row] = [f32(0) if masked else f32(DTYPES[att.p_dtype].type(
                        f32(np.exp(x - m)) / total)) for x in s], None, None
        weights, m, total = rows[row]
        acc = ev(out.init, p + (0, 0), None)
        with np.errstate(all="ignore"):
            for j, pj in enumerate(weights):
                acc = DTYPES[out.value.dtype].type(acc + pj * ev(out.value, p + (j, 0), None))
        value = ev(out.epilogue, p + (0, 0), {0: acc}) if out.epilogue is not None else acc
        buffers[out.binding][tuple(ix(p + (0, 0)) for ix in out.index)] = value
        for r, state in zip(kernel.results[1:], (m, total)):
            buffers[r.binding][tuple(ix(p + (0, 0)) for ix in r.index)] = state


_FLOAT64_UNARY = {
    "asin": np.arcsin, "acos": np.arccos, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
    "acosh": np.arccosh, "atanh": np.arctanh, "cbrt": np.cbrt, "erf": math.erf, "erfc": math.erfc,
}


def _round_half_away(v):
    """Half away from zero (v - trunc(v) is exact, where |v| + 0.5 may round up)."""
    t = np.trunc(v)
    return np.copysign(np.abs(t) + (np.abs(v - t) >= 0.5), v)


def _apply(e: Expr, args: list):
    dt = DTYPES[e.dtype].type
    with np.errstate(all="ignore"):
        if isinstance(e, Unary):
            x = args[0]
            fn = {
                "neg": np.negative, "abs": np.abs, "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1,
                "log": np.log, "log2": np.log2, "log1p": np.log1p, "sqrt": np.sqrt,
                "rsqrt": lambda v: 1 / np.sqrt(v), "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
                "tan": np.tan, "atan": np.arctan, "floor": np.floor, "ceil": np.ceil,
                "round": _round_half_away, "roundeven": np.rint, "trunc": np.trunc,
                "sign": lambda v: np.copysign(np.sign(v), v),  # keeps -0.0
                "not": np.logical_not if e.dtype == "i1" else np.invert,
            }.get(e.op)
            if e.op in _FLOAT64_UNARY:  # computed in float64, then rounded once
                return dt(_FLOAT64_UNARY[e.op](float(x)))
            return dt(fn(x))
        if isinstance(e, Binary):
            a, b = args
            if e.op in ("div", "rem") and not is_float(e.dtype):  # rounded toward zero, exactly
                q = abs(int(a)) // abs(int(b)) * (-1 if (int(a) < 0) != (int(b) < 0) else 1)
                return dt(wrap(q if e.op == "div" else int(a) - q * int(b), e.dtype))
            fn = {
                "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
                "rem": np.fmod, "pow": np.power, "max": np.maximum, "min": np.minimum,
                "atan2": np.arctan2, "copysign": np.copysign, "and": np.bitwise_and,
                "or": np.bitwise_or, "xor": np.bitwise_xor, "shl": np.left_shift,
                "shr": np.right_shift,
            }[e.op]
            return dt(fn(a, b))
        if isinstance(e, Compare):
            a, b = args
            p = e.predicate
            if p == "ord":
                return np.bool_(not (np.isnan(a) or np.isnan(b)))
            if p == "uno":
                return np.bool_(bool(np.isnan(a) or np.isnan(b)))
            unordered = p.startswith("u") and p not in ("uno",)
            base = p[1:] if unordered and p[1:] in ("eq", "ne", "lt", "le", "gt", "ge") else p
            r = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[base]
            if unordered and isinstance(a, np.floating):
                r = r or np.isnan(a) or np.isnan(b)
            return np.bool_(r)
        if isinstance(e, Select):
            c, a, b = args
            return a if c else b
        if isinstance(e, Cast):
            x = args[0]
            if e.op == "bitcast":
                return np.array([x]).view(DTYPES[e.dtype])[0]
            if e.op in INT_CASTS:
                return dt(cast_int(e.op, x, e.x.dtype, e.dtype))
            if e.op == "sitofp" and e.x.dtype == "i1":  # a signed i1's true is -1
                return dt(-int(x))
            return dt(x)
    raise TypeError(f"not an expression: {e!r}")
