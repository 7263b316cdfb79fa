"""Scatter kernels (``kernel.Scatter``): a loop nest over the update elements, each combined into
its computed place.

local-task runs a kernel's tiles on several threads at once. Where the tiles can be cut along
loops whose points never share a place (``Scatter.disjoint``: index_add's row, a slice dim no
index moves), or the scatter is small enough for one tile, each place is combined by one thread
in update order: a plain load, op and store, the reference's order exactly. Otherwise two
updates of one place may sit in different tiles, so every combine is atomic: an ``atomicrmw``
where LLVM has the op for the dtype (integer add, min, max, and, or, xor; float add, which x86
expands into a compare-exchange loop), else a compare-exchange loop on the element's bits
around the kernel's own op (a product, a float max that propagates NaN as ``Binary`` does, any
bf16 or i1 op). A plain set is a plain store, where its condition holds (input/scatter.py: the
one winner of a place stores). A place outside the binding is skipped.
"""

from __future__ import annotations

import math

from llvmlite import ir
from pyree.compiler.codegen.common.normalize import loads
from pyree.compiler.codegen.common.scatter import ATOMIC_RMW, combine_of, dtype_kind
from pyree.compiler.codegen.llvm_cpu.loops import i64, nest
from pyree.compiler.codegen.llvm_cpu.scalar import (
    ExprEmitter,
    Point,
    compute_dtype,
    storage_type,
)
from pyree.compiler.codegen.llvm_cpu.tiling import Tiling, choose_tiling
from pyree.compiler.kernel import Kernel


def plan(kernel: Kernel, target) -> ScatterLowering | None:
    """Takes exactly the kernels with a scatter result."""
    if not kernel.results or kernel.results[0].scatter is None:
        return None
    return ScatterLowering(kernel)


# Update points that one tile combines in order without atomics, where no loop is disjoint: an
# atomic float add or max is a compare-exchange loop on x86, several times a plain one (a float
# max of 100000 updates into 1000 bins: two threads' atomics 0.85 ms, one tile 0.65 ms on a
# 2-core VM; the threshold itself is not measured on many-core hosts, BENCHMARKS.md).
ONE_TILE_POINTS = 1 << 22


class ScatterLowering:
    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        ranges = kernel.parallel_ranges
        work = len(loads(kernel)) + 1
        disjoint = kernel.results[0].scatter.disjoint
        combines = combine_of(kernel.results[0].value).op is not None  # else a store per place
        self.plain = combines and (bool(disjoint) or math.prod(ranges) <= ONE_TILE_POINTS)
        if self.plain and disjoint:  # cut only along them: each place stays with one tile
            others = math.prod(r for q, r in enumerate(ranges) if q not in disjoint)
            cut = choose_tiling(tuple(ranges[l] for l in disjoint), work * others, align=8)
            tile = [max(1, r) for r in ranges]
            for l, t in zip(disjoint, cut.tile):
                tile[l] = t
            self.tiling = Tiling(tuple(ranges), tuple(tile))
        elif self.plain:
            self.tiling = Tiling(tuple(ranges), tuple(max(1, r) for r in ranges))
        else:
            self.tiling = choose_tiling(ranges, work)

    @property
    def workgroup_count(self) -> int:
        return self.tiling.count

    def emit(self, b: ir.IRBuilder, ptrs: list[ir.Value], wg: ir.Value) -> None:
        em = ExprEmitter(b, ptrs, self.kernel)
        nest(b, self.tiling.emit_bounds(b, wg), lambda indices: self._update(em, Point(indices)))

    def _update(self, em: ExprEmitter, pt: Point) -> None:
        b, r = em.b, self.kernel.results[0]
        dtype = self.kernel.bindings[r.binding].dtype
        offset = em.emit(r.scatter.place[0], pt)  # normalized: flat, -1 outside the binding
        inside = b.icmp_unsigned("<", offset, i64(self.kernel.bindings[r.binding].shape[0]))
        with b.if_then(inside):
            ptr = b.gep(em.bindings[r.binding], [offset], source_etype=storage_type(dtype))
            op, update, first, cond = combine_of(r.value)
            if op is None:  # a store, where its condition holds
                store = lambda: b.store(em.to_storage(em.emit(update, pt), dtype), ptr)  # noqa: E731
                if cond is None:
                    store()
                else:
                    with b.if_then(em.emit(cond, pt)):
                        store()
                return
            x = em.emit(update, pt)
            rmw = ATOMIC_RMW.get((op, dtype_kind(dtype)))
            if self.plain:
                old = em.from_storage(b.load(ptr, typ=storage_type(dtype)), dtype)
                new = em.binary(op, x if first else old, old if first else x, compute_dtype(dtype),
                                False)
                b.store(em.to_storage(new, dtype), ptr)
            elif rmw is not None:
                b.atomic_rmw(rmw, ptr, x, "monotonic")
            else:
                _compare_exchange(em, ptr, dtype, lambda old: em.binary(
                    op, x if first else old, old if first else x, compute_dtype(dtype), False))


def _compare_exchange(em: ExprEmitter, ptr: ir.Value, dtype: str, combine) -> None:
    """``*ptr = combine(*ptr)`` atomically: a loop of compare-exchanges on the element's bits
    (bits, not values: a NaN never compares equal to itself)."""
    b = em.b
    st = storage_type(dtype)
    bits = ir.IntType(st.width if isinstance(st, ir.IntType) else {"half": 16, "float": 32,
                                                                     "double": 64}[str(st)])
    as_bits = (lambda v: v) if isinstance(st, ir.IntType) else (lambda v: b.bitcast(v, bits))
    first = as_bits(b.load(ptr, typ=st, align=max(1, bits.width // 8)))
    before = b.block
    loop, done = b.append_basic_block("cas.loop"), b.append_basic_block("cas.done")
    b.branch(loop)
    b.position_at_end(loop)
    old_bits = b.phi(bits)
    old_bits.add_incoming(first, before)
    old = old_bits if isinstance(st, ir.IntType) else b.bitcast(old_bits, st)
    new = em.to_storage(combine(em.from_storage(old, dtype)), dtype)
    pair = b.cmpxchg(ptr, old_bits, as_bits(new), "monotonic", "monotonic")
    old_bits.add_incoming(b.extract_value(pair, 0), b.block)
    b.cbranch(b.extract_value(pair, 1), done, loop)
    b.position_at_end(done)
