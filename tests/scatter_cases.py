"""Scatter kernels (``kernel.Scatter``) built by hand, which the backends' scatter templates
are tested on (tests/codegen/cuda/test_cuda_scatter.py, tests/codegen/llvm_cpu/
test_llvm_cpu_scatter.py): out[idx[u], d] combined with update[u, d] for every combine and dtype
the templates treat differently (atomicrmw, compare-exchange loops, bf16 and i1 storage)."""

from __future__ import annotations

import numpy as np
from pyree.compiler.kernel import (
    DTYPES,
    Acc,
    AffineExpr,
    Binary,
    Binding,
    Cast,
    Const,
    Kernel,
    Load,
    LoopIndex,
    Result,
    Scatter,
)

N, D, U = 11, 5, 29  # rows of the target, columns, updates


def scatter_kernel(dtype: str, op: str | None, first: bool = False, updates: int = U,
                   columns: int = D, disjoint: bool = True) -> Kernel:
    """out[idx[u], d] = op(update[u, d], out[...]) (``first``: the update is the op's second
    operand); ``op`` None: a plain set. ``disjoint``: the column's place is its loop itself
    (``Scatter.disjoint`` finds it); else ``d + 0``, which no template proves disjoint."""
    ud = AffineExpr.identity(2)
    update = Load(0, ud, dtype)
    value = update if op is None else (Binary(op, Acc(0, dtype), update, dtype) if first
                                       else Binary(op, update, Acc(0, dtype), dtype))
    row = Cast("extsi", Load(1, (ud[0], AffineExpr((0, 0), 0)), "i32"), "index")
    column = LoopIndex(1) if disjoint else Binary("add", LoopIndex(1), Const(0, "index"), "index")
    return Kernel(f"scatter_{dtype}_{op}", (updates, columns), 2,
                  (Binding(dtype, (updates, columns), "read"), Binding("i32", (updates, 1), "read"),
                   Binding(dtype, (N, columns), "read"), Binding(dtype, (N, columns), "read_write")),
                  (Result(3, (), value, scatter=Scatter((row, column), 2)),))


def values(dtype: str, shape, rng) -> np.ndarray:
    if dtype == "i1":
        return rng.random(shape) < 0.5
    if dtype in ("f32", "f16", "bf16", "f64"):
        x = rng.standard_normal(shape) * 2
        return x.astype(DTYPES[dtype])
    info = np.iinfo(DTYPES[dtype])
    return rng.integers(max(info.min, -50), min(info.max, 50), size=shape).astype(DTYPES[dtype])


CASES = [("f32", "add"), ("f64", "add"), ("f16", "add"), ("bf16", "add"), ("f32", "mul"),
         ("f32", "max"), ("f16", "min"), ("i32", "add"), ("i64", "mul"), ("i32", "max"),
         ("ui8", "min"), ("i8", "add"), ("i16", "xor"), ("i32", "and"), ("i64", "or"),
         ("i1", "or"), ("i1", "and"), ("bf16", "max")]
