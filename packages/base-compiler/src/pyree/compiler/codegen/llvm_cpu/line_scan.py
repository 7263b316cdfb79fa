"""A scan along a line as one running fold (``kernel.LineScan``): one thread a line, each
element folded once, in order.

The kernel states each element's own prefix fold (O(n^2) per line, which a GPU spreads over its
threads, or input/sort_scan.py's blocks); a CPU core walks the line instead: ``out[0]`` is the
init, and each step folds the next element into the previous output, which is also exactly
the reference's rounding (a float cumsum summed left to right, not in blocks).
"""

from __future__ import annotations

from llvmlite import ir
from pyree.compiler.codegen.llvm_cpu.line_walk import LineWalk
from pyree.compiler.codegen.llvm_cpu.loops import entry_alloca, for_range, i64
from pyree.compiler.codegen.llvm_cpu.scalar import ExprEmitter, Point, compute_dtype, scalar_type
from pyree.compiler.kernel import Kernel, LineScan, line_step


def plan(kernel: Kernel, target) -> LineScanLowering | None:
    """Takes exactly the kernels holding a ``LineScan``."""
    return LineScanLowering(kernel) if isinstance(kernel.line, LineScan) else None


class LineScanLowering(LineWalk):
    def __init__(self, kernel: Kernel):
        super().__init__(kernel, 1)
        self.step = line_step(self.result)

    def _line(self, em: ExprEmitter, line: list[ir.Value]) -> None:
        b, d, r = em.b, self.d, self.result
        dtype = compute_dtype(self.kernel.bindings[r.binding].dtype)
        acc = entry_alloca(b, scalar_type(dtype))

        def point(i: ir.Value, j: ir.Value, value: ir.Value | None = None) -> Point:
            return Point([*line[:d], i, *line[d + 1:], j], accs=None if value is None else [value])

        first = em.emit(r.init, point(i64(0), i64(0)))
        b.store(first, acc)
        em.store(r.binding, r.index[0], first, point(i64(0), i64(0)))
        with for_range(b, i64(0), i64(self.n - 1), name="scan", unroll=False) as j:
            after = b.add(j, i64(1))
            value = em.emit(self.step, point(after, j, b.load(acc)))
            b.store(value, acc)
            em.store(r.binding, r.index[0], value, point(after, j))
