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

import math
import struct
from dataclasses import dataclass, field, fields
from typing import Literal, Union

import ml_dtypes
import numpy as np

DTYPES: dict[str, np.dtype] = {
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),  # numpy has none; backends compute it in f32
    "f64": np.dtype(np.float64),
    "i1": np.dtype(np.bool_),  # stored as one byte, 0 or 1
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "ui8": np.dtype(np.uint8),
    "ui16": np.dtype(np.uint16),
    "ui32": np.dtype(np.uint32),
    "ui64": np.dtype(np.uint64),
    "index": np.dtype(np.int64),  # MLIR's index type: 64-bit here
}


def is_float(dtype: str) -> bool:
    return dtype in ("f16", "f32", "f64", "bf16")


def is_unsigned(dtype: str) -> bool:
    return dtype.startswith("ui")


def itemsize(dtype: str) -> int:
    return DTYPES[dtype].itemsize


@dataclass(frozen=True)
class AffineExpr:
    """``sum(coeffs[d] * loop[d]) + const`` over all loops of the kernel."""

    coeffs: tuple[int, ...]
    const: int = 0

    def __call__(self, loop: tuple[int, ...]) -> int:
        return sum(c * i for c, i in zip(self.coeffs, loop)) + self.const

    @classmethod
    def loop(cls, num_loops: int, d: int | None, coeff: int = 1, const: int = 0) -> AffineExpr:
        """``coeff * loop d + const`` over ``num_loops`` loops (``d`` None: the constant)."""
        return cls(tuple(coeff if k == d else 0 for k in range(num_loops)), const)

    @classmethod
    def identity(cls, rank: int) -> tuple[AffineExpr, ...]:
        """Loop k indexes dim k."""
        return tuple(cls.loop(rank, d) for d in range(rank))


def affine_range(ix: AffineExpr, ranges) -> tuple[int, int]:
    """Smallest and largest value of ``ix`` over the loop box ``ranges`` (all non-empty)."""
    lo = ix.const + sum(min(0, c * (n - 1)) for c, n in zip(ix.coeffs, ranges))
    hi = ix.const + sum(max(0, c * (n - 1)) for c, n in zip(ix.coeffs, ranges))
    return lo, hi


Access = Literal["read", "write", "read_write"]


@dataclass(frozen=True)
class Binding:
    """A buffer the kernel reads or writes: dense, row-major, starting at the binding's offset."""

    dtype: str
    shape: tuple[int, ...]
    access: Access

    @property
    def num_bytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * itemsize(self.dtype)


# ---- scalar expressions ---------------------------------------------------------------------

UNARY_OPS = frozenset({
    "neg", "abs", "exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "tanh",
    "sin", "cos", "tan", "atan", "erf", "floor", "ceil", "round", "roundeven", "trunc",
    "sign", "not",  # not: bitwise not for ints, logical not for i1
    "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh", "cbrt", "erfc",
})
BINARY_OPS = frozenset({
    "add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "copysign",
    "and", "or", "xor", "shl", "shr",  # shr is arithmetic for signed, logical for unsigned dtypes
})
# Float predicates are ordered unless prefixed "u" (unordered); ints use the operand dtype's signedness.
COMPARE_PREDICATES = frozenset({
    "eq", "ne", "lt", "le", "gt", "ge", "ueq", "une", "ult", "ule", "ugt", "uge", "ord", "uno",
})
# Casts name their source and target by the dtypes; only the conversion kind is spelled.
CAST_OPS = frozenset({
    "fptosi", "fptoui", "sitofp", "uitofp", "fpext", "fptrunc", "extsi", "extui", "trunci",
    "bitcast",
})


