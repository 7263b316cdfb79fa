"""The kernel IR's data: dtypes, affine indices, bindings, the frozen expression nodes, results and
kernels, and the walks over expressions that every pass and backend uses."""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Literal, Union

import numpy as np
from pyree.compiler.sizes import is_static, num_elements


class _Dtypes(dict):
    """The numpy dtype of each element type. bf16's, which numpy lacks, comes from ml_dtypes on
    first use (held as None until then): importing ml_dtypes 0.7 takes about half a second, as
    long as every other import of a compile together, which a program without bf16 need not
    pay."""

    def __getitem__(self, key: str) -> np.dtype:
        dtype = dict.__getitem__(self, key)
        if dtype is None:
            import ml_dtypes
            self[key] = dtype = np.dtype(ml_dtypes.bfloat16)  # backends compute it in f32
        return dtype

    def get(self, key: str, default=None):
        return self[key] if key in self else default


DTYPES: dict[str, np.dtype] = _Dtypes({
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": None,
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
})


def is_float(dtype: str) -> bool:
    return dtype in ("f16", "f32", "f64", "bf16")


def is_unsigned(dtype: str) -> bool:
    return dtype.startswith("ui")


def itemsize(dtype: str) -> int:
    return 2 if dtype == "bf16" else DTYPES[dtype].itemsize  # bf16's without importing ml_dtypes


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
    lo = ix.const + sum(c * (n - 1) for c, n in zip(ix.coeffs, ranges) if c < 0)
    hi = ix.const + sum(c * (n - 1) for c, n in zip(ix.coeffs, ranges) if c > 0)
    return lo, hi


Access = Literal["read", "write", "read_write"]


def compose(expr: AffineExpr, loop_map: tuple[AffineExpr, ...], num_new_loops: int) -> AffineExpr:
    """``expr`` over old loops, with each old loop d replaced by ``loop_map[d]`` over new loops."""
    coeffs = [0] * num_new_loops
    const = expr.const
    for c, sub in zip(expr.coeffs, loop_map):
        if c == 0:
            continue
        const += c * sub.const
        for j, s in enumerate(sub.coeffs):
            coeffs[j] += c * s
    return AffineExpr(tuple(coeffs), const)


@dataclass(frozen=True)
class Binding:
    """A buffer the kernel reads or writes: dense, row-major, starting at the binding's offset.
    A dim may be a run-time ``Size`` (``pyree.compiler.sizes``), and so may ``num_bytes``."""

    dtype: str
    shape: tuple[int, ...]
    access: Access

    @property
    def num_bytes(self):
        n = num_elements(self.shape)
        return (int(n) if is_static(n) else n) * itemsize(self.dtype)


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
    fields), pair by pair from a stack; unequal kept hashes answer at once. Each pair of nodes
    is compared once: expressions are DAGs (``p * p`` of a ``p`` built the same way), and a
    chain of n such squarings compared as trees took 2^n steps."""
    stack, compared = [(self, other)], set()
    while stack:
        a, b = stack.pop()
        if a is b or (id(a), id(b)) in compared:
            continue
        compared.add((id(a), id(b)))
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
class SizeValue:
    """A run-time size read as an integer (a linalg body comparing ``tensor.dim`` with 1 to
    pick a broadcast). In a Generic, ``size`` is a ``sizes.Size`` over the function's symbols;
    outlining makes it the kernel's push constant k (symbol ``pk``), which every dispatch
    passes, so the value is the same at every point of the loop nest."""

    size: object  # sizes.Size
    dtype: str = "index"


def size_value(size, dtype: str = "index") -> Expr:
    """A SizeValue of ``size``, or the constant it is."""
    return SizeValue(size, dtype) if not is_static(size) else Const(size, dtype)


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
    index is out of range (tensor.pad, insert_slice), so backends must not load it. ``lazy``:
    one side is costly and rarely taken (sin's Payne-Hanek reduction of huge arguments), so a
    GPU backend branches around it rather than computing both sides and selecting."""

    cond: Expr
    a: Expr
    b: Expr
    dtype: str
    lazy: bool = False


@_hash_once
@dataclass(frozen=True)
class Cast:
    op: str
    x: Expr
    dtype: str


