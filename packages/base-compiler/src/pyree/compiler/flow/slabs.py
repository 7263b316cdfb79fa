"""Reads of a slab of rows through a view, so that the kernels of an unrolled loop are one kernel.

A model unrolled over time (an LSTM or GRU as torch.export writes it, a decoder over its layers)
repeats the same computation at each step on the step's rows of a larger tensor:
``gates[t, b, j]`` for t = 0, 1, ... After view folding (flow/views.py) each step's kernel reads
its own constant row, ``b3[3, d0, d1]``, so no two steps share a kernel and each is generated
anew (a 30-step, 2-layer LSTM compiled 70 distinct kernels for 138 dispatches). Where every read
of an operand stays inside rows ``[lo, hi]`` of its outermost dim, the kernel reads a view of just
those rows instead (the same bytes, at an offset the dispatch's binding carries) with the rows
renumbered from 0: the steps' kernels become equal and are generated once (flow/kernels.py's
table). Only offsets that are multiples of every buffer's alignment (``ALIGNMENT``) move, so a
binding stays as aligned as the operand it views; run-time shapes, gathers (whose indices may go
anywhere), attention ops and the operand a scatter starts from (copied whole) keep their reads.
"""

from __future__ import annotations

import dataclasses

from pyree.compiler.kernel import (
    AffineExpr,
    Gather,
    Load,
    affine_range,
    itemsize,
    map_result,
    result_nodes,
    scatter_result,
)
from pyree.compiler.sizes import num_elements, static_shape
from pyree.compiler.tensor_program import ALIGNMENT, Function, Generic, Op, Value, View


def read_slabs_through_views(function: Function) -> Function:
    ops: list[Op] = []
    for op in function.ops:
        if isinstance(op, Generic):
            op = _slabbed(op, ops)
        ops.append(op)
    return dataclasses.replace(function, ops=ops)


def _slabbed(op: Generic, ops: list[Op]) -> Generic:
    if op.attention is not None or not static_shape(op.loop_ranges):
        return op
    nodes = [n for r in op.outputs for n in result_nodes(r)]
    scatter = scatter_result(op.outputs)
    for j, value in enumerate(op.inputs):
        if not value.shape or not static_shape(value.shape):
            continue
        if scatter is not None and j == scatter.scatter.start:
            continue  # the whole of it is copied into the result before the scatter runs
        if any(isinstance(n, Gather) and n.binding == j for n in nodes):
            continue
        loads = [n for n in nodes if isinstance(n, Load) and n.binding == j]
        if not loads:
            continue
        if any(not isinstance(n.index[0].const, int) for n in loads):
            continue
        spans = [affine_range(n.index[0], op.loop_ranges) for n in loads]
        lo, hi = min(s[0] for s in spans), max(s[1] for s in spans)
        row_bytes = num_elements(value.shape[1:]) * itemsize(value.dtype)
        # (a read under a Select may range past the dim, never taken there: left alone)
        if lo < 0 or hi >= value.shape[0] or (lo, hi) == (0, value.shape[0] - 1) \
                or lo * row_bytes % ALIGNMENT:
            continue
        rows = Value(value.dtype, (hi - lo + 1, *value.shape[1:]), f"{value.name}_rows{lo}")
        ops.append(View(rows, value, lo * row_bytes, op.location))
        op = _read_rows(op, j, rows, lo)
    return op


def _read_rows(op: Generic, j: int, rows: Value, lo: int) -> Generic:
    def leaf(e):
        if isinstance(e, Load) and e.binding == j:
            first = e.index[0]
            return dataclasses.replace(e, index=(AffineExpr(first.coeffs, first.const - lo), *e.index[1:]))
        return None
    inputs = list(op.inputs)
    inputs[j] = rows
    return dataclasses.replace(op, inputs=inputs, outputs=tuple(map_result(r, leaf) for r in op.outputs))
