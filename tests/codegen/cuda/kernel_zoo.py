"""Hand-built kernel-IR kernels covering every cuda template, at odd shapes (PTX-level tests)."""

from __future__ import annotations

import numpy as np
from pyree.compiler import kernel as K
from pyree.compiler.sizes import is_static


def _ident(rank: int, loops: int, dims=None) -> tuple[K.AffineExpr, ...]:
    dims = list(range(rank)) if dims is None else dims
    return tuple(K.AffineExpr(tuple(int(l == d) for l in range(loops))) for d in dims)


def add(shape=(37, 53), dtype="f32") -> K.Kernel:
    n = len(shape)
    ix = _ident(n, n)
    b = K.Binding(dtype, shape, "read")
    value = K.Binary("add", K.Load(0, ix, dtype), K.Load(1, ix, dtype), dtype)
    return K.Kernel("add", shape, n, (b, b, K.Binding(dtype, shape, "write")),
                    (K.Result(2, ix, value),))


def chain(shape=(37, 64)) -> K.Kernel:
    """tanh(x * 0.5 + bias[col]) then exp, with a broadcast bias and an f16 input cast up."""
    m, n = shape
    ix = _ident(2, 2)
    x = K.Cast("fpext", K.Load(0, ix, "f16"), "f32")
    bias = K.Load(1, (K.AffineExpr((0, 1)),), "f32")
    t = K.Unary("tanh", K.Binary("add", K.Binary("mul", x, K.Const(0.5, "f32"), "f32"), bias, "f32"), "f32")
    value = K.Binary("max", K.Unary("exp", t, "f32"), K.Const(1.1, "f32"), "f32")
    return K.Kernel("chain", shape, 2,
                    (K.Binding("f16", shape, "read"), K.Binding("f32", (n,), "read"),
                     K.Binding("f32", shape, "write")), (K.Result(2, ix, value),))


def row_sum(shape=(37, 1531), op="add") -> K.Kernel:
    m, n = shape
    acc = K.Acc(0, "f32")
    load = K.Load(0, _ident(2, 2), "f32")
    init = K.Const(0.0 if op == "add" else -np.inf, "f32")
    return K.Kernel(f"row_{op}", shape, 1,
                    (K.Binding("f32", shape, "read"), K.Binding("f32", (m,), "write")),
                    (K.Result(1, (K.AffineExpr((1, 0)),), K.Binary(op, acc, load, "f32"), init,
                              K.Unary("sqrt", K.Unary("abs", acc, "f32"), "f32")),))


def col_sum(shape=(53, 37)) -> K.Kernel:
    """Reduces dim 0: loops (n, m) with m the reduction; short, so the serial template."""
    m, n = shape
    acc = K.Acc(0, "f32")
    load = K.Load(0, (K.AffineExpr((0, 1)), K.AffineExpr((1, 0))), "f32")
    return K.Kernel("col_sum", (n, m), 1,
                    (K.Binding("f32", shape, "read"), K.Binding("f32", (n,), "write")),
                    (K.Result(1, (K.AffineExpr((1, 0)),), K.Binary("add", acc, load, "f32"),
                              K.Const(0.0, "f32")),))


def matmul(m=37, n=53, k=61, dtype="f32", acc_dtype="f32", relu_bias=False) -> K.Kernel:
    """C = A @ B (+ bias, relu): loops (m, n, k)."""
    a = K.Load(0, (K.AffineExpr((1, 0, 0)), K.AffineExpr((0, 0, 1))), dtype)
    b = K.Load(1, (K.AffineExpr((0, 0, 1)), K.AffineExpr((0, 1, 0))), dtype)
    if dtype != acc_dtype:
        a, b = K.Cast("fpext", a, acc_dtype), K.Cast("fpext", b, acc_dtype)
    acc = K.Acc(0, acc_dtype)
    bindings = [K.Binding(dtype, (m, k), "read"), K.Binding(dtype, (k, n), "read")]
    epilogue = None
    if relu_bias:
        bias = K.Load(2, (K.AffineExpr((0, 1, 0)),), acc_dtype)
        epilogue = K.Binary("max", K.Binary("add", acc, bias, acc_dtype), K.Const(0.0, acc_dtype), acc_dtype)
        bindings.append(K.Binding(acc_dtype, (n,), "read"))
    bindings.append(K.Binding(acc_dtype, (m, n), "write"))
    out = len(bindings) - 1
    return K.Kernel(f"matmul_{dtype}", (m, n, k), 2, tuple(bindings),
                    (K.Result(out, (K.AffineExpr((1, 0, 0)), K.AffineExpr((0, 1, 0))),
                              K.Binary("add", acc, K.Binary("mul", a, b, acc_dtype), acc_dtype),
                              K.Const(0.0, acc_dtype), epilogue),))