def _hash_once(cls):
    """Expressions are trees hashed at every set or dict use (``walk``, value numbering, fusion);
    the dataclass hash re-hashes the whole subtree each time, which made forming MobileNet's
    dispatch regions quadratic. The hash is kept on the node after its first use. Hashing and
    equality walk the tree with a stack, not by recursion: a chain of a few hundred fused ops
    is deeper than Python's recursion limit."""
    names = tuple(f.name for f in fields(cls) if f.compare)

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            if any(isinstance(c, _TREES) and "_hash" not in c.__dict__ for c in operands(self)):
                for node in _unhashed_below(self):  # deepest first: each hashes kept hashes
                    hash(node)
            h = hash((cls.__name__, *(getattr(self, n) for n in names)))
            object.__setattr__(self, "_hash", h)
        return h

    cls.__hash__ = __hash__
    cls.__eq__ = _same_tree
    cls._compared = names
    return cls


def _unhashed_below(root) -> list:
    """The strict sub-expressions of ``root`` whose hash is not kept yet, operands first."""
    order, stack, seen = [], [(root, False)], set()
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        stack.append((node, True))
        for child in operands(node):
            if id(child) not in seen and isinstance(child, _TREES) and "_hash" not in child.__dict__:
                seen.add(id(child))
                stack.append((child, False))
    return order[:-1]


def _same_tree(self, other) -> bool:
    """Structural equality of two expressions (the dataclass ``__eq__``: same class, equal
    fields), pair by pair from a stack; unequal kept hashes answer at once."""
    stack = [(self, other)]
    while stack:
        a, b = stack.pop()
        if a is b:
            continue
        if a.__class__ is not b.__class__:
            return False
        if not isinstance(a, _TREES):
            if a != b:
                return False
            continue
        if hash(a) != hash(b):
            return False
        for name in a._compared:
            x, y = getattr(a, name), getattr(b, name)
            if isinstance(x, _TREES):
                stack.append((x, y))
            elif name == "index" and isinstance(a, Gather):
                if len(x) != len(y):
                    return False
                stack.extend(zip(x, y))
            elif x != y:
                return False
    return True


@_hash_once
@dataclass(frozen=True)
class Load:
    binding: int
    index: tuple[AffineExpr, ...]  # one per binding dim; rank-0 bindings have ()
    dtype: str


@_hash_once
@dataclass(frozen=True)
class Gather:
    """A load at computed indices: one integer expression (any int dtype or index) per binding
    dim. MLIR leaves an out-of-range index undefined; pyree never reads out of bounds, so each
    index is clamped into [0, dim - 1] (``gather_offset``) and an out-of-range index reads the
    nearest edge element."""

    binding: int
    index: tuple[Expr, ...]  # one per binding dim; rank-0 bindings have ()
    dtype: str


@dataclass(frozen=True, eq=False)
class Const:
    """Equal when bit-equal: -0.0 is not 0.0 (which would let value numbering or kernel sharing
    swap one for the other), and a NaN equals the same NaN."""

    value: Union[float, int, bool]
    dtype: str

    def _key(self):
        v = self.value
        return (self.dtype, struct.pack("<d", float(v)) if is_float(self.dtype) else v)

    def __eq__(self, other) -> bool:
        return isinstance(other, Const) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(frozen=True)
class LoopIndex:
    """linalg.index: the current value of loop ``dim`` (dtype index)."""

    dim: int
    dtype: str = "index"


@dataclass(frozen=True)
class Acc:
    """Result ``result``'s accumulator: before this reduction step (value) or at the end (epilogue)."""

    result: int
    dtype: str


@dataclass(frozen=True)
class Final:
    """The value reduction result ``result`` stores (its epilogue of its last accumulator), read
    by a later phase or a row result of the same kernel. A node of its own, not an ``Acc``: it
    is constant over the reduction, so a fold reading it (``acc + exp(x - Final(0))``) is still
    an associative fold (``fold_pattern``) that backends reduce in parallel."""

    result: int
    dtype: str


@_hash_once
@dataclass(frozen=True)
class Unary:
    op: str
    x: Expr
    dtype: str


@_hash_once
@dataclass(frozen=True)
class Binary:
    op: str
    a: Expr
    b: Expr
    dtype: str


@_hash_once
@dataclass(frozen=True)
class Compare:
    predicate: str
    a: Expr
    b: Expr
    dtype: str = "i1"