Expr = Union[Load, Gather, Const, LoopIndex, SizeValue, Acc, Final, Unary, Binary, Compare, Select,
             Cast]
_TREES = (Load, Gather, Unary, Binary, Compare, Select, Cast)  # the _hash_once classes


@dataclass(frozen=True)
class Scatter:
    """Where a scatter result (torch's index_add, scatter_add, index_put) writes: at ``place``,
    one index-typed expression per dim of its binding, computed at each loop point, instead of
    at an affine ``index``. A kernel with a scatter result has only parallel loops (one per
    update element) and that one result; the binding is read-modify-write and holds, before
    the kernel runs, a copy of input binding ``start`` (the host program copies it). Per loop
    point, in order:

        if place is inside the binding:  out[place] = value   # Acc(0): out[place] before

    so a repeated place combines in update order. Backends run the points in any order and at
    once, each as one atomic read-modify-write, so ``value`` is one of: one commutative,
    associative op of ``Acc(0)`` and an update that does not read Acc (the atomic add of a
    scatter_add); ``Select(cond, update, Acc(0))`` whose ``cond`` (not reading Acc) holds at
    most once per place (a store by the one winner of the place); or the update alone where
    places never repeat (a plain store)."""

    place: tuple[Expr, ...]
    start: int
    # Loops along which two points never share a place (one dim's place is the loop itself: a
    # slice dim that no index moves), which normalize records as it flattens ``place``; a
    # backend may cut its work along them only, each place then combined by one thread in
    # update order, with no atomics.
    disjoint: tuple[int, ...] = ()


@dataclass(frozen=True)
class Result:
    binding: int
    index: tuple[AffineExpr, ...]  # over the parallel loops only (reduction coeffs are 0)
    value: Expr
    init: Expr | None = None
    epilogue: Expr | None = None
    # A row result: stored at every loop point after the reductions; index over all loops.
    row: bool = False
    # A scatter result: stored at computed places (``Scatter``); ``index`` is then ().
    scatter: Scatter | None = None


@dataclass(frozen=True)
class Attention:
    """Softmax attention as one loop nest (flow/attention.py), which a Generic or Kernel holds
    beside its one ``Result`` O. The loops are the parallel ones (the softmax rows' loops, then
    O's column ``e``), then two reductions: the keys ``j`` and the score's contraction ``c``.
    Per parallel point:

        for j:                                           # the score, a contraction over c
            acc = score_init;  for c: acc = score_step   # score_step reads Acc(0): acc
            s_j = score (Acc(0) = acc)                    # scale, mask, bias of the loops
        m = max_j s_j;  l = sum_j exp(s_j - m)
        p_j = exp(s_j - m) / l rounded to p_dtype         # masked_zero: 0 where every s_j is -inf
        acc = O.init;  for j: acc = acc + p_j * O.value  # O.value: V at (j, e)
        store O.epilogue (Acc(0) = acc)

    The inits and epilogues are evaluated at reduction point zero, as a Result's are. Nothing of
    the score depends on ``e``: backends compute it once per row.

    A ``partial`` op (a chunk of the keys, flash-decoding's first half) stores its softmax's
    state instead, for a combine to finish: result 0 ``o = O.init + sum_j w_j * O.value`` with
    ``w_j = exp(s_j - m)`` rounded to p_dtype, results 1 and 2 ``m`` and ``l`` (their expressions
    unused), where a row whose every s_j is -inf has m = -inf, every w_j = 0 and l = 0."""

    score_init: Expr
    score_step: Expr
    score: Expr
    masked_zero: bool
    p_dtype: str
    e: int  # the loop of O's column, the last parallel loop
    partial: bool = False


@dataclass(frozen=True)
class LineSort:
    """Each element's rank along a line, which a target that walks lines (``Backend.line_walks``)
    may compute by sorting the line (input/sort_scan.py). The Generic or Kernel holding it has
    one Result over the parallel loops, of ``rank_dtype``, whose one reduction loop ``j`` runs
    along the line (parallel loop ``d``, the element's own place ``i``), counting
    ``Acc(0) + Select(before, 1, 0)``: ``before`` (``line_before``) says that the line's element
    at ``j`` goes before the one at ``i``, a strict total order (ties by place). Counted, every
    rank is exact; sorted, the ranks below ``k`` are, and the others may be any value from ``k``
    up (a top-k's scatter skips them). Flow passes leave such an op as it is
    (``tensor_program.is_line_walk``)."""

    d: int
    k: int

    HEAP = 4096  # a top-k of up to this many keeps its best k apart (on a CPU worker's stack)

    def rank_dtype(self, n: int) -> str:
        """i32 where a line of ``n`` is a top-k that ``HEAP`` holds; else i64: room beside each
        place for a key or a rank while the line is sorted in the rank buffer."""
        return "i32" if self.k < n and self.k <= self.HEAP else "i64"


