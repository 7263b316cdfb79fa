"""Matrix-vector products (at most ``ROWS`` rows of m): a block of columns, its K split over the
threads, the weights read 16 bytes a load.

A matrix-vector product is a stream of Y with a few multiply-adds per element, so what counts is
that the whole GPU reads Y in wide, coalesced loads, many in flight. The tiled templates give it
a 32-row tile of which one row is real and walk K one staged step at a time, several times slower
than PyTorch's gemv; one element a lane (2 bytes of f16) issues eight times the loads that 16-byte
vectors do, and reached a third of the card's bandwidth (BENCHMARKS.md).

A thread takes ``width`` consecutive elements of Y along the dimension Y is contiguous in, as one
vector load where the binding is 16-byte aligned (checked per dispatch) and the access's other
strides keep every vector aligned (checked here), element by element otherwise:

- Y contiguous along k (a linear layer's ``[N, K]`` weight, a tied LM head): ``slices``
  neighbouring lanes share a column, each taking ``width`` k at a time, ``slices * width`` apart;
  X is read the same way along k.
- Y contiguous along n (``[K, N]``, GPT-2's Conv1D): neighbouring lanes take neighbouring runs of
  ``width`` columns (``groups`` of them, 128 bytes of a row, fewer where the product would
  otherwise leave multiprocessors idle), the block's ``slices`` threads a column each every
  ``slices``-th k; X is one value per k.

The loop over whole steps has no guards, so its loads can be in flight together; a K that the
step does not divide ends with one guarded step, whose out-of-range products are dropped (not
multiplied by zero: an infinite X times a zeroed Y would add a NaN). The slices' sums are added
by shuffles within each warp, then across warps through shared memory in warp order, and go
out through the matmul epilogue (init, fused epilogue). X and Y are any expressions, evaluated
per element, as in the SIMT template. Split-K (flow/split_reduction.py) gives a long K to several
blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.addressing import ceil_div, linearize
from pyree.compiler.codegen.common.contraction import Contraction, contraction_of
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.llvm_gpu import addressing as A
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import (
    Function,
    Module,
    const,
    llvm_type,
    storage_type,
)
from pyree.compiler.codegen.common.llvm_gpu.matmul import epilogue_lowering, fmuladd, store_element
from pyree.compiler.codegen.common.llvm_gpu.reduction import shuffle_xor
from pyree.compiler.codegen.common.llvm_gpu.scalar import ScalarLowering

ROWS = 4             # the most rows of m a thread keeps accumulators for
THREADS = 256
UNROLL = 16          # whole steps whose loads are in flight together (all, if fewer)
VECTOR_BYTES = 16    # the widest global load
ROW_BYTES = 128      # a row's run that the lanes along n read together: one cache line
SHARED_BYTES = 48 * 1024
# Lanes that own columns take fewer columns a block (down to one thread's run) until the
# product makes this many blocks: one per multiprocessor of a Hopper-class GPU. A whole 768-deep
# product of 768 columns then runs on 96 blocks instead of 12 (flow/split_reduction.py's
# GPU_VECTOR_WHOLE_BYTES).
MIN_BLOCKS = 132


def fits(kernel: K.Kernel) -> bool:
    return kernel.parallel_ranges[-2] <= ROWS


@dataclass(frozen=True)
class Plan:
    kernel: K.Kernel  # the kernel, its m and n loops swapped where its vector was the n side
    contraction: Contraction


def plan(kernel: K.Kernel, target) -> Plan | None:
    """A product with at most ``ROWS`` rows; or columns (a batched matrix times a vector,
    ``bij,bj->bi``), as the same product with the m and n loops swapped: the matrix is then
    Y, read along its rows (a tiled template gave it a 32-row tile of one real column, at a
    sixth of the card's bandwidth; BENCHMARKS.md)."""
    if contraction_of(kernel) is None:
        return None
    if not fits(kernel) and kernel.parallel_ranges[-1] <= ROWS:
        m = kernel.num_parallel - 2
        kernel = K.swap_loops(kernel, m, m + 1)
    c = contraction_of(kernel)
    return Plan(kernel, c) if c is not None and fits(kernel) else None


@dataclass(frozen=True)
class Geometry:
    """How the block's threads cover its columns and K."""

    along_k: bool    # a column's lanes walk k (Y contiguous along k), else lanes own columns
    width: int       # consecutive elements of k (along_k) or n a thread takes per step
    slices: int      # threads that share a column (group), each every slices-th step
    groups: int      # column groups of a block (slices * groups == THREADS)

    @property
    def columns(self) -> int:
        return self.groups * (1 if self.along_k else self.width)

    @property
    def k_step(self) -> int:
        return self.slices * (self.width if self.along_k else 1)


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _loops(kernel: K.Kernel) -> range:
    return range(len(kernel.loop_ranges))


def _lin(kernel: K.Kernel, e: K.Load):
    return linearize(kernel.bindings[e.binding], e.index, len(kernel.loop_ranges))


def _vector_loads(kernel: K.Kernel, expr: K.Expr, dim: int, width: int) -> list[K.Load]:
    """The loads of ``expr`` that read ``width`` aligned consecutive elements along loop ``dim``
    wherever the binding's base is aligned."""
    return [e for e in K.walk(expr) if isinstance(e, K.Load) and e.dtype != "i1"
            and _lin(kernel, e).contiguous(dim, width, _loops(kernel))]


def _k_contiguous(kernel: K.Kernel, y: K.Expr) -> bool:
    """Y's loads step by one element along k (and not along n): lanes then walk k."""
    n, k = kernel.num_parallel - 1, kernel.num_parallel
    for e in K.walk(y):
        if isinstance(e, K.Load):
            lin = _lin(kernel, e)
            if lin.coeffs[k] == 1 and lin.coeffs[n] != 1:
                return True
    return False


def geometry(kernel: K.Kernel, c: Contraction) -> Geometry:
    """16 bytes of Y's narrowest contiguous load a thread where Y has one, else one element."""
    n_dim, k_dim = kernel.num_parallel - 1, kernel.num_parallel
    N, KD = kernel.parallel_ranges[-1], kernel.reduction_ranges[0]
    along_k = _k_contiguous(kernel, c.y)
    dim = k_dim if along_k else n_dim
    width = 1
    for e in (e for e in K.walk(c.y) if isinstance(e, K.Load) and e.dtype != "i1"):
        w = max(1, VECTOR_BYTES // K.itemsize(e.dtype))
        if _lin(kernel, e).contiguous(dim, w, _loops(kernel)):
            width = max(width, w)
    if along_k:
        slices = min(32, _pow2_at_least(ceil_div(KD, width)))
        return Geometry(True, width, slices, THREADS // slices)
    y_bytes = min(K.itemsize(e.dtype) for e in K.walk(c.y) if isinstance(e, K.Load)) \
        if any(isinstance(e, K.Load) for e in K.walk(c.y)) else 4
    groups = min(max(1, ROW_BYTES // (width * y_bytes)), _pow2_at_least(ceil_div(N, width)), THREADS)
    batch = int(np.prod(kernel.parallel_ranges[:-2], dtype=np.int64))
    while groups > 1 and ceil_div(N, groups * width) * batch < MIN_BLOCKS:
        groups //= 2
    acc_bytes = K.itemsize(c.dtype)
    while width > 1 and THREADS * ROWS * width * acc_bytes > SHARED_BYTES:
        width //= 2
    return Geometry(False, width, THREADS // groups, groups)


class _Values:
    """Expressions at ``width`` consecutive values of one loop, from one vector load per
    contiguous access (``vector``) or element by element at indices clamped into range."""

    def __init__(self, fn: Function, kernel: K.Kernel, dim: int, width: int, vector: bool):
        self.fn, self.kernel, self.dim, self.width, self.vector = fn, kernel, dim, width, vector
        self.extent = kernel.loop_ranges[dim]

    def __call__(self, expr: K.Expr, loop: list) -> list[str]:
        fn, dim = self.fn, self.dim
        base = loop[dim]
        points = []
        for j in range(self.width):
            at = fn.op(f"add i64 {base}, {j}") if j else base
            if not self.vector:
                at = fn.call("i64", "llvm.umin.i64", [("i64", at), ("i64", str(self.extent - 1))])
            points.append(loop[:dim] + [at] + loop[dim + 1:])
        vectors = {e: self._vector(e, loop) for e in
                   (_vector_loads(self.kernel, expr, dim, self.width) if self.vector else [])}

        def at(j):
            def load(e):
                if e in vectors:
                    return vectors[e][j]
                off = A.offset(fn, _lin(self.kernel, e), points[j])
                return A.load(fn, A.element_ptr(fn, f"%b{e.binding}", e.dtype, off), e.dtype)
            return ScalarLowering(fn, load, lambda d: points[j][d], None, self.kernel.location,
                                  self.kernel)(expr)
        return [at(j) for j in range(self.width)]

    def _vector(self, e: K.Load, loop: list) -> list[str]:
        fn, w = self.fn, self.width
        st = storage_type(e.dtype)
        ptr = A.element_ptr(fn, f"%b{e.binding}", e.dtype, A.offset(fn, _lin(self.kernel, e), loop))
        align = min(VECTOR_BYTES, w * K.itemsize(e.dtype))
        v = fn.op(f"load <{w} x {st}>, ptr addrspace(1) {ptr}, align {align}")
        return [fn.op(f"extractelement <{w} x {st}> {v}, i32 {j}") for j in range(w)]


def emit(module: Module, kernel: K.Kernel, name: str, plan: Plan) -> Launch:
    kernel, c = plan.kernel, plan.contraction
    par = kernel.parallel_ranges
    batch = par[:-2]
    M, N, KD = par[-2], par[-1], kernel.reduction_ranges[0]
    nb = int(np.prod(batch, dtype=np.int64))
    g = geometry(kernel, c)
    n_dim, k_dim = kernel.num_parallel - 1, kernel.num_parallel
    dim = k_dim if g.along_k else n_dim
    ty_ = llvm_type(c.dtype)
    zero = const(0.0, c.dtype)
    fn = Function(module)
    lowering = epilogue_lowering(fn, kernel)

    tid = fn.op(f"zext i32 {fn.special('tid.x')} to i64")
    if g.along_k:
        group, s = fn.op(f"udiv i64 {tid}, {g.slices}"), fn.op(f"urem i64 {tid}, {g.slices}")
    else:
        s, group = fn.op(f"udiv i64 {tid}, {g.groups}"), fn.op(f"urem i64 {tid}, {g.groups}")
    bx = fn.op(f"zext i32 {fn.special('ctaid.x')} to i64")
    n0 = fn.op(f"mul i64 {bx}, {g.columns}")
    bidx = A.decompose(fn, fn.op(f"zext i32 {fn.special('ctaid.z')} to i64"), batch) if batch else []
    # the thread's first column; a run of ``width`` columns when lanes own columns
    n_first = fn.op(f"add i64 {n0}, {fn.op(f'mul i64 {group}, {g.columns // g.groups}')}")
    n_at = fn.call("i64", "llvm.umin.i64", [("i64", n_first), ("i64", str(N - 1))])
    outputs = g.width if not g.along_k else 1
    accs = [[fn.alloca(ty_) for _ in range(outputs)] for _ in range(M)]
    for row in accs:
        for slot in row:
            fn.raw(f"store {ty_} {zero}, ptr {slot}")

    def step(i, vector: bool, guarded: bool):
        """One step of K: the products of this thread's elements, added to its sums."""
        values = _Values(fn, kernel, dim, g.width, vector)
        if g.along_k:
            lane_step = fn.op(f"add i64 {fn.op(f'mul i64 {i}, {g.slices}')}, {s}")
            k0 = fn.op(f"mul i64 {lane_step}, {g.width}")
            ks = [fn.op(f"add i64 {k0}, {j}") for j in range(g.width)]
            ys = values(c.y, bidx + [0, n_at, k0])
            xs = [values(c.x, bidx + [str(m), 0, k0]) for m in range(M)]
            for m in range(M):
                slot = accs[m][0]
                total = fn.op(f"load {ty_}, ptr {slot}")
                for j in range(g.width):
                    new = fmuladd(fn, ty_, xs[m][j], ys[j], total)
                    total = _keep_inside(fn, ty_, guarded, ks[j], KD, new, total)
                fn.raw(f"store {ty_} {total}, ptr {slot}")
            return
        k = fn.op(f"add i64 {fn.op(f'mul i64 {i}, {g.slices}')}, {s}")
        k_at = fn.call("i64", "llvm.umin.i64", [("i64", k), ("i64", str(KD - 1))]) if guarded else k
        ys = values(c.y, bidx + [0, n_first, k_at])
        for m in range(M):
            xv = _Values(fn, kernel, k_dim, 1, False)(c.x, bidx + [str(m), 0, k_at])[0]
            for j, slot in enumerate(accs[m]):
                old = fn.op(f"load {ty_}, ptr {slot}")
                new = fmuladd(fn, ty_, xv, ys[j], old)
                fn.raw(f"store {ty_} {_keep_inside(fn, ty_, guarded, k, KD, new, old)}, ptr {slot}")

    whole = KD // g.k_step
    vectorized = _vector_loads(kernel, c.y, dim, g.width) + (
        _vector_loads(kernel, c.x, dim, g.width) if g.along_k else [])
    if whole:
        def loop(vector):
            return lambda: fn.loop("0", str(whole), "1", lambda i: step(i, vector, False),
                                   unroll=min(whole, UNROLL))
        if g.width > 1 and vectorized:
            fast = A.bindings_aligned(fn, [e.binding for e in vectorized])
            if not g.along_k:  # the thread's run of columns lies inside N
                run_end = fn.op(f"add i64 {n_first}, {g.width}")
                fast = fn.op(f"and i1 {fast}, {fn.op(f'icmp ule i64 {run_end}, {N}')}")
            fn.if_else(fast, loop(True), loop(False))
        else:
            loop(False)()
    if KD % g.k_step:
        step(str(whole), False, True)

    # The slices' sums: a tree of shuffles over the lanes of a 32-lane group that share a column
    # (the slices a group holds, ``per_group``), then through shared memory, [slice group][row]
    # [column], one thread per (row, column) adding the groups in order. (One thread adding all
    # 32 slices, one shared load each, had been a tail of the kernel as long as its loads.)
    masks = [b for b in (16, 8, 4, 2, 1) if (b < g.slices if g.along_k else g.groups <= b)]
    per_group = 1 << len(masks)
    holders = g.slices // per_group
    red = module.shared_array(f"{name}_sums", ty_, holders * M * g.columns)
    holder = fn.op(f"udiv i64 {s}, {per_group}")
    sums = [[_lanes_sum(fn, fn.op(f"load {ty_}, ptr {slot}"), ty_, masks) for slot in row]
            for row in accs]

    def keep():
        for m in range(M):
            for j, value in enumerate(sums[m]):
                column = fn.op(f"add i64 {fn.op(f'mul i64 {group}, {outputs}')}, {j}")
                row = fn.op(f"add i64 {fn.op(f'mul i64 {holder}, {M}')}, {m}")
                at = fn.op(f"add i64 {fn.op(f'mul i64 {row}, {g.columns}')}, {column}")
                p = fn.op(f"getelementptr {ty_}, ptr addrspace(3) {red}, i64 {at}")
                fn.raw(f"store {ty_} {value}, ptr addrspace(3) {p}")
    fn.if_then(fn.op(f"icmp eq i64 {fn.op(f'urem i64 {s}, {per_group}')}, 0"), keep)
    fn.barrier()

    def total(t):
        row, column = fn.op(f"udiv i64 {t}, {g.columns}"), fn.op(f"urem i64 {t}, {g.columns}")
        value = zero
        for sl in range(holders):
            at = fn.op(f"add i64 {t}, {sl * M * g.columns}")
            p = fn.op(f"getelementptr {ty_}, ptr addrspace(3) {red}, i64 {at}")
            value = fn.op(f"fadd {ty_} {value}, {fn.op(f'load {ty_}, ptr addrspace(3) {p}')}")
        store_element(fn, kernel, c, bidx, row, fn.op(f"add i64 {n0}, {column}"), value, lowering)

    fn.loop(tid, str(M * g.columns), str(THREADS), total)
    module.add_kernel(name, A.kernel_params(kernel), fn, THREADS)
    return Launch((ceil_div(N, g.columns), 1, nb), (THREADS, 1, 1))


def _lanes_sum(fn: Function, value: str, ty_: str, masks: list[int]) -> str:
    """``value`` summed over the lanes that differ from this one in ``masks``' bits: a
    butterfly, so every such lane ends with the sum."""
    for mask in masks:
        value = fn.op(f"fadd {ty_} {value}, {shuffle_xor(fn, value, ty_, mask)}")
    return value


def _keep_inside(fn: Function, ty_: str, guarded: bool, k: str, extent: int, new: str,
                 old: str) -> str:
    """``new`` where k lies inside K (always, on unguarded steps), else ``old``."""
    if not guarded:
        return new
    return fn.op(f"select i1 {fn.op(f'icmp ult i64 {k}, {extent}')}, {ty_} {new}, {ty_} {old}")