@_hash_once
@dataclass(frozen=True)
class Select:
    """``cond ? a : b``. Only the chosen side is evaluated: the other may contain Loads whose
    index is out of range (tensor.pad, insert_slice), so backends must not load it."""

    cond: Expr
    a: Expr
    b: Expr
    dtype: str


@_hash_once
@dataclass(frozen=True)
class Cast:
    op: str
    x: Expr
    dtype: str


Expr = Union[Load, Gather, Const, LoopIndex, Acc, Final, Unary, Binary, Compare, Select, Cast]
_TREES = (Load, Gather, Unary, Binary, Compare, Select, Cast)  # the _hash_once classes


@dataclass(frozen=True)
class Result:
    binding: int
    index: tuple[AffineExpr, ...]  # over the parallel loops only (reduction coeffs are 0)
    value: Expr
    init: Expr | None = None
    epilogue: Expr | None = None
    # A row result: stored at every loop point after the reductions; index over all loops.
    row: bool = False


@dataclass(frozen=True)
class Kernel:
    name: str
    loop_ranges: tuple[int, ...]
    num_parallel: int
    bindings: tuple[Binding, ...]
    results: tuple[Result, ...]
    # Where the region came from, for error messages and --pyree-print-ir-after-all.
    location: str = field(default="", compare=False)

    @property
    def reduction_ranges(self) -> tuple[int, ...]:
        return self.loop_ranges[self.num_parallel:]

    @property
    def parallel_ranges(self) -> tuple[int, ...]:
        return self.loop_ranges[:self.num_parallel]

    @property
    def reductions(self) -> tuple[Result, ...]:
        """The folded results (all but the row results, which come last)."""
        return tuple(r for r in self.results if not r.row)

    @property
    def row_results(self) -> tuple[Result, ...]:
        return tuple(r for r in self.results if r.row)


def is_row_kernel(results: tuple[Result, ...]) -> bool:
    """Whether ``results`` need more than one pass over the reduction range."""
    return any(r.row for r in results) or any(
        isinstance(e, Final) for r in results for root in (r.value, r.init, r.epilogue)
        if root is not None for e in walk(root))


def phases(results: tuple[Result, ...]) -> list[list[int]]:
    """The reduction results (positions) grouped by phase: a result reading ``Final(j)`` folds in
    a phase after j's. A single phase for a kernel without Finals."""
    phase: dict[int, int] = {}
    for k, r in enumerate(results):
        if r.row:
            continue
        reads = [e.result for root in (r.value, r.init, r.epilogue) if root is not None
                 for e in walk(root) if isinstance(e, Final)]
        phase[k] = 1 + max((phase[j] for j in reads), default=-1)
    return [[k for k in phase if phase[k] == n] for n in range(max(phase.values(), default=-1) + 1)]


def walk(expr: Expr):
    """Every sub-expression of ``expr``, operands before users, each distinct one once."""
    seen: set = set()
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, expanded = stack.pop()
        if node in seen:
            continue
        if expanded:
            seen.add(node)
            yield node
            continue
        stack.append((node, True))
        for child in operands(node):
            if child not in seen:
                stack.append((child, False))


# Fusion stops before an expression nests deeper than this (a longer chain of elementwise ops
# becomes several kernels), and one op may hold twice as many levels (input/checks.py). Some
# passes recurse on expressions, and a backend expands a math function into up to ~60 levels of
# arithmetic: the bound keeps every walk far from Python's recursion limit and a kernel's code
# size (and its compile time) linear in the ops.
MAX_DEPTH = 64


def depth(expr: Expr) -> int:
    """The number of nodes on the longest path from ``expr`` down to a leaf (a leaf is 1),
    kept on each node as it is computed."""
    known = expr.__dict__.get("_depth") if isinstance(expr, _TREES) else 1
    if known is not None:
        return known
    stack = [expr]
    while stack:
        node = stack[-1]
        pending = [c for c in operands(node) if isinstance(c, _TREES) and "_depth" not in c.__dict__]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        d = 1 + max((c.__dict__["_depth"] if isinstance(c, _TREES) else 1 for c in operands(node)),
                    default=0)
        object.__setattr__(node, "_depth", d)
    return expr.__dict__["_depth"]


