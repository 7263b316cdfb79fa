"""Arithmetic that a broadcast repeats, computed once per distinct value (CPU targets).

torch-mlir often broadcasts an operand before the arithmetic on it: grid_sample expands its grid
across the image's channels, then computes each output pixel's coordinates, corners and weights
(~100 operations) at every channel, and fusion made that one kernel that recomputed them 64
times (0.19x PyTorch's CPU). Two rules undo it on the CPU, where the repeated work is the time;
GPU targets keep the one kernel, whose recomputation costs less than a launch.

- ``narrow_broadcasts`` (a pass, before fuse-regions): an elementwise op none of whose reads
  depends on some loop writes the same value all along that loop. The loop is dropped from it
  (the result loses that dim) and each reader loads it without that position, under a
  broadcast. Ops in program order, so a chain of them narrows in one pass.
- ``costly_under_broadcast`` (fuse-regions' rule, once producers have fused within their own
  loop space, ``arithmetic_under_broadcast`` telling which pairs wait): a producer that its reader reads
  under a broadcast of at least ``BROADCAST`` times its own points keeps its kernel where
  inlining would repeat at least ``MIN_WORK`` operations, each point's at least ``MIN_NODES``;
  cheaper producers (a mask, a scale) are still recomputed where read.
- ``merge_broadcast_siblings`` (after fusion): the kernels so kept that share an input and
  loop space become one kernel of several results (grid_sample's twelve index and weight
  kernels, one pass over the grid instead of twelve small dispatches).
"""

from __future__ import annotations

import dataclasses
import math

from pyree.compiler.flow.rewrite import (
    dedupe_inputs,
    is_data_movement,
    is_guarded_data_movement,
    map_results,
    permutation_dims,
    remap_loops,
)
from pyree.compiler.kernel import AffineExpr, Const, Expr, Gather, Load, LoopIndex, walk
from pyree.compiler.sizes import is_static
from pyree.compiler.tensor_program import (
    Function,
    Generic,
    Op,
    Value,
    defined_by,
    is_line_walk,
    is_scatter,
    read_by,
    sources_of,
)

BROADCAST = 4
MIN_NODES = 16
MIN_WORK = 1 << 18  # ~50 us of scalar work: ten times what a small dispatch costs on local-task
COSTLY_OPS = frozenset({"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
                        "tan", "tanh", "asin", "acos", "atan", "atan2", "erf", "pow", "sqrt",
                        "rsqrt", "cbrt", "div", "fptosi", "fptoui"})


def narrow_broadcasts(function: Function) -> Function:
    ops = list(function.ops)
    results = set(function.results)
    for k in range(len(ops)):
        op = ops[k]
        free = _free_loops(op) if _plain_elementwise(op) else []
        if not free:
            continue
        readers = [i for i, other in enumerate(ops) if any(v in op.results for v in read_by(other))]
        if any(v in results for v in op.results) or not all(_loads_only(ops[i], op.results)
                                                            for i in readers):
            continue
        narrow, dropped = _narrowed(op, free)
        ops[k] = narrow
        renamed = dict(zip(op.results, narrow.results))
        for i in readers:
            ops[i] = _read_narrowed(ops[i], renamed, dropped)
    return dataclasses.replace(function, ops=ops)


def arithmetic_under_broadcast(reader: Generic, producer: Generic) -> bool:
    """Whether ``reader`` reads ``producer`` under a broadcast of at least ``BROADCAST`` and
    ``producer`` computes (it is not data movement: a pad's bounds check and load cost less
    than a pass of its own)."""
    ours, theirs = reader.loop_ranges, producer.loop_ranges
    if not all(map(is_static, (*ours, *theirs))) or math.prod(ours) < BROADCAST * math.prod(theirs):
        return False
    return not all(is_data_movement(r.value) or is_guarded_data_movement(r.value)
                   for r in producer.outputs)


def costly_under_broadcast(reader: Generic, producer: Generic) -> bool:
    if not arithmetic_under_broadcast(reader, producer):
        return False
    points, reads = math.prod(producer.loop_ranges), math.prod(reader.loop_ranges)
    work = sum(_work(r.value) for r in producer.outputs)
    return work >= MIN_NODES and work * (reads - points) >= MIN_WORK


def _work(e: Expr) -> int:
    """Operations of an expression, a transcendental function, a division or a float's
    conversion to an integer (one scalar instruction a lane for i64 on AVX2) counted as 8."""
    return sum(8 if getattr(n, "op", None) in COSTLY_OPS else 1 for n in walk(e)
               if not isinstance(n, (Load, Gather, Const)))


def _plain_elementwise(op) -> bool:
    return (isinstance(op, Generic) and op.num_parallel == len(op.loop_ranges)
            and op.attention is None and not is_scatter(op) and not is_line_walk(op)
            and all(r.init is None and r.epilogue is None and not r.row
                    and permutation_dims(r.index, len(op.loop_ranges)) is not None
                    for r in op.outputs))


