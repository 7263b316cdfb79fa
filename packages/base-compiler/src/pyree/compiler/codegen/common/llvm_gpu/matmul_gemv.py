"""Matrix-vector products (at most ``ROWS`` rows of m): a block of columns, its K split over the
threads.

A matrix-vector product is a stream of Y with a few multiply-adds per element, so what counts is
that the whole GPU reads Y coalesced, many loads in flight. The tiled templates give it a 32-row
tile of which one row is real and walk K one staged step at a time, several times slower than
PyTorch's gemv (BENCHMARKS.md).

Here the 256 threads of a block are ``columns x slices``: thread (c, s) accumulates column c of
the block for every row, over k = s, s + slices, ... With Y contiguous along n the lanes of a warp
are 32 neighbouring columns (8 slices of k); with Y contiguous along k (a linear layer's
``[N, K]`` weight) they are 32 neighbouring k of one column (8 columns per block). The slices'
sums meet in shared memory and the block's first threads add them up and store through the
matmul epilogue (init, fused epilogue). X and Y are any expressions, evaluated per element, as in
the SIMT template. Split-K (flow/split_reduction.py) gives a long K to several blocks.
"""

from __future__ import annotations

import numpy as np
from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.addressing import ceil_div, linearize
from pyree.compiler.codegen.common.contraction import Contraction, contraction_of
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.llvm_gpu import addressing as A
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function, Module, const, llvm_type
from pyree.compiler.codegen.common.llvm_gpu.matmul import (
    epilogue_lowering,
    fmuladd,
    store_element,
)

ROWS = 4          # the most rows of m a thread keeps accumulators for
THREADS = 256
LANES = 32
UNROLL = 4        # k steps whose loads are in flight together


def fits(kernel: K.Kernel) -> bool:
    return kernel.parallel_ranges[-2] <= ROWS


def _k_contiguous(kernel: K.Kernel, y: K.Expr) -> bool:
    """Y's loads step by one element along k (and not along n): lanes then walk k."""
    n_loops = len(kernel.loop_ranges)
    n, k = kernel.num_parallel - 1, kernel.num_parallel
    for e in K.walk(y):
        if isinstance(e, K.Load):
            lin = linearize(kernel.bindings[e.binding], e.index, n_loops)
            if lin.coeffs[k] == 1 and lin.coeffs[n] != 1:
                return True
    return False


def plan(kernel: K.Kernel, target) -> Contraction | None:
    c = contraction_of(kernel)
    return c if c is not None and fits(kernel) else None


def emit(module: Module, kernel: K.Kernel, name: str, c: Contraction) -> Launch:
    par = kernel.parallel_ranges
    batch = par[:-2]
    M, N, KD = par[-2], par[-1], kernel.reduction_ranges[0]
    nb = int(np.prod(batch, dtype=np.int64))
    k_lanes = _k_contiguous(kernel, c.y)
    slices = LANES if k_lanes else THREADS // LANES
    columns = THREADS // slices
    ty_ = llvm_type(c.dtype)
    zero = const(0.0, c.dtype)
    fn = Function(module)
    lowering = epilogue_lowering(fn, kernel)

    tid = fn.op(f"zext i32 {fn.special('tid.x')} to i64")
    lane, warp = fn.op(f"urem i64 {tid}, {LANES}"), fn.op(f"udiv i64 {tid}, {LANES}")
    col, s = (warp, lane) if k_lanes else (lane, warp)
    bx = fn.op(f"zext i32 {fn.special('ctaid.x')} to i64")
    n0 = fn.op(f"mul i64 {bx}, {columns}")
    bidx = A.decompose(fn, fn.op(f"zext i32 {fn.special('ctaid.z')} to i64"), batch) if batch else []
    gn = fn.op(f"add i64 {n0}, {col}")
    n_at = fn.call("i64", "llvm.umin.i64", [("i64", gn), ("i64", str(N - 1))])

    accs = []
    for _ in range(M):
        slot = fn.alloca(ty_)
        fn.raw(f"store {ty_} {zero}, ptr {slot}")
        accs.append(slot)

    def step(i):
        k = fn.op(f"add i64 {s}, {fn.op(f'mul i64 {i}, {slices}')}")
        inside = fn.op(f"icmp ult i64 {k}, {KD}")
        k_at = fn.call("i64", "llvm.umin.i64", [("i64", k), ("i64", str(KD - 1))])
        yv = lowering(bidx + [0, n_at, k_at])(c.y)
        yv = fn.op(f"select i1 {inside}, {ty_} {yv}, {ty_} {zero}")
        for m, slot in enumerate(accs):
            xv = lowering(bidx + [str(m), 0, k_at])(c.x)
            fn.raw(f"store {ty_} {fmuladd(fn, ty_, xv, yv, fn.op(f'load {ty_}, ptr {slot}'))}, "
                   f"ptr {slot}")

    fn.loop("0", str(ceil_div(KD, slices)), "1", step, unroll=UNROLL)

    # Slice sums through shared memory: [slice][row][column], then one thread per (row, column).
    red = module.shared_array(f"{name}_sums", ty_, slices * M * columns)
    for m, slot in enumerate(accs):
        row = fn.op(f"add i64 {fn.op(f'mul i64 {s}, {M}')}, {m}")
        at = fn.op(f"add i64 {fn.op(f'mul i64 {row}, {columns}')}, {col}")
        p = fn.op(f"getelementptr {ty_}, ptr addrspace(3) {red}, i64 {at}")
        fn.raw(f"store {ty_} {fn.op(f'load {ty_}, ptr {slot}')}, ptr addrspace(3) {p}")
    fn.barrier()

    def total():
        row, column = fn.op(f"udiv i64 {tid}, {columns}"), fn.op(f"urem i64 {tid}, {columns}")
        value = zero
        for j in range(slices):
            at = fn.op(f"add i64 {tid}, {j * M * columns}")
            p = fn.op(f"getelementptr {ty_}, ptr addrspace(3) {red}, i64 {at}")
            value = fn.op(f"fadd {ty_} {value}, {fn.op(f'load {ty_}, ptr addrspace(3) {p}')}")
        store_element(fn, kernel, c, bidx, row, fn.op(f"add i64 {n0}, {column}"), value, lowering)

    fn.if_then(fn.op(f"icmp ult i64 {tid}, {M * columns}"), total)
    module.add_kernel(name, A.kernel_params(kernel), fn, THREADS)
    return Launch((ceil_div(N, columns), 1, nb), (THREADS, 1, 1))
