"""Kernels without reduction loops: a scalar loop nest per tile, vectorized by LLVM.

After normalization the innermost loop is the one the first result is stored contiguously
along, so LLVM's loop vectorizer turns it into full-width vector code with a scalar tail;
broadcast, strided and transposed loads come out as splats, shuffles or gathers.
"""

from __future__ import annotations

from llvmlite import ir
from pyree.compiler.codegen.llvm_cpu.exprs import ExprEmitter, Point
from pyree.compiler.codegen.llvm_cpu.loops import nest
from pyree.compiler.codegen.llvm_cpu.normalize import loads
from pyree.compiler.codegen.llvm_cpu.tiling import choose_tiling
from pyree.compiler.kernel import Kernel


class ElementwiseLowering:
    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.tiling = choose_tiling(kernel.parallel_ranges, len(loads(kernel)) + len(kernel.results))

    @property
    def workgroup_count(self) -> int:
        return self.tiling.count

    def emit(self, b: ir.IRBuilder, ptrs: list[ir.Value], wg: ir.Value) -> None:
        em = ExprEmitter(b, ptrs, self.kernel)

        def body(indices):
            pt = Point(indices)
            values = [em.emit(r.value, pt) for r in self.kernel.results]
            for r, v in zip(self.kernel.results, values):
                em.store(r.binding, r.index[0], v, pt)

        nest(b, self.tiling.emit_bounds(b, wg), body)
