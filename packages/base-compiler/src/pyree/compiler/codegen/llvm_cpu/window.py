"""Sliding windows on the CPU: the window order's input expression staged per row of outputs in
a stack buffer (the GPU targets stage theirs in shared memory; ``codegen/common/window.py``
finds the window for both).

The window order (``reduction.py``) folds vectors of outputs along the innermost parallel loop
over their taps, each tap a vector of the fold's input expression. Where that expression holds a
padding guard (``select(ow + kw in [127, 2127), x[2000 c + ow + kw - 127], 0)``, a convolution's
padding fused into it) every tap recomputed the guard's compares and took a masked load. Staged,
each row of outputs (every parallel loop but the lanes' fixed) first evaluates the window once
per position of the innermost pair's footprint (the positions ``cp * ow + cr * kw`` its tile
reads), for each combination of the other reduction loops, into a buffer on the stack; the taps
then read it with plain vector loads. Only the innermost pair slides along the lanes: the other
reduction loops just pick a buffer row, so the analysis runs on the flattened kernel.

Which kernels: a window-order kernel whose last reduction loop moves with the lanes' loop in
the fold's loads (strides the target loads as a span), with a window that computes more than a
load (a bare load gains nothing from a copy), and a buffer of at most ``MAX_BYTES``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llvmlite import ir
from pyree.compiler import kernel as K
from pyree.compiler.codegen.common import window as W
from pyree.compiler.codegen.llvm_cpu.loops import entry_alloca, i64, nest
from pyree.compiler.codegen.llvm_cpu.scalar import I32, ExprEmitter, Point, storage_type, sweep_vectors
from pyree.compiler.codegen.llvm_cpu.tiling import Tiling

MAX_BYTES = 32 * 1024  # a row's buffer: an L1 data cache (a block of rows stages one each)
# Fewer taps along the row: the fill costs more than the guards it saves on short rows
# (MobileNet v2's 3 x 3 windows on 14-wide rows ran 1.8x slower staged, BENCHMARKS.md).
MIN_ROW_TAPS = 5


@dataclass(frozen=True)
class Staging:
    window: K.Expr
    cp: int  # the lanes' loop's coefficient in the window's position (the stride)
    cr: int  # the last reduction loop's (the dilation)
    stride: int  # elements per buffer row: the widest footprint and a block's overrun

    def fill(self, kernel: K.Kernel, vec: ExprEmitter, ix: list[ir.Value], lo, hi):
        """Stages the row of outputs ``ix`` (lanes' loop [lo, hi)); returns ``read(start,
        taps)``: the window's values for the vector of outputs from ``start`` at reduction
        indices ``taps``, as the ``known`` values of an ``ExprEmitter.emit``."""
        b, p = vec.b, kernel.num_parallel - 1
        outer = kernel.reduction_ranges[:-1]
        st = storage_type(self.window.dtype)
        buffer = entry_alloca(b, st, math.prod(outer) * self.stride, align=64)
        taps = kernel.reduction_ranges[-1]
        footprint = b.add(b.mul(b.sub(b.sub(hi, lo), i64(1)), i64(self.cp)),
                          i64(self.cr * (taps - 1) + 1))

        def row(rix: list[ir.Value]) -> None:
            base = b.mul(self._row(b, outer, rix), i64(self.stride))

            def store(j, mask):  # lanes along the loop whose coefficient is 1
                if self.cp == 1:
                    pt = Point(ix + [b.add(lo, j)] + rix + [i64(0)], lane_dim=p, mask=mask)
                else:
                    pt = Point(ix + [lo] + rix + [j], lane_dim=len(kernel.loop_ranges) - 1, mask=mask)
                value = vec.to_storage(vec.emit(self.window, pt), self.window.dtype)
                b.store(value, _element(b, buffer, b.add(base, j), st), align=K.itemsize(self.window.dtype))

            sweep_vectors(b, vec, i64(0), footprint, store)

        nest(b, [(i64(0), i64(n)) for n in outer], row)

        def read(start, rix: list[ir.Value]) -> dict:
            at = b.add(b.mul(self._row(b, outer, rix[:-1]), i64(self.stride)),
                       b.add(b.mul(b.sub(start, lo), i64(self.cp)), b.mul(rix[-1], i64(self.cr))))
            span = ir.VectorType(st, vec.width * self.cp)
            v = b.load(_element(b, buffer, at, st), typ=span, align=K.itemsize(self.window.dtype))
            if self.cp > 1:
                v = b.shuffle_vector(v, ir.Constant(span, ir.Undefined), ir.Constant(
                    ir.VectorType(I32, vec.width), [self.cp * i for i in range(vec.width)]))
            return {self.window: vec.from_storage(v, self.window.dtype)}

        return read

    @staticmethod
    def _row(b: ir.IRBuilder, ranges, rix: list[ir.Value]) -> ir.Value:
        """The buffer row of the outer reduction indices ``rix``: row-major."""
        index = i64(0)
        for n, v in zip(ranges, rix):
            index = b.add(b.mul(index, i64(n)), v)
        return index


def _element(b: ir.IRBuilder, buffer, at: ir.Value, st: ir.Type) -> ir.Value:
    """A pointer to ``buffer[at]`` that vectors load and store through."""
    ptr = b.gep(buffer, [at], source_etype=st)
    ptr.type = ir.PointerType()  # llvmlite types a GEP by its element
    return ptr


def plan(kernel: K.Kernel, lanes: int, block: int, tiling: Tiling, span: int) -> Staging | None:
    """The staging of a window-order kernel of ``lanes`` lanes in blocks of ``block`` vectors,
    cut in workgroups by ``tiling``; None where it does not apply (above)."""
    if not lanes or len(kernel.results) != 1 or kernel.loop_ranges[-1] < MIN_ROW_TAPS:
        return None
    folds = K.fold_pattern(kernel.results)
    if folds is None:
        return None
    p, r = kernel.num_parallel - 1, len(kernel.loop_ranges) - 1
    steps = {(ix.coeffs[p], ix.coeffs[r]) for e in K.walk(folds[0][1]) if isinstance(e, K.Load)
             for ix in e.index if ix.coeffs[p] and ix.coeffs[r]}
    if len(steps) != 1:
        return None
    (cp, cr), = steps
    if cp <= 0 or cr <= 0 or min(cp, cr) != 1 or cp > max(1, span):
        return None
    window = W.window_of(kernel, folds[0][1], (W.Pair(p, r, cp, cr),), rows=True)
    if window is None or isinstance(window, K.Load):
        return None
    taps = kernel.loop_ranges[r]
    # a row's last block may start its vectors past the row's end: their lanes (all masked off)
    # still load, within the buffer's row
    stride = cp * (tiling.tile[-1] - 1) + cr * (taps - 1) + 1 + block * lanes * cp
    if math.prod(kernel.reduction_ranges[:-1]) * stride * K.itemsize(window.dtype) > MAX_BYTES:
        return None
    return Staging(window, cp, cr, stride)