def lowering_order(expr: Expr, done, eager=None) -> list[Expr]:
    """The sub-expressions of ``expr`` (``expr`` last) that a memoized recursive lowering
    reaches through ``eager(node)`` (default: every operand but a Select's arms, which a
    backend may branch around) and has not in ``done``, in the order it lowers them: operands
    left to right, each before its users. A backend that lowers these first recurses one level
    per Select instead of once per node: a fused chain with its math expanded nests thousands
    of nodes deep."""
    eager = eager or _eager
    order, seen = [], set()
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
        elif node not in seen and node not in done:
            seen.add(node)
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(eager(node)))
    return order


def _eager(e: Expr) -> tuple[Expr, ...]:
    return (e.cond,) if isinstance(e, Select) else operands(e)


def contains(expr: Expr, hit, memo: dict) -> bool:
    """Whether some node of ``expr`` satisfies ``hit``. ``memo`` (node -> answer) is the
    caller's to keep across calls: asked of every Select's arms, where each arm holds the
    whole chain below it, walking afresh made a deep kernel's lowering quadratic."""
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, expanded = stack.pop()
        if node in memo:
            continue
        if expanded:
            memo[node] = bool(hit(node)) or any(memo[c] for c in operands(node))
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in operands(node) if c not in memo)
    return memo[expr]


def operands(expr: Expr) -> tuple[Expr, ...]:
    if isinstance(expr, Unary) or isinstance(expr, Cast):
        return (expr.x,)
    if isinstance(expr, (Binary, Compare)):
        return (expr.a, expr.b)
    if isinstance(expr, Select):
        return (expr.cond, expr.a, expr.b)
    if isinstance(expr, Gather):
        return expr.index
    return ()


def reads(expr: Expr) -> list[Load | Gather]:
    """The Loads and Gathers in ``expr``: everything that reads a binding."""
    return [e for e in walk(expr) if isinstance(e, (Load, Gather))]


FOLDS = ("add", "mul", "max", "min", "and", "or", "xor")


def fold_pattern(results: tuple[Result, ...]) -> list[tuple[str, Expr]] | None:
    """Per result (op, f) when every update is ``Acc <op> f`` with ``f`` free of accumulators: an
    associative fold, which may be split and reassociated (parallel reductions)."""
    out = []
    for k, r in enumerate(results):
        v = r.value
        if not isinstance(v, Binary) or v.op not in FOLDS:
            return None
        if v.a == Acc(k, v.dtype):
            f = v.b
        elif v.b == Acc(k, v.dtype):
            f = v.a
        else:
            return None
        if any(isinstance(e, Acc) for e in walk(f)):
            return None
        out.append((v.op, f))
    return out


def fold_identity(op: str, dtype: str) -> float | int | bool:
    """The value ``x <op> identity == x`` for every x of ``dtype`` (-0.0 for a float sum: -0.0
    + 0.0 is 0.0, so a sum of -0.0s that starts at 0.0 would lose its sign)."""
    if is_float(dtype):
        return {"add": -0.0, "mul": 1.0, "max": -np.inf, "min": np.inf}[op]
    if dtype == "i1":
        return op in ("and", "mul", "min")
    info = np.iinfo(DTYPES[dtype])
    return {"add": 0, "mul": 1, "or": 0, "xor": 0, "and": -1 if info.min < 0 else int(info.max),
            "max": int(info.min), "min": int(info.max)}[op]


def gather_offset(index: tuple[Expr, ...], shape: tuple[int, ...],
                  loop_ranges: tuple[int, ...] = ()) -> Expr:
    """The row-major element offset a Gather of a ``shape`` binding reads, with each index
    clamped into its dim (``loop_ranges`` lets a clamp go where the index is known in range).
    The arithmetic is i32 when the binding has fewer than 2**31 elements (no Int64 needed on
    GPUs for i32 ids), else index; an index is clamped in its own width or wider, so a huge
    i64 index clamps rather than wraps."""
    dtype = "i32" if int(np.prod(shape, dtype=np.int64)) < 2**31 else "index"
    offset: Expr | None = None
    stride = 1
    for ix, n in reversed(list(zip(index, shape))):
        term = _clamped(ix, n, dtype, loop_ranges)
        if stride != 1:
            term = Binary("mul", term, Const(stride, dtype), dtype)
        offset = term if offset is None else Binary("add", term, offset, dtype)
        stride *= n
    return offset if offset is not None else Const(0, dtype)


