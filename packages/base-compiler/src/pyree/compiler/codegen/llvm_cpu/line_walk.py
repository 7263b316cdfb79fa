"""What the line walks share (``kernel.LineSort``: line_sort.py, ``kernel.LineScan``:
line_scan.py): one thread a line, the tiles cut over the other parallel loops only, so that a
line is never split between threads; each walk emits its ``_line``."""

from __future__ import annotations

from llvmlite import ir
from pyree.compiler.codegen.llvm_cpu.loops import nest
from pyree.compiler.codegen.llvm_cpu.scalar import ExprEmitter
from pyree.compiler.codegen.llvm_cpu.tiling import choose_tiling
from pyree.compiler.kernel import Kernel


class LineWalk:
    def __init__(self, kernel: Kernel, work_per_point: int):
        """``work_per_point``: the walk's steps per element of a line (tiles of similar cost)."""
        self.kernel = kernel
        self.d = kernel.line.d
        self.n = kernel.parallel_ranges[self.d]
        lines = tuple(1 if q == self.d else r for q, r in enumerate(kernel.parallel_ranges))
        self.tiling = choose_tiling(lines, self.n * work_per_point, align=1)
        self.result = kernel.results[0]

    @property
    def workgroup_count(self) -> int:
        return self.tiling.count

    def emit(self, b: ir.IRBuilder, ptrs: list[ir.Value], wg: ir.Value) -> None:
        em = ExprEmitter(b, ptrs, self.kernel)
        nest(b, self.tiling.emit_bounds(b, wg), lambda line: self._line(em, line))

    def _line(self, em: ExprEmitter, line: list[ir.Value]) -> None:
        raise NotImplementedError  # each walk's own
