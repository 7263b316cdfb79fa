"""Elementwise kernels that read an input transposed: square blocks transposed in registers.

A kernel's innermost loop p is the one its results are stored contiguously along; a load that
steps further than a span along p but one element along another loop q reads the input
transposed (a 2-D transpose, NCHW<->NHWC, a batched transpose, a transpose fused with other
elementwise work). LLVM vectorizes such a load along p as one scalar load per lane, each from
another row of the input (another page, for a large one), and the rows of the result walk whole
columns of the input: a 4096^2 f32 transpose ran at well under PyTorch's speed (BENCHMARKS.md,
issue 31 item 5). Here the kernel runs instead in blocks of ``lanes`` x ``lanes`` points of (q, p): each
transposed load reads ``lanes`` vectors along q (rows of its input), which shuffles (LLVM
``shufflevector``, log2(lanes) stages, each swapping one bit of the row and column index) turn
into ``lanes`` vectors along p; the block's results are then computed and stored as vectors
along p, one per value of q, the other loads as ExprEmitter loads them along p. The blocks of a
workgroup run in strips of ``rows`` values of q (at least a cache line of the transposed loads'
elements), p outermost within a strip, so each strip reads whole cache lines of its input rows
and completes its result rows' lines as p advances. What is not a whole block (the strip's last
rows, the last columns) runs as the plain scalar nest, which LLVM vectorizes as before.

Loads that are not transposed keep their form (contiguous, broadcast, span, gather); loads that
may fall outside their binding (Select-guarded) are not read as blocks, since a block reads
every point of it. Run-time extents work alike (``dynamic.py``): the blocks and tails are
loops to run-time bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir
from pyree.compiler.codegen.common.normalize import unsafe_loads
from pyree.compiler.codegen.llvm_cpu.loops import entry_alloca, for_range, i64, nest, umin
from pyree.compiler.codegen.llvm_cpu.scalar import I32, ExprEmitter, Point, bits, storage_type
from pyree.compiler.kernel import Kernel, Load, result_nodes
from pyree.compiler.sizes import is_static

LINE_BYTES = 64   # a strip's rows hold at least one cache line of each transposed load's row
MAX_LANES = 16    # a block of 16 vectors and their shuffles fit AVX-512's 32 registers


@dataclass(frozen=True)
class TransposePlan:
    q: int                    # the loop the transposed loads are contiguous along
    loads: tuple[Load, ...]   # the loads read as blocks
    lanes: int                # a block is lanes x lanes points of (q, p); a power of two
    rows: int                 # values of q per strip, a multiple of lanes


def plan_transpose(kernel: Kernel, vector_bits: int, span: int) -> TransposePlan | None:
    """The blocked order for a normalized kernel without reduction loops whose results are
    contiguous along the innermost loop and that has a transposed load; else None."""
    if kernel.reduction_ranges or kernel.num_parallel < 2 or not kernel.results:
        return None
    p = kernel.num_parallel - 1
    if not all(is_static(r.index[0].coeffs[p]) and r.index[0].coeffs[p] == 1 for r in kernel.results):
        return None
    unsafe = unsafe_loads(kernel)
    found: dict[Load, int] = {}   # in the kernel's walk order: the same choice on every build
    for r in kernel.results:
        for e in result_nodes(r):
            if not isinstance(e, Load) or e in found or e in unsafe:
                continue
            coeffs = e.index[0].coeffs
            if is_static(coeffs[p]) and abs(coeffs[p]) <= span:
                continue   # contiguous, broadcast, reversed or a span along p: not transposed
            along = [d for d in range(p) if is_static(coeffs[d]) and coeffs[d] == 1]
            if along:
                found[e] = along[-1]
    if not found:
        return None
    q = next(iter(found.values()))
    chosen = tuple(ld for ld, d in found.items() if d == q)
    width = max(bits(kernel.bindings[ld.binding].dtype) for ld in chosen)
    width = 8 if width < 8 else width   # i1 is stored as a byte
    lanes = min(MAX_LANES, max(4, vector_bits // width))
    ranges = kernel.parallel_ranges
    if any(is_static(ranges[d]) and ranges[d] < lanes for d in (p, q)):
        return None   # not one whole block: the plain nest
    return TransposePlan(q, chosen, lanes, max(lanes, LINE_BYTES * 8 // width))


def emit_transposed(b: ir.IRBuilder, plan: TransposePlan, vec: ExprEmitter, scalar: ExprEmitter,
                    bounds: list[tuple[ir.Value, ir.Value]]) -> None:
    """The box ``bounds`` ((lo, hi) per parallel loop) in blocks; ``vec`` emits at
    ``plan.lanes`` lanes, ``scalar`` at one, both over the same kernel, bindings and sizes."""
    kernel = vec.kernel
    p, q, lanes = kernel.num_parallel - 1, plan.q, plan.lanes
    others = [d for d in range(p) if d != q]

    def whole(lo, hi):
        return b.sub(hi, b.urem(b.sub(hi, lo), i64(lanes)))

    def indices(outer: list[ir.Value], at_q: ir.Value, at_p: ir.Value) -> list[ir.Value]:
        ix = dict(zip(others, outer))
        ix[q], ix[p] = at_q, at_p
        return [ix[d] for d in range(p + 1)]

    def scalars(outer, q_range, p_range):
        nest(b, [q_range, p_range], lambda qp: store(scalar, Point(indices(outer, *qp)), {}))

    def strips(outer: list[ir.Value]) -> None:
        (q_lo, q_hi), (p_lo, p_hi) = bounds[q], bounds[p]
        p_end = whole(p_lo, p_hi)
        with for_range(b, q_lo, q_hi, step=plan.rows, name="strip", unroll=False) as s:
            s_hi = umin(b, b.add(s, i64(plan.rows)), q_hi)
            s_end = whole(s, s_hi)
            with for_range(b, p_lo, p_end, step=lanes, name="pblock", unroll=False) as p0:
                with for_range(b, s, s_end, step=lanes, name="qblock", unroll=False) as q0:
                    _block(b, plan, vec, outer, q0, p0, indices)
            scalars(outer, (s, s_end), (p_end, p_hi))      # the strip's last columns
            scalars(outer, (s_end, s_hi), (p_lo, p_hi))    # its last rows

    nest(b, [bounds[d] for d in others], strips)


def _block(b: ir.IRBuilder, plan: TransposePlan, vec: ExprEmitter, outer, q0, p0, indices) -> None:
    """The block at (q0, p0): the transposed loads as vectors along q, shuffled into vectors
    along p, then one vector of every result per value of q. The shuffled vectors go through a
    stack array and a loop over q, which LLVM unrolls and keeps in registers where the body is
    small (a plain transpose) and leaves a loop where it is not (a long fused expression)."""
    lanes = plan.lanes
    slots = {}
    for ld in plan.loads:
        dtype = vec.kernel.bindings[ld.binding].dtype
        st, nbytes = storage_type(dtype), max(1, bits(dtype) // 8)
        vt = ir.VectorType(st, lanes)
        rows = []
        for k in range(lanes):
            at_p = b.add(p0, i64(k)) if k else p0
            ptr = b.gep(vec.bindings[ld.binding],
                        [vec.offset(ld.index[0], Point(indices(outer, q0, at_p)))], source_etype=st)
            rows.append(b.load(ptr, align=nbytes, typ=vt))
        slots[ld] = (entry_alloca(b, vt, lanes), vt)
        for r, v in enumerate(transpose_registers(b, rows)):
            b.store(v, b.gep(slots[ld][0], [i64(r)], source_etype=vt))
    with for_range(b, i64(0), i64(lanes), name="row") as r:
        known = {ld: vec.from_storage(b.load(b.gep(slot, [r], source_etype=vt), typ=vt), ld.dtype)
                 for ld, (slot, vt) in slots.items()}
        pt = Point(indices(outer, b.add(q0, r), p0), lane_dim=vec.kernel.num_parallel - 1)
        store(vec, pt, known)


def transpose_registers(b: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
    """``rows[k][r]`` as ``out[r][k]`` for n vectors of n lanes (n a power of two): stage t swaps
    bit t of the row index with bit t of the lane index, one two-source shuffle per vector (on
    AVX2, 8x8 f32 is 24 shuffles: shufps, shufps, insertf128/perm2f128). Interleaving halves
    (punpckl/h) gave byte blocks fewer instructions but no measurable time: the copy is bound by
    memory."""
    n = len(rows)
    m = list(rows)
    t = 1
    while t < n:
        low = ir.Constant(ir.VectorType(I32, n), [(n if c & t else 0) + (c & ~t) for c in range(n)])
        high = ir.Constant(ir.VectorType(I32, n), [(n if c & t else 0) + (c | t) for c in range(n)])
        for r in range(n):
            if not r & t:
                m[r], m[r | t] = b.shuffle_vector(m[r], m[r | t], low), b.shuffle_vector(m[r], m[r | t], high)
        t <<= 1
    return m


def store(em: ExprEmitter, pt: Point, known: dict) -> None:
    """Every result at ``pt``, all values computed first; ``known``: loads already read."""
    results = em.kernel.results
    values = [em.emit(r.value, pt, known=known) for r in results]
    for r, v in zip(results, values):
        em.store(r.binding, r.index[0], v, pt)