def _clamped(ix: Expr, n: int, dtype: str, loop_ranges: tuple[int, ...]) -> Expr:
    """``ix`` clamped into [0, n - 1], as ``dtype``; a side is left out where ``ix`` provably
    stays inside it. A widened narrow index is clamped before widening (the same value), so
    i32 ids need no 64-bit arithmetic."""
    while isinstance(ix, Cast) and int_bits(ix.x.dtype) <= int_bits(dtype) and (
            ix.op == "extui" if is_unsigned(ix.x.dtype) or ix.x.dtype == "i1" else ix.op == "extsi"):
        ix = ix.x
    if int_bits(ix.dtype) < int_bits(dtype):
        unsigned = is_unsigned(ix.dtype) or ix.dtype == "i1"
        ix = Cast("extui" if unsigned else "extsi", ix, dtype)
    lo, hi = interval(ix, loop_ranges)
    if lo < 0:
        ix = Binary("max", ix, Const(0, ix.dtype), ix.dtype)
    if hi > n - 1:
        ix = Binary("min", ix, Const(max(n - 1, 0), ix.dtype), ix.dtype)
    if ix.dtype != dtype:  # now in [0, n - 1], which dtype holds
        ix = Cast("trunci" if int_bits(ix.dtype) > int_bits(dtype) else "extui", ix, dtype)
    return ix


def int_bits(dtype: str) -> int:
    """The width of a dtype's values (i1: one bit)."""
    return 1 if dtype == "i1" else 8 * itemsize(dtype)


INT_CASTS = ("extsi", "extui", "trunci", "bitcast")


def int_range(dtype: str) -> tuple[int, int]:
    """The values an integer dtype holds (i1: false and true, 0 and 1)."""
    if dtype == "i1":
        return 0, 1
    info = np.iinfo(DTYPES[dtype])
    return int(info.min), int(info.max)


def cast_keeps(op: str, src: str, dst: str, lo: int, hi: int) -> bool:
    """Whether the integer cast ``op`` from ``src`` to ``dst`` leaves every value in [lo, hi]
    unchanged. Casts act on bits, as MLIR's arith defines them: extsi reads the source as
    signed (an i1 true is -1), extui as unsigned, and trunci and bitcast keep the bits that
    ``dst`` has, which hold the value only where it lies in ``dst``'s range."""
    w = int_bits(src)
    if op == "extsi" and not -(1 << (w - 1)) <= lo <= hi < 1 << (w - 1):
        return False
    if op == "extui" and not 0 <= lo <= hi < 1 << w:
        return False
    dlo, dhi = int_range(dst)
    return dlo <= lo and hi <= dhi


def cast_int(op: str, value: int, src: str, dst: str) -> int:
    """The value integer cast ``op`` gives for ``value`` of ``src``: the kernel IR's (and
    MLIR's) bit semantics, which numpy's conversions do not follow for i1 or mixed signedness."""
    w = int_bits(src)
    raw = int(value) & ((1 << w) - 1)
    if op == "extsi" and raw >> (w - 1):
        raw -= 1 << w
    return wrap(raw, dst)


def wrap(value: int, dtype: str) -> int:
    """The value of integer ``dtype`` whose bits are the low bits of ``value``."""
    low = value & ((1 << int_bits(dtype)) - 1)
    return low - (1 << int_bits(dtype)) if low > int_range(dtype)[1] else low


