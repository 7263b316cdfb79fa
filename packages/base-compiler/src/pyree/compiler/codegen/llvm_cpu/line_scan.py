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
from pyree.compiler.kernel import Acc, Binary, Cast, Kernel, LineScan, line_step


def plan(kernel: Kernel, target) -> LineScanLowering | None:
    """Takes exactly the kernels holding a ``LineScan``."""
    return LineScanLowering(kernel) if isinstance(kernel.line, LineScan) else None


class LineScanLowering(LineWalk):
    def __init__(self, kernel: Kernel):
        super().__init__(kernel, 1)
        self.step = line_step(self.result)
        self.dtype = kernel.bindings[self.result.binding].dtype
        # A running sum or product of f16/bf16 runs in f32, each output rounded once, as
        # PyTorch's cumsum does (accumulated in f16, 4099 halves in [0, 1) ended 21 ulp off).
        step = self.step
        if self.dtype in ("f16", "bf16") and isinstance(step, Binary) and step.op in ("add", "mul") \
                and Acc(0, self.dtype) in (step.a, step.b):
            f = step.b if step.a == Acc(0, self.dtype) else step.a
            self.running = "f32"
            self.step = Binary(step.op, Acc(0, "f32"), Cast("fpext", f, "f32"), "f32")
        else:
            self.running = compute_dtype(self.dtype)

    def _line(self, em: ExprEmitter, line: list[ir.Value]) -> None:
        b, d, r = em.b, self.d, self.result
        acc = entry_alloca(b, scalar_type(self.running))

        def point(i: ir.Value, j: ir.Value, value: ir.Value | None = None) -> Point:
            return Point([*line[:d], i, *line[d + 1:], j], accs=None if value is None else [value])

        def store(value: ir.Value, at: Point) -> None:
            if self.running != compute_dtype(self.dtype):  # rounded once, from the f32 sum
                value = em.emit(Cast("fptrunc", Acc(0, "f32"), self.dtype), Point([], accs=[value]))
            em.store(r.binding, r.index[0], value, at)

        first = em.emit(r.init, point(i64(0), i64(0)))
        if self.running != compute_dtype(self.dtype):
            first = em.emit(Cast("fpext", Acc(0, self.dtype), "f32"), Point([], accs=[first]))
        b.store(first, acc)
        store(first, point(i64(0), i64(0)))
        with for_range(b, i64(0), i64(self.n - 1), name="scan", unroll=False) as j:
            after = b.add(j, i64(1))
            value = em.emit(self.step, point(after, j, b.load(acc)))
            b.store(value, acc)
            store(value, point(after, j))
