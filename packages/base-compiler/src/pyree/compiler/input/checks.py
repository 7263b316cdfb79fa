"""What every Generic a lowering rule emits must satisfy, checked where the op is still known.

A verified MLIR op can still hold attributes that contradict its types (an iota dimension past
the rank, a window that reads past the operand, a negative dilation). The rules build indices
from those attributes; checked here, such an op is refused at its ``file:line:col`` instead of
failing in a later stage with no location, or worse, compiling a kernel that reads outside its
operand. Loads inside a Select's arms are exempt from the range check: they are evaluated only
where chosen (a pad's or a concat's arms), and every backend guards them.
"""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import (
    MAX_DEPTH,
    AffineExpr,
    Gather,
    Load,
    LoopIndex,
    Select,
    affine_range,
    depth,
    operands,
)
from pyree.compiler.sizes import is_static, nonnegative
from pyree.compiler.tensor_program import Generic

# Selects nested in one another's arms that one op may hold (a concat of N parts nests N - 1).
# Backends lower a Select whose arm may load out of range as a branch around each arm,
# recursively, a few Python frames per level: far deeper nesting ran out of stack.
MAX_SELECT_NESTING = 100
# Levels of one op's expression (a linalg body's chain of ops). Fusion keeps kernels within
# MAX_DEPTH; one op may hold twice that, which every pass walks well inside Python's
# recursion limit, whether it walks iteratively or not.
MAX_OP_DEPTH = 2 * MAX_DEPTH


def check_generic(op: Generic) -> None:
    n = len(op.loop_ranges)
    empty = 0 in op.loop_ranges
    at_init = op.loop_ranges[:op.num_parallel] + (1,) * (n - op.num_parallel)
    for r in op.outputs:
        if not 0 <= r.binding < len(op.results):
            _refuse(op, f"stores result {r.binding} of {len(op.results)}")
        if r.scatter is None:
            _check_index(op, r.index, op.results[r.binding].shape, at_init if not r.row else
                         op.loop_ranges, "writes", empty)
        else:
            start = op.inputs[r.scatter.start]
            if len(r.scatter.place) != len(op.results[r.binding].shape) \
                    or (start.dtype, start.shape) != (op.results[r.binding].dtype,
                                                      op.results[r.binding].shape):
                _refuse(op, "scatters into a result unlike its original")
        places = r.scatter.place if r.scatter is not None else ()
        for root, ranges in ((r.value, op.loop_ranges), (r.init, at_init), (r.epilogue, at_init),
                             *((p, op.loop_ranges) for p in places)):
            if root is not None:
                _check_expr(op, root, ranges, empty)
                if depth(root) > MAX_OP_DEPTH:
                    raise CompileError(
                        f"this '{op.origin}' computes each element through {depth(root)} levels "
                        f"of operations; pyree compiles at most {MAX_OP_DEPTH} in one op: split "
                        "it into several ops (each is fused with the next where that pays)",
                        op.location)


def _check_expr(op: Generic, root, ranges: tuple[int, ...], empty: bool) -> None:
    """Walks ``root`` with, per node, the number of Select arms around it."""
    seen: set = set()
    stack = [(root, 0)]
    while stack:
        e, nesting = stack.pop()
        if (e, nesting) in seen:
            continue
        seen.add((e, nesting))
        if nesting > MAX_SELECT_NESTING:
            raise CompileError(
                f"'{op.origin}' nests more than {MAX_SELECT_NESTING} selects in one element's "
                "value (a concatenation of more parts, or a chain of selects); pyree compiles "
                "at most that many in one op: split it into smaller ops", op.location)
        if isinstance(e, LoopIndex) and not 0 <= e.dim < len(op.loop_ranges):
            _refuse(op, f"reads the index of loop {e.dim} of {len(op.loop_ranges)}")
        if isinstance(e, (Load, Gather)) and not 0 <= e.binding < len(op.inputs):
            _refuse(op, f"reads operand {e.binding} of {len(op.inputs)}")
        if isinstance(e, Load):
            _check_index(op, e.index, op.inputs[e.binding].shape, ranges, "reads",
                         empty or nesting > 0)
        if isinstance(e, Select):
            stack += [(e.cond, nesting), (e.a, nesting + 1), (e.b, nesting + 1)]
        else:
            stack += [(c, nesting) for c in operands(e)]


def _check_index(op: Generic, index: tuple[AffineExpr, ...], shape: tuple[int, ...],
                 ranges: tuple[int, ...], what: str, unchecked: bool) -> None:
    if len(index) != len(shape) or any(len(ix.coeffs) != len(op.loop_ranges) for ix in index):
        _refuse(op, f"{what} a {len(shape)}-d tensor with a {len(index)}-d index")
    if unchecked:
        return
    for dim, (ix, size) in enumerate(zip(index, shape)):
        lo, hi = affine_range(ix, ranges)
        if not all(is_static(v) for v in (lo, hi, size)):
            continue  # not proven here: each kernel checks its accesses per call instead
        if not (nonnegative(lo) and nonnegative(size - 1 - hi)):
            _refuse(op, f"{what} elements [{lo}, {hi}] of a dim of size {size} (dim {dim} of "
                    f"{'x'.join(map(str, shape))})")


def _refuse(op: Generic, what: str):
    raise CompileError(f"this '{op.origin}' {what}: its attributes and types do not fit "
                       "together", op.location)