@dataclass(frozen=True)
class LineScan:
    """A scan along a line, which a target that walks lines (``Backend.line_walks``) may compute
    as one running fold (input/sort_scan.py, ``_scan_pass``). The Generic or Kernel holding it
    has one Result over the parallel loops (the line along parallel loop ``d``, place ``i``)
    and one reduction loop ``j`` (step ``j`` makes the element at ``j + 1``): its value is
    ``Select(j < i, step, Acc(0))`` (``line_step``) and its init the line's first element, so
    that counted, each element folds its own prefix. Walked, ``out[0] = init`` and
    ``out[j + 1] = step(Acc(0) = out[j])``: the same folds in the same order, each once."""

    d: int


def line_before(result: Result) -> Expr:
    """The ``before`` condition of a ``LineSort`` kernel's rank result."""
    step = result.value
    assert isinstance(step, Binary) and step.op == "add" and isinstance(step.b, Select), step
    return step.b.cond


def line_step(result: Result) -> Expr:
    """The step of a ``LineScan`` kernel's result: the next element's fold of ``Acc(0)``."""
    assert isinstance(result.value, Select) and result.value.b == Acc(0, result.value.dtype)
    return result.value.a


def attention_nodes(attention: Attention):
    """Every sub-expression of the score's three expressions."""
    for root in (attention.score_init, attention.score_step, attention.score):
        yield from walk(root)


@dataclass(frozen=True)
class Kernel:
    name: str
    loop_ranges: tuple[int, ...]
    num_parallel: int
    bindings: tuple[Binding, ...]
    results: tuple[Result, ...]
    # Where the region came from, for error messages and --pyree-print-ir-after-all.
    location: str = field(default="", compare=False)
    # Softmax attention: its one result is O (see ``Attention``), and no other template takes it.
    attention: Attention | None = None
    # A line's ranks or scan, which a template may compute by walking the line (see
    # ``LineSort``, ``LineScan``).
    line: LineSort | LineScan | None = None

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



def transform(expr: Expr, leaf: Callable[[Expr], Expr | None]) -> Expr:
    """Rebuilds ``expr`` bottom-up, the one expression mapper of passes and backends: ``leaf`` may
    replace any Load/Acc/Final/LoopIndex/SizeValue, and any Gather once its index is rebuilt
    (None keeps it). A node whose operands did not change is kept as the same object, with the hash and
    depth it carries."""
    memo: dict[Expr, Expr] = {}

    def go(e: Expr) -> Expr:
        if e in memo:
            return memo[e]
        if isinstance(e, (Load, Acc, Final, LoopIndex, Const, SizeValue)):
            out = leaf(e) if not isinstance(e, Const) else None
            out = e if out is None else out
        elif isinstance(e, (Unary, Cast)):
            x = go(e.x)
            out = e if x is e.x else dataclasses.replace(e, x=x)
        elif isinstance(e, (Binary, Compare)):
            a, b = go(e.a), go(e.b)
            out = e if a is e.a and b is e.b else dataclasses.replace(e, a=a, b=b)
        elif isinstance(e, Select):
            c, a, b = go(e.cond), go(e.a), go(e.b)
            out = e if c is e.cond and a is e.a and b is e.b \
                else dataclasses.replace(e, cond=c, a=a, b=b)
        elif isinstance(e, Gather):
            index = tuple(go(ix) for ix in e.index)
            out = e if all(x is y for x, y in zip(index, e.index)) \
                else dataclasses.replace(e, index=index)
            out = leaf(out) or out
        else:
            raise TypeError(f"not an expression: {e!r}")
        memo[e] = out
        return out

    for e in walk(expr):  # operands first, so that no call recurses more than one level
        go(e)
    return memo[expr]