def linear(m: int, n: int, k: int, dtype: str, batch: int = 1, b_nk: bool = True) -> K.Kernel:
    """torch-mlir's f16/bf16 linear layer (bmm with ``batch``): f32 products of extended
    operands, B as ``[n, k]`` (a weight) or ``[k, n]``, + bias[n], truncated to ``dtype``; an
    f32 one reads and writes f32 as it is."""
    lead = (batch,) if not is_static(batch) or batch > 1 else ()  # a run-time batch: a loop
    loops = len(lead) + 3

    def ix(*dims):
        return _ident(len(dims), loops, [len(lead) + d for d in dims])

    def wide(e):
        return e if dtype == "f32" else K.Cast("fpext", e, "f32")
    batch_ix = _ident(1, loops) if lead else ()
    a = wide(K.Load(0, batch_ix + ix(0, 2), dtype))
    b = wide(K.Load(1, batch_ix + (ix(1, 2) if b_nk else ix(2, 1)), dtype))
    bias = wide(K.Load(2, ix(1), dtype))
    acc = K.Acc(0, "f32")
    epilogue = K.Binary("add", acc, bias, "f32")
    if dtype != "f32":
        epilogue = K.Cast("fptrunc", epilogue, dtype)
    bindings = (K.Binding(dtype, lead + (m, k), "read"),
                K.Binding(dtype, lead + ((n, k) if b_nk else (k, n)), "read"),
                K.Binding(dtype, (n,), "read"), K.Binding(dtype, lead + (m, n), "write"))
    return K.Kernel(f"linear_{dtype}", lead + (m, n, k), loops - 1, bindings,
                    (K.Result(3, batch_ix + ix(0, 1),
                              K.Binary("add", acc, K.Binary("mul", a, b, "f32"), "f32"),
                              K.Const(0.0, "f32"), epilogue),))


def gather(kind: str) -> K.Kernel:
    """``table[ids[i], j]`` (computed, clamped index) as an elementwise kernel ("rows"), inside a
    reduction over a bag of ids ("bag"), and as a matmul operand ("matmul")."""
    rows, n, d, k = 50, 37, 29, 23
    if kind == "rows":
        g = K.Gather(1, (K.Load(0, _ident(1, 2), "i64"), K.LoopIndex(1)), "f32")
        return K.Kernel("gather_rows", (n, d), 2,
                        (K.Binding("i64", (n,), "read"), K.Binding("f32", (rows, d), "read"),
                         K.Binding("f32", (n, d), "write")), (K.Result(2, _ident(2, 2), g),))
    ids = K.Load(0, _ident(2, 3, [0, 2]), "i32")
    if kind == "bag":
        g = K.Gather(1, (ids, K.LoopIndex(1)), "f32")
        return K.Kernel("gather_bag", (n, d, k), 2,
                        (K.Binding("i32", (n, k), "read"), K.Binding("f32", (rows, d), "read"),
                         K.Binding("f32", (n, d), "write")),
                        (K.Result(2, _ident(2, 3), K.Binary("add", K.Acc(0, "f32"), g, "f32"),
                                  K.Const(0.0, "f32")),))
    x = K.Gather(1, (K.Load(0, _ident(1, 3), "i32"), K.Load(2, _ident(1, 3, [2]), "i32")), "f32")
    y = K.Load(3, _ident(2, 3, [2, 1]), "f32")
    acc = K.Acc(0, "f32")
    return K.Kernel("gather_matmul", (n, d, k), 2,
                    (K.Binding("i32", (n,), "read"), K.Binding("f32", (rows, k), "read"),
                     K.Binding("i32", (k,), "read"), K.Binding("f32", (k, d), "read"),
                     K.Binding("f32", (n, d), "write")),
                    (K.Result(4, _ident(2, 3), K.Binary("add", acc, K.Binary("mul", x, y, "f32"), "f32"),
                              K.Const(0.0, "f32")),))


ALL = {
    "add_f32": lambda: add(),
    "add_f32_vec": lambda: add((64, 1024)),
    "add_f16": lambda: add((37, 48), "f16"),
    "chain": lambda: chain(),
    "row_sum": lambda: row_sum(),
    "row_max": lambda: row_sum((5, 700), "max"),
    "row_sum_long": lambda: row_sum((3, 70001)),  # 69 points a thread: cascaded sums
    "col_sum": lambda: col_sum(),
    "matmul_f32": lambda: matmul(),
    "matmul_f32_big": lambda: matmul(257, 131, 67, relu_bias=True),
    "matmul_f16": lambda: matmul(37, 53, 61, "f16", "f32"),
    "linear_bf16_odd": lambda: linear(37, 53, 29, "bf16"),
    "linear_f16_batch": lambda: linear(129, 257, 72, "f16", batch=3, b_nk=False),
    "gather_rows": lambda: gather("rows"),
    "gather_bag": lambda: gather("bag"),
    "gather_matmul": lambda: gather("matmul"),
}
