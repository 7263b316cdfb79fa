"""The kernel IR: one dispatch region, the unit that every codegen backend compiles.

Dispatch-region formation (``pyree.compiler.flow``) turns each fused region of linalg-on-tensors
into one ``Kernel``; backends (``pyree.compiler.codegen.*``) lower a ``Kernel`` without looking at
MLIR. Keeping this small and target-neutral is what lets a new backend be one folder.

A kernel is a loop nest over ``loop_ranges`` (parallel dims first, then reduction dims) whose
body computes scalar expressions from loads of its bindings and stores them through ``Result``s:

    for p in parallel dims:                      # backends tile, vectorize, spread over workgroups
        acc_k = eval(result_k.init)              # reductions only; may load, never uses Acc
        for r in reduction dims:
            acc_k = eval(result_k.value)         # Acc(k) is acc_k before this step
        store result_k.binding[result_k.index] = eval(result_k.epilogue with Acc(k) = acc_k)

With no reduction dims, ``value`` is the stored value (no ``Acc``), ``init`` is None, and
``epilogue`` is None.

A row kernel (softmax, layernorm: one dispatch per chain of row-wise reductions) extends this in
two ways. A reduction may read ``Final(j)``, the value an earlier result j stores, which makes it
a later *phase* over the same reduction range (``phases``); and a ``Result`` with ``row`` set is
stored at every (parallel, reduction) point once all phases are done, from loads and Finals:

    for p in parallel dims:
        for phase in phases(kernel):             # e.g. max; then sum of exp(x - Final(max))
            fold the phase's results over the reduction dims as above; store them
        for r in reduction dims:                 # row results, e.g. exp(x - Final(max)) / Final(sum)
            store row.binding[row.index] = eval(row.value)

Row results come after the reductions in ``Kernel.results``; their index may use every loop and
stores each point's value at its own element (GPU backends store a row's points in parallel).

Every ``Load`` index is affine with a constant term (``AffineExpr``):
enough for projected permutations (elementwise, broadcast, transpose, reductions), slices
(offset, stride) and the fused compositions of those. A ``Gather`` is the one load whose
indices are computed (embedding lookups, ``aten.index``), clamped into range. Expressions are
frozen dataclasses, so equal sub-expressions compare and hash equal and a backend can
value-number them.
"""

from __future__ import annotations

from pyree.compiler.kernel.analysis import (
    FOLDS,
    affine_bounds,
    affine_of,
    bind_sizes,
    contains,
    contiguous_along_parallel,
    contraction_product,
    decided,
    fold_identity,
    fold_pattern,
    fold_product,
    gather_offset,
    has_run_time_sizes,
    interval,
    is_row_kernel,
    lowering_order,
    phases,
    push_constant,
    push_constant_count,
    reads,
    reads_along_outputs,
    scatter_offset,
    size_code,
    within,
)
from pyree.compiler.kernel.evaluate import (
    evaluate,
)
from pyree.compiler.kernel.ir import (
    BINARY_OPS,
    CAST_OPS,
    COMPARE_PREDICATES,
    DTYPES,
    INT_CASTS,
    MAX_DEPTH,
    UNARY_OPS,
    Acc,
    Access,
    AffineExpr,
    Attention,
    Binary,
    Binding,
    Cast,
    Compare,
    Const,
    Expr,
    Final,
    Gather,
    Kernel,
    LineScan,
    LineSort,
    Load,
    LoopIndex,
    Result,
    Scatter,
    Select,
    SizeValue,
    Unary,
    affine_range,
    attention_nodes,
    cast_int,
    cast_keeps,
    compose,
    depth,
    int_bits,
    int_range,
    is_float,
    is_unsigned,
    itemsize,
    line_before,
    line_step,
    map_result,
    merge_loop,
    merge_loop_ranges,
    operands,
    result_nodes,
    result_roots,
    scatter_result,
    size_value,
    swap_loops,
    transform,
    walk,
    wrap,
)

__all__ = [
    "compose",
    "FOLDS",
    "affine_bounds",
    "affine_of",
    "bind_sizes",
    "contains",
    "decided",
    "fold_identity",
    "contraction_product",
    "fold_pattern",
    "reads_along_outputs",
    "fold_product",
    "gather_offset",
    "contiguous_along_parallel",
    "has_run_time_sizes",
    "interval",
    "is_row_kernel",
    "lowering_order",
    "phases",
    "push_constant",
    "push_constant_count",
    "reads",
    "scatter_offset",
    "size_code",
    "within",
    "evaluate",
    "BINARY_OPS",
    "CAST_OPS",
    "COMPARE_PREDICATES",
    "DTYPES",
    "INT_CASTS",
    "MAX_DEPTH",
    "UNARY_OPS",
    "Acc",
    "Attention",
    "Access",
    "AffineExpr",
    "Binary",
    "Binding",
    "Cast",
    "Compare",
    "Const",
    "Expr",
    "Final",
    "Gather",
    "Kernel",
    "LineScan",
    "LineSort",
    "Load",
    "LoopIndex",
    "Result",
    "Scatter",
    "Select",
    "SizeValue",
    "size_value",
    "Unary",
    "affine_range",
    "attention_nodes",
    "line_before",
    "line_step",
    "cast_int",
    "cast_keeps",
    "depth",
    "int_bits",
    "int_range",
    "is_float",
    "is_unsigned",
    "itemsize",
    "map_result",
    "merge_loop",
    "merge_loop_ranges",
    "operands",
    "result_nodes",
    "result_roots",
    "scatter_result",
    "swap_loops",
    "transform",
    "walk",
    "wrap",
]
