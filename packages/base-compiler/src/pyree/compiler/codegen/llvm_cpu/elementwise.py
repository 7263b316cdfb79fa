"""Kernels without reduction loops: a scalar loop nest per tile, vectorized by LLVM.

After normalization the innermost loop is the one the first result is stored contiguously
along, so LLVM's loop vectorizer turns it into full-width vector code with a scalar tail;
broadcast, strided and transposed loads come out as splats, shuffles or gathers. Where a load
steps 2-4 elements along that loop (a strided convolution's im2col, a strided slice), LLVM
gathers, so those kernels are written as explicit vectors along the loop instead: a strided
load is then one span load and a shuffle (scalar.py), the row's tail one masked vector. A load
that steps further along that loop but one element along another (a transpose) is read in square
blocks transposed in registers (transpose.py), which dynamic.py's elementwise kernels share.
"""

from __future__ import annotations

from llvmlite import ir
from pyree.compiler.codegen.common import math_expansion
from pyree.compiler.codegen.common.normalize import loads
from pyree.compiler.codegen.llvm_cpu import scalar
from pyree.compiler.codegen.llvm_cpu.loops import nest
from pyree.compiler.codegen.llvm_cpu.scalar import (
    ExprEmitter,
    Point,
    row_lanes,
    span_stride,
    sweep_vectors,
)
from pyree.compiler.codegen.llvm_cpu.tiling import choose_tiling
from pyree.compiler.codegen.llvm_cpu.transpose import emit_transposed, plan_transpose
from pyree.compiler.kernel import Kernel, Select, walk


def plan(kernel: Kernel, target) -> ElementwiseLowering:
    """The last template: it takes every kernel."""
    return ElementwiseLowering(kernel, span_stride(target), target.vector_bits)


class ElementwiseLowering:
    def __init__(self, kernel: Kernel, span: int = 1, vector_bits: int = 128):
        """``span``: the longest lane step loaded as a span (scalar.span_stride);
        ``vector_bits``: the target's, for the blocks of a transposed load (transpose.py)."""
        self.kernel, self.span = kernel, span
        self.lanes = row_lanes(kernel, vector_bits) if _strided_rows(kernel, span) else 0
        self.transposed = None if self.lanes else plan_transpose(kernel, vector_bits, span)
        work = len(loads(kernel)) + len(kernel.results)
        self.tiling = choose_tiling(kernel.parallel_ranges, work) if self.transposed is None else \
            choose_tiling(kernel.parallel_ranges, work,
                          outer_align=(self.transposed.q, self.transposed.rows))

    @property
    def workgroup_count(self) -> int:
        return self.tiling.count

    def emit(self, b: ir.IRBuilder, ptrs: list[ir.Value], wg: ir.Value) -> None:
        bounds = self.tiling.emit_bounds(b, wg)
        if self.transposed:
            emit_transposed(b, self.transposed, ExprEmitter(b, ptrs, self.kernel, width=self.transposed.lanes,
                                                            span=self.span),
                            ExprEmitter(b, ptrs, self.kernel), bounds)
        elif self.lanes:
            vec = ExprEmitter(b, ptrs, self.kernel, width=self.lanes, span=self.span)
            lane = self.kernel.num_parallel - 1
            nest(b, bounds[:-1], lambda ix: sweep_vectors(b, vec, *bounds[-1], lambda start, mask: (
                self._store(vec, Point(ix + [start], lane_dim=lane, mask=mask)))))
        else:
            em = ExprEmitter(b, ptrs, self.kernel)
            nest(b, bounds, lambda indices: self._store(em, Point(indices)))

    def _store(self, em: ExprEmitter, pt: Point) -> None:
        values = [em.emit(r.value, pt) for r in self.kernel.results]
        for r, v in zip(self.kernel.results, values):
            em.store(r.binding, r.index[0], v, pt)


def _strided_rows(kernel: Kernel, span: int) -> bool:
    """Results contiguous along the innermost loop and no load stepping more than ``span``
    elements along it (a transposed load gathers either way), with some load stepping 2..span
    or some result computing math with a rare arm (``_rare_arms``)."""
    if kernel.num_parallel == 0:
        return False
    p = kernel.num_parallel - 1
    steps = [ld.index[0].coeffs[p] for ld in loads(kernel)]
    return (all(r.index[0].coeffs[p] == 1 for r in kernel.results)
            and all(abs(s) <= span for s in steps)
            and (any(1 < s <= span for s in steps) or _rare_arms(kernel)))


def _rare_arms(kernel: Kernel) -> bool:
    """Whether a result computes math whose expansion has a rare, dear arm (a ``lazy`` select:
    sin, cos and tan reduce a huge argument by Payne-Hanek). Explicit vectors branch around that
    arm where no lane of a vector takes it (scalar.py ``_rare_select``); LLVM's loop vectorizer
    would compute it for every vector, 3x the time of the rest of sin."""
    return any(isinstance(n, Select) and n.lazy
               for r in kernel.results for node in walk(r.value) if scalar.expanded(node)
               for n in walk(math_expansion.expand(node)))
