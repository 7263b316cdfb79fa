"""A scan along a line as one running fold (``kernel.LineScan``): one thread a line, each
element folded once, in order.

The kernel states each element's own prefix fold (O(n^2) per line, which a GPU spreads over its
threads, or input/sort_scan.py's blocks); a CPU core walks the line instead: ``out[0]`` is the
init, and each step folds the next element into the previous output, which is also exactly
the reference's rounding (a float cumsum summed left to right, not in blocks). A fold that
rounds alike in any grouping (max, min, integer sums) walks CHAINS chunks of the line at once,
then folds each chunk's predecessor into it: one walk was bound by the fold's latency (a float
max's compare and blend), and cummax of 64 rows of 4096 took 1.7x longer.
"""

from __future__ import annotations

from llvmlite import ir
from pyree.compiler.codegen.llvm_cpu.line_walk import LineWalk
from pyree.compiler.codegen.llvm_cpu.loops import entry_alloca, for_range, i64
from pyree.compiler.codegen.llvm_cpu.scalar import ExprEmitter, Point, compute_dtype, scalar_type
from pyree.compiler.kernel import Acc, Binary, Cast, Expr, Kernel, LineScan, Load, line_step
from pyree.compiler.kernel.ir import is_float, walk
from pyree.compiler.sizes import is_static

CHAINS = 4  # chunks walked at once (8 were no faster on x86-64-v3: then bound by throughput)
MIN_CHUNK = 64  # a line shorter than CHAINS of these is walked whole


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
        element = self._exact_fold_element()
        if element is None:
            with for_range(b, i64(0), i64(self.n - 1), name="scan", unroll=False) as j:
                after = b.add(j, i64(1))
                value = em.emit(self.step, point(after, j, b.load(acc)))
                b.store(value, acc)
                store(value, point(after, j))
            return
        # CHAINS chunks walked at once, each from its own first element (independent dependency
        # chains: a max's compare-and-blend latency, not its throughput, bounded one walk), the
        # last chunk's remainder alone; then each later chunk folds in the output just before it.
        length = self.n // CHAINS
        accs = [acc] + [entry_alloca(b, scalar_type(self.running)) for _ in range(CHAINS - 1)]
        for c in range(1, CHAINS):
            at = point(i64(c * length), i64(c * length - 1))
            b.store(em.emit(element, at), accs[c])
            store(b.load(accs[c]), at)

        def step(c: int, j: ir.Value) -> None:
            after = b.add(j, i64(c * length + 1))
            at = point(after, b.sub(after, i64(1)), b.load(accs[c]))
            value = em.emit(self.step, at)
            b.store(value, accs[c])
            store(value, at)

        with for_range(b, i64(0), i64(length - 1), name="scan", unroll=False) as j:
            for c in range(CHAINS):
                step(c, j)
        with for_range(b, i64(length - 1), i64(self.n - (CHAINS - 1) * length - 1), name="rest",
                       unroll=False) as j:
            step(CHAINS - 1, j)
        out = Load(r.binding, r.index, self.dtype)
        folded = Binary(self.step.op, Acc(0, self.dtype), out, self.dtype)
        for c in range(1, CHAINS):
            carry = em.emit(out, point(i64(c * length - 1), i64(0)))
            end = self.n if c == CHAINS - 1 else (c + 1) * length
            with for_range(b, i64(c * length), i64(end), name="carry") as i:
                at = point(i, i64(0), carry)
                store(em.emit(folded, at), at)

    def _exact_fold_element(self) -> Expr | None:
        """The element of a step that folds it into the running value by an op any grouping of
        which rounds alike (max, min; integer sums, products and bitwise ops), on a line long
        enough to split; None otherwise (a float sum keeps the reference's order)."""
        step = self.step
        if not (isinstance(step, Binary) and is_static(self.n) and self.n >= CHAINS * MIN_CHUNK
                and self.running == compute_dtype(self.dtype)):
            return None
        exact = step.op in ("max", "min") or (step.op in ("add", "mul", "and", "or", "xor")
                                              and not is_float(self.dtype))
        if not exact or Acc(0, self.dtype) not in (step.a, step.b):
            return None
        element = step.b if step.a == Acc(0, self.dtype) else step.a
        return None if any(isinstance(e, Acc) for e in walk(element)) else element