def decided(e: Compare, loop_ranges: tuple[int, ...]) -> bool | None:
    """The value of an integer comparison that holds (or fails) everywhere in the loop box, by
    the bounds of its sides; None where it depends on the point."""
    if is_float(e.a.dtype) or e.predicate not in ("lt", "le", "gt", "ge", "eq", "ne"):
        return None
    (alo, ahi), (blo, bhi) = interval(e.a, loop_ranges), interval(e.b, loop_ranges)
    if e.predicate in ("gt", "ge"):
        (alo, ahi), (blo, bhi) = (blo, bhi), (alo, ahi)
    strict = e.predicate in ("lt", "gt")
    if e.predicate in ("lt", "le", "gt", "ge"):
        if ahi < blo or (not strict and ahi <= blo):
            return True
        if alo > bhi or (strict and alo >= bhi):
            return False
        return None
    if alo == ahi == blo == bhi:
        return e.predicate == "eq"
    if ahi < blo or bhi < alo:
        return e.predicate == "ne"
    return None


def interval(e: Expr, loop_ranges: tuple[int, ...]) -> tuple[int, int]:
    """Bounds of the integer expression ``e``: tight through loop indices, constants, integer
    casts, add/sub/mul/max/min and division or remainder of a non-negative value by a positive
    constant; the dtype's whole range elsewhere and wherever a step could
    wrap."""
    full = int_range(e.dtype)
    if isinstance(e, Const):
        out = (int(e.value), int(e.value))
    elif isinstance(e, LoopIndex) and e.dim < len(loop_ranges) and loop_ranges[e.dim] > 0:
        out = (0, loop_ranges[e.dim] - 1)
    elif isinstance(e, Cast) and e.op in INT_CASTS and not is_float(e.x.dtype):
        out = interval(e.x, loop_ranges)
        if e.op == "extsi" and e.x.dtype == "i1":  # true is -1
            out = (-out[1], -out[0])
        elif not cast_keeps(e.op, e.x.dtype, e.dtype, *out):
            return full
    elif isinstance(e, Binary) and e.op in ("add", "sub", "mul", "max", "min"):
        a, b = interval(e.a, loop_ranges), interval(e.b, loop_ranges)
        if e.op == "add":
            out = (a[0] + b[0], a[1] + b[1])
        elif e.op == "sub":
            out = (a[0] - b[1], a[1] - b[0])
        elif e.op == "mul":
            corners = [x * y for x in a for y in b]
            out = (min(corners), max(corners))
        else:
            pick = max if e.op == "max" else min
            out = (pick(a[0], b[0]), pick(a[1], b[1]))
    elif isinstance(e, Binary) and e.op in ("div", "rem") and isinstance(e.b, Const) and e.b.value > 0:
        lo, hi = interval(e.a, loop_ranges)
        if lo < 0:
            return full
        c = int(e.b.value)
        out = (lo // c, hi // c) if e.op == "div" else (lo, hi) if hi < c else (0, c - 1)
    else:
        return full
    return out if full[0] <= out[0] and out[1] <= full[1] else full


def evaluate(kernel: Kernel, buffers: list[np.ndarray]) -> None:
    """Reference semantics in numpy, one scalar at a time: slow, exact, for tests of backends."""
    import itertools

    par = kernel.parallel_ranges
    red = kernel.reduction_ranges

    def ev(e: Expr, loop, accs):
        if isinstance(e, Load):
            return buffers[e.binding][tuple(ix(loop) for ix in e.index)]
        if isinstance(e, Gather):
            data = buffers[e.binding]
            return data.reshape(-1)[int(ev(gather_offset(e.index, data.shape), loop, accs))]
        if isinstance(e, Const):
            return DTYPES[e.dtype].type(e.value)
        if isinstance(e, LoopIndex):
            return np.int64(loop[e.dim])
        if isinstance(e, Acc):
            return accs[e.result]
        if isinstance(e, Final):
            return finals[e.result]
        if isinstance(e, Select):  # only the chosen side: the other may load out of range
            return ev(e.a if ev(e.cond, loop, accs) else e.b, loop, accs)
        return _apply(e, [ev(c, loop, accs) for c in operands(e)])

    results = kernel.results
    finals: dict[int, object] = {}
    for p in itertools.product(*[range(n) for n in par]):
        zeros = (0,) * len(red)
        if not red:
            for r in results:
                buffers[r.binding][tuple(ix(p) for ix in r.index)] = ev(r.value, p, None)
            continue
        for phase in phases(results):
            accs = {k: ev(results[k].init, p + zeros, None) for k in phase}
            for rr in itertools.product(*[range(n) for n in red]):
                accs = {k: ev(results[k].value, p + rr, accs) for k in phase}
            for k in phase:
                r = results[k]
                finals[k] = ev(r.epilogue, p + zeros, accs) if r.epilogue is not None else accs[k]
                buffers[r.binding][tuple(ix(p + zeros) for ix in r.index)] = finals[k]
        for rr in itertools.product(*[range(n) for n in red]):
            for r in kernel.row_results:
                buffers[r.binding][tuple(ix(p + rr) for ix in r.index)] = ev(r.value, p + rr, None)


_FLOAT64_UNARY = {
    "asin": np.arcsin, "acos": np.arccos, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
    "acosh": np.arccosh, "atanh": np.arctanh, "cbrt": np.cbrt, "erf": math.erf, "erfc": math.erfc,
}


def _round_half_away(v):
    """Half away from zero (v - trunc(v) is exact, where |v| + 0.5 may round up)."""
    t = np.trunc(v)
    return np.copysign(np.abs(t) + (np.abs(v - t) >= 0.5), v)


def _apply(e: Expr, args: list):
    dt = DTYPES[e.dtype].type
    with np.errstate(all="ignore"):
        if isinstance(e, Unary):
            x = args[0]
            fn = {
                "neg": np.negative, "abs": np.abs, "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1,
                "log": np.log, "log2": np.log2, "log1p": np.log1p, "sqrt": np.sqrt,
                "rsqrt": lambda v: 1 / np.sqrt(v), "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
                "tan": np.tan, "atan": np.arctan, "floor": np.floor, "ceil": np.ceil,
                "round": _round_half_away, "roundeven": np.rint, "trunc": np.trunc,
                "sign": lambda v: np.copysign(np.sign(v), v),  # keeps -0.0
                "not": np.logical_not if e.dtype == "i1" else np.invert,
            }.get(e.op)
            if e.op in _FLOAT64_UNARY:  # computed in float64, then rounded once
                return dt(_FLOAT64_UNARY[e.op](float(x)))
            return dt(fn(x))
        if isinstance(e, Binary):
            a, b = args
            if e.op in ("div", "rem") and not is_float(e.dtype):  # rounded toward zero, exactly
                q = abs(int(a)) // abs(int(b)) * (-1 if (int(a) < 0) != (int(b) < 0) else 1)
                return dt(wrap(q if e.op == "div" else int(a) - q * int(b), e.dtype))
            fn = {
                "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
                "rem": np.fmod, "pow": np.power, "max": np.maximum, "min": np.minimum,
                "atan2": np.arctan2, "copysign": np.copysign, "and": np.bitwise_and,
                "or": np.bitwise_or, "xor": np.bitwise_xor, "shl": np.left_shift,
                "shr": np.right_shift,
            }[e.op]
            return dt(fn(a, b))
        if isinstance(e, Compare):
            a, b = args
            p = e.predicate
            if p == "ord":
                return np.bool_(not (np.isnan(a) or np.isnan(b)))
            if p == "uno":
                return np.bool_(bool(np.isnan(a) or np.isnan(b)))
            unordered = p.startswith("u") and p not in ("uno",)
            base = p[1:] if unordered and p[1:] in ("eq", "ne", "lt", "le", "gt", "ge") else p
            r = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[base]
            if unordered and isinstance(a, np.floating):
                r = r or np.isnan(a) or np.isnan(b)
            return np.bool_(r)
        if isinstance(e, Select):
            c, a, b = args
            return a if c else b
        if isinstance(e, Cast):
            x = args[0]
            if e.op == "bitcast":
                return np.array([x]).view(DTYPES[e.dtype])[0]
            if e.op in INT_CASTS:
                return dt(cast_int(e.op, x, e.x.dtype, e.dtype))
            if e.op == "sitofp" and e.x.dtype == "i1":  # a signed i1's true is -1
                return dt(-int(x))
            return dt(x)
    raise TypeError(f"not an expression: {e!r}")