def result_roots(result: Result) -> list[Expr]:
    """The expressions ``result`` holds: its value, its init and epilogue where present, and a
    scatter's place."""
    roots = [e for e in (result.value, result.init, result.epilogue) if e is not None]
    return roots + list(result.scatter.place) if result.scatter is not None else roots


def result_nodes(result: Result):
    """Every sub-expression of ``result``'s roots (``walk`` of each root in turn)."""
    for root in result_roots(result):
        yield from walk(root)


def map_result(result: Result, leaf: Callable[[Expr], Expr | None], **changes) -> Result:
    """``result`` with ``transform(root, leaf)`` for each of its roots, and ``changes`` to its
    other fields."""
    def go(e: Expr | None) -> Expr | None:
        return None if e is None else transform(e, leaf)
    if result.scatter is not None:
        changes.setdefault("scatter", dataclasses.replace(
            result.scatter, place=tuple(go(e) for e in result.scatter.place)))
    return dataclasses.replace(result, value=go(result.value), init=go(result.init),
                               epilogue=go(result.epilogue), **changes)


def scatter_result(results) -> Result | None:
    """The scatter result of a kernel's or Generic's ``results`` (``Scatter``), if it has one."""
    return next((r for r in results if r.scatter is not None), None)


def merge_loop_ranges(loop_ranges: tuple[int, ...], num_parallel: int,
                      d: int) -> tuple[tuple[int, ...], int]:
    """The loop ranges and parallel count once loop d is merged into loop d+1 (``merge_loop``)."""
    merged = loop_ranges[:d] + (loop_ranges[d] * loop_ranges[d + 1],) + loop_ranges[d + 2:]
    return merged, num_parallel - (d < num_parallel)


def merge_loop(result: Result, d: int, load_dim: Callable[[int], int | None] = lambda b: None,
               result_dim: int | None = None) -> Result:
    """``result`` with loop d merged into loop d+1 (the merged loop, numbered d, runs d+1
    fastest): each affine index drops loop d's coefficient and later LoopIndex dims shift down.
    Right only where every access is linear across the pair and no LoopIndex reads d or d+1,
    which the caller checks (flow's loop collapsing, codegen's normalize). Where the caller also
    merges dims i, i+1 of a binding indexed by exactly d, d+1, ``load_dim(binding)`` (its loads)
    or ``result_dim`` (the store) is i, and index position i goes."""
    def merged(index: tuple[AffineExpr, ...], at: int | None) -> tuple[AffineExpr, ...]:
        return tuple(AffineExpr(ix.coeffs[:d] + ix.coeffs[d + 1:], ix.const)
                     for k, ix in enumerate(index) if k != at)

    def leaf(e: Expr) -> Expr | None:
        if isinstance(e, Load):
            return dataclasses.replace(e, index=merged(e.index, load_dim(e.binding)))
        if isinstance(e, LoopIndex) and e.dim > d:
            return dataclasses.replace(e, dim=e.dim - 1)
        return None

    return map_result(result, leaf, index=merged(result.index, result_dim))


def swap_loops(kernel: Kernel, a: int, b: int) -> Kernel:
    """``kernel`` with loops a and b trading places (both parallel, or both reductions): the
    same computation, as a template that reads its loops by position may want it (a
    matrix-vector product whose vector is the n side). Kernels without attention or a line."""
    def swapped(index: tuple[AffineExpr, ...]) -> tuple[AffineExpr, ...]:
        out = []
        for ix in index:
            coeffs = list(ix.coeffs)
            coeffs[a], coeffs[b] = coeffs[b], coeffs[a]
            out.append(AffineExpr(tuple(coeffs), ix.const))
        return tuple(out)

    def leaf(e: Expr) -> Expr | None:
        if isinstance(e, Load):
            return dataclasses.replace(e, index=swapped(e.index))
        if isinstance(e, LoopIndex) and e.dim in (a, b):
            return dataclasses.replace(e, dim=a + b - e.dim)
        return None

    ranges = list(kernel.loop_ranges)
    ranges[a], ranges[b] = ranges[b], ranges[a]
    results = tuple(map_result(r, leaf, index=swapped(r.index)) for r in kernel.results)
    return dataclasses.replace(kernel, loop_ranges=tuple(ranges), results=results)


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
