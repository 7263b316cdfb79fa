"""Kernels with reduction loops (other than the contractions that contraction.py takes).

Two loop orders, picked by which loop the loads are contiguous along:
- reduction-inner: per output point, accumulators in registers over the reduction loops; the
  innermost reduction loop vectorizes because its ops may be reassociated (row sums, matvec).
- parallel-inner: a block of outputs along the innermost parallel loop keeps one accumulator
  each in a small stack array; every reduction step sweeps the block, which vectorizes along
  the contiguous parallel loop (column sums, reductions over outer dims).
The epilogue is applied to the final accumulators before the store.
"""

from __future__ import annotations

import math

from llvmlite import ir
from pyree.compiler.codegen.llvm_cpu.exprs import ExprEmitter, Point, scalar_type
from pyree.compiler.codegen.llvm_cpu.loops import (
    entry_alloca,
    for_range,
    i64,
    nest,
    umin,
)
from pyree.compiler.codegen.llvm_cpu.normalize import loads
from pyree.compiler.codegen.llvm_cpu.tiling import choose_tiling
from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import Kernel, Load, walk

BLOCK = 256  # outputs per parallel-inner block


class ReductionLowering:
    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        for k, r in enumerate(kernel.results):
            if r.init is None:
                raise CompileError(f"result {k} of reduction kernel '{kernel.name}' has no init")
        self.parallel_inner = _contiguous_along_parallel(kernel)
        work = math.prod(kernel.reduction_ranges) * (len(loads(kernel)) + 1)
        self.tiling = choose_tiling(kernel.parallel_ranges, work)

    @property
    def workgroup_count(self) -> int:
        return self.tiling.count

    def emit(self, b: ir.IRBuilder, ptrs: list[ir.Value], wg: ir.Value) -> None:
        em = ExprEmitter(b, ptrs, self.kernel)
        bounds = self.tiling.emit_bounds(b, wg)
        if self.parallel_inner:
            nest(b, bounds[:-1], lambda ix: self._column_blocks(b, em, ix, bounds[-1]))
        else:
            nest(b, bounds, lambda ix: self._point(b, em, ix))

    def _red_bounds(self):
        return [(i64(0), i64(n)) for n in self.kernel.reduction_ranges]

    def _zeros(self):
        return [i64(0)] * len(self.kernel.reduction_ranges)

    def _point(self, b, em: ExprEmitter, ix: list[ir.Value]) -> None:
        results = self.kernel.results
        types = [scalar_type(r.value.dtype) for r in results]
        slots = [entry_alloca(b, t) for t in types]
        at_init = Point(ix + self._zeros())
        inits = [em.emit(r.init, at_init) for r in results]
        for v, slot in zip(inits, slots):
            b.store(v, slot)

        def step(rix):
            accs = [b.load(s, typ=t) for s, t in zip(slots, types)]
            pt = Point(ix + rix, accs=accs)
            for v, s in zip([em.emit(r.value, pt, fast=True) for r in results], slots):
                b.store(v, s)

        nest(b, self._red_bounds(), step)
        self._finish(b, em, Point(ix + self._zeros(), accs=[b.load(s, typ=t) for s, t in zip(slots, types)]))

    def _column_blocks(self, b, em: ExprEmitter, ix: list[ir.Value], inner) -> None:
        results = self.kernel.results
        lo, hi = inner
        types = [scalar_type(r.value.dtype) for r in results]
        arrays = [entry_alloca(b, t, BLOCK) for t in types]
        with for_range(b, lo, hi, step=BLOCK, name="block") as start:
            stop = umin(b, b.add(start, i64(BLOCK)), hi)

            def sweep(rest: list[ir.Value], update) -> None:
                with for_range(b, start, stop, name="c") as c:
                    slots = [b.gep(a, [b.sub(c, start)], source_etype=t)
                             for a, t in zip(arrays, types)]
                    update(ix + [c] + rest, slots)

            def init(at, slots):
                for v, s in zip([em.emit(r.init, Point(at)) for r in results], slots):
                    b.store(v, s)

            def step(at, slots):
                pt = Point(at, accs=[b.load(s, typ=t) for s, t in zip(slots, types)])
                for v, s in zip([em.emit(r.value, pt, fast=True) for r in results], slots):
                    b.store(v, s)

            sweep(self._zeros(), init)
            nest(b, self._red_bounds(), lambda rix: sweep(rix, step))
            sweep(self._zeros(), lambda at, slots: self._finish(
                b, em, Point(at, accs=[b.load(s, typ=t) for s, t in zip(slots, types)])))

    def _finish(self, b, em: ExprEmitter, pt: Point) -> None:
        results = self.kernel.results
        out = [em.emit(r.epilogue, pt) if r.epilogue is not None else pt.accs[k]
               for k, r in enumerate(results)]
        for r, v in zip(results, out):
            em.store(r.binding, r.index[0], v, pt)


def _contiguous_along_parallel(kernel: Kernel) -> bool:
    """True when more loads are unit-stride along the innermost parallel loop than the
    innermost reduction loop."""
    if kernel.num_parallel == 0:
        return False
    p, r = kernel.num_parallel - 1, len(kernel.loop_ranges) - 1
    value_loads = {e for res in kernel.results for e in walk(res.value) if isinstance(e, Load)}
    along_r = sum(1 for ld in value_loads if ld.index[0].coeffs[r] == 1)
    along_p = sum(1 for ld in value_loads if ld.index[0].coeffs[p] == 1 and ld.index[0].coeffs[r] != 1)
    return along_p > along_r