def _free_loops(op: Generic) -> list[int]:
    """The loops of static extent above 1 that no load, gather or loop index depends on."""
    used: set[int] = set()
    for r in op.outputs:
        for e in walk(r.value):
            if isinstance(e, Load):
                used.update(d for ix in e.index for d, c in enumerate(ix.coeffs) if c)
            elif isinstance(e, LoopIndex):
                used.add(e.dim)
    return [d for d, n in enumerate(op.loop_ranges)
            if d not in used and is_static(n) and n > 1]


def _loads_only(reader, values: list[Value]) -> bool:
    """``reader`` reads ``values`` only by plain loads of an op a narrowed read can rewrite."""
    if not _rewritable(reader):
        return False
    bindings = {b for b, v in enumerate(reader.inputs) if v in values}
    return not any(isinstance(e, Gather) and e.binding in bindings
                   for r in reader.outputs for root in (r.value, r.init, r.epilogue)
                   if root is not None for e in walk(root))


def _rewritable(reader) -> bool:
    return (isinstance(reader, Generic) and reader.attention is None and not is_scatter(reader)
            and not is_line_walk(reader))


def _narrowed(op: Generic, free: list[int]) -> tuple[Generic, dict[Value, tuple[int, ...]]]:
    """``op`` without the ``free`` loops, and the result positions each of its values lost."""
    kept = [d for d in range(len(op.loop_ranges)) if d not in free]
    n = len(kept)
    loop_map = tuple(AffineExpr.loop(n, kept.index(d) if d in kept else None)
                     for d in range(len(op.loop_ranges)))
    outputs, results, dropped = [], list(op.results), {}
    for r in op.outputs:
        dims = permutation_dims(r.index, len(op.loop_ranges))
        gone = tuple(p for p, d in enumerate(dims) if d in free)
        value = op.results[r.binding]
        results[r.binding] = Value(value.dtype, tuple(s for p, s in enumerate(value.shape)
                                                      if p not in gone), value.name)
        dropped[value] = gone
        index = tuple(AffineExpr.loop(n, kept.index(dims[p])) for p in range(len(dims))
                      if p not in gone)
        outputs.append(dataclasses.replace(
            r, index=index, value=remap_loops(r.value, loop_map, n, lambda b: b)))
    narrow = dataclasses.replace(op, results=results, outputs=tuple(outputs),
                                 loop_ranges=tuple(op.loop_ranges[d] for d in kept),
                                 num_parallel=n)
    return narrow, dropped


def _read_narrowed(reader: Generic, renamed: dict[Value, Value],
                   dropped: dict[Value, tuple[int, ...]]) -> Generic:
    gone = {b: dropped[v] for b, v in enumerate(reader.inputs) if v in renamed}

    def leaf(e: Expr) -> Expr | None:
        if isinstance(e, Load) and e.binding in gone:
            return Load(e.binding, tuple(ix for p, ix in enumerate(e.index)
                                         if p not in gone[e.binding]), e.dtype)
        return None
    return dataclasses.replace(reader, inputs=[renamed.get(v, v) for v in reader.inputs],
                               outputs=map_results(reader.outputs, leaf))


def merge_broadcast_siblings(ops: list[Op]) -> list[Op]:
    """``ops`` with each elementwise op whose results only broadcast readers read merged into
    an earlier such op of the same static loop space that shares a (non-scalar) input with it,
    where it reads nothing the earlier one writes or anything defined after it."""
    ops = list(ops)
    readers: dict[Value, list[Op]] = {}
    for op in ops:
        for v in read_by(op):
            readers.setdefault(v, []).append(op)

    def broadcast_only(op) -> bool:
        return (_plain_elementwise(op) and all(map(is_static, op.loop_ranges))
                and all(readers.get(v) and all(
                    isinstance(r, Generic) and r is not op and arithmetic_under_broadcast(r, op)
                    for r in readers[v]) for v in op.results))
    i = 0
    while i < len(ops):
        a = ops[i]
        if broadcast_only(a):
            before = {v for op in ops[:i] for v in defined_by(op)}
            for k in range(len(ops) - 1, i, -1):
                b = ops[k]
                if broadcast_only(b) and b.loop_ranges == a.loop_ranges \
                        and any(v in a.inputs for v in b.inputs if v.shape) \
                        and not any(v in a.results for v in b.inputs) \
                        and all(v in before or not _defined_in(v, ops) for v in b.inputs):
                    a = _merged(a, b)
                    del ops[k]
            ops[i] = a
        i += 1
    return ops


def _defined_in(value: Value, ops: list[Op]) -> bool:
    return any(value in defined_by(op) for op in ops)


def _merged(a: Generic, b: Generic) -> Generic:
    """One elementwise op computing ``a``'s results, then ``b``'s."""
    base, first = len(a.inputs), len(a.results)
    n = len(a.loop_ranges)
    same = tuple(AffineExpr.loop(n, d) for d in range(n))
    outputs = tuple(dataclasses.replace(r, binding=first + r.binding,
                                        value=remap_loops(r.value, same, n, lambda x: base + x))
                    for r in b.outputs)
    return dedupe_inputs(dataclasses.replace(
        a, inputs=[*a.inputs, *b.inputs], results=[*a.results, *b.results],
        outputs=a.outputs + outputs, sources=sources_of(a, b)))
