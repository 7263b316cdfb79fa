"""The tensor program: a function after normalization, as a list of ops on SSA tensor values.

The MLIR front end (``pyree.compiler.input``) lowers every accepted op (arith/math on tensors,
linalg named ops and generics, tensor slicing/padding, constants, check ops) into these few ops,
and control flow (scf, stablehlo.while/if/case) into ``If`` and ``While``, whose ``Block``s are
op lists of their own: a block reads values of enclosing blocks but defines values only it and
its own nested blocks see (MLIR's region scoping), so every pass runs on a block as on a function
whose arguments are the block's arguments and the outer values it reads (``map_blocks``).
Dispatch-region formation (``pyree.compiler.flow.regions``) then fuses ``Generic`` ops into
kernels. ``Generic`` reuses the kernel IR's expressions: inside a Generic, ``Load(binding=i)``
reads ``inputs[i]`` and ``Result.binding = k`` writes ``results[k]``; fusion only rebinds indices.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Union

import numpy as np
from pyree.compiler.kernel import (
    Attention,
    LineScan,
    LineSort,
    Load,
    Result,
    SizeValue,
    is_float,
    itemsize,
    result_nodes,
    scatter_result,
)
from pyree.compiler.sizes import Size, is_static, negative_part, num_elements, signed_parts

# Every buffer a Value lives in starts at a multiple of this (the arena, constants, arguments):
# a view at an offset that is a multiple of it is as aligned as its source.
ALIGNMENT = 64


@dataclass(eq=False)
class Value:
    """An SSA tensor value. Identity is the object: two Values are equal only if they are one."""

    dtype: str
    shape: tuple[int, ...]
    name: str = ""

    @property
    def num_bytes(self):
        """An int, or a ``Size`` when a dim is known only at run time."""
        return num_elements(self.shape) * itemsize(self.dtype)

    def __repr__(self) -> str:
        return f"%{self.name or id(self)}: {'x'.join(map(str, self.shape + (self.dtype,)))}"


@dataclass(eq=False)
class Generic:
    """linalg.generic, normalized: loops parallel-first, outs reads made explicit.

    A parallel-only generic that reads its outs operand has it as an ordinary input. A reduction's
    starting value is ``Result.init`` (usually a Load of the outs operand, or a Const when the outs
    came from a fill that normalization folded in).
    """

    inputs: list[Value]
    results: list[Value]
    outputs: tuple[Result, ...]
    loop_ranges: tuple[int, ...]
    num_parallel: int
    location: str = ""
    # The source op's name (e.g. "linalg.matmul"), for --pyree-print-ir-after-all and errors.
    origin: str = "linalg.generic"
    # Every source op fused into this one, as "op @ file:line" (``sources_of``); empty: this op
    # alone. The module records them per kernel, and a trace names each dispatch by them.
    sources: tuple[str, ...] = ()
    # Softmax attention (flow/attention.py): ``outputs`` is its one result O, and these say how
    # its probabilities come about (``kernel.Attention``).
    attention: Attention | None = None
    # A line's ranks or scan, which a target may compute by walking the line (``kernel.LineSort``,
    # ``kernel.LineScan``).
    line: LineSort | LineScan | None = None


def is_line_walk(op: Op) -> bool:
    """Whether ``op`` is a line's ranks or scan that a target may compute by walking the line
    (``kernel.LineSort``, ``kernel.LineScan``): flow passes leave it as it is (its loops, its
    one reduction and its loads are what the walking template reads) and fuse it with nothing,
    neither a producer into it (recomputed at every step) nor it into a consumer."""
    return isinstance(op, Generic) and op.line is not None


def is_scatter(op: Op) -> bool:
    """Whether ``op`` is a Generic storing at computed places (``kernel.Scatter``): flow
    passes leave it as it is, fuse no producer into its starting value and never fuse it into
    another op (its result is read-modify-write)."""
    return isinstance(op, Generic) and scatter_result(op.outputs) is not None


def parameters_of(generic: Generic) -> list[Size]:
    """The run-time sizes a region's kernel takes as push constants: each distinct ``Size``
    among its loop ranges, operands' dims and the sizes its body reads, in order of first
    appearance. Push constant k is symbol ``pk`` in the kernel (``flow/kernels.outline``), so
    that one kernel serves every function and call site whatever its symbols are named; a
    dispatch passes these sizes. An index's offset or coefficient with a negative term
    (``sizes.signed_parts``: the ``-n`` of a concatenation's second part) is passed as its two
    non-negative parts, the kernel subtracting one from the other: a push constant is never
    negative. A size the body reads as an integer with a negative term (``n - 1``, where ``n``
    may be 0) is likewise passed as its parts (``size_value_parts``)."""
    params: dict[Size, None] = {}
    read = [part for e in size_value_nodes(generic)
            for part in (size_value_parts(e) or (e.size,))]
    for d in (*generic.loop_ranges, *(d for v in (*generic.inputs, *generic.results)
                                      for d in v.shape), *read):
        if isinstance(d, Size):
            params[d] = None
    for d in index_sizes(generic):
        parts = signed_parts(d)
        for part in (d,) if parts is None else parts:
            if isinstance(part, Size):
                params[part] = None
    return list(params)


def index_sizes(generic: Generic) -> list[Size]:
    """The run-time sizes among the coefficients and offsets of ``generic``'s affine indices
    (a slice of a dynamic sequence that starts at ``n - 1``)."""
    indices = [ix for r in generic.outputs
               for ix in (*r.index, *(i for e in result_nodes(r) if isinstance(e, Load)
                                      for i in e.index))]
    return [v for ix in indices for v in (*ix.coeffs, ix.const) if isinstance(v, Size)]


def size_value_nodes(generic: Generic) -> list[SizeValue]:
    return [e for r in generic.outputs for e in result_nodes(r) if isinstance(e, SizeValue)]


def size_value_parts(e: SizeValue) -> tuple | None:
    """(plus, minus), both non-negative, with ``e.size == plus - minus``, for an integer
    SizeValue whose size has a negative term (a reversal's ``n - 1``); None otherwise (a
    float one is converted once, as before)."""
    minus = negative_part(e.size)
    if is_float(e.dtype) or (is_static(minus) and minus == 0):
        return None
    return e.size + minus, minus


def size_values(generic: Generic) -> list[Size]:
    """The run-time sizes ``generic``'s expressions read as values (``kernel.SizeValue``)."""
    return [e.size for e in size_value_nodes(generic)]


def has_run_time_sizes(op: Op) -> bool:
    """Whether a shape or loop range of ``op`` is known only at run time, or its body reads a
    run-time size, or an index of it is offset by one (a constant sliced at ``n - 1``)."""
    dims = [*getattr(op, "loop_ranges", ()),
            *(d for v in (*defined_by(op), *read_by(op)) for d in v.shape)]
    return any(isinstance(d, Size) for d in dims) or (
        isinstance(op, Generic) and bool(size_values(op) or index_sizes(op)))


def sources_of(*ops: Generic) -> tuple[str, ...]:
    """The source ops fused into ``ops``, in order, each once: what fusing them makes."""
    out: list[str] = []
    for op in ops:
        if op.sources:
            out += op.sources
        else:
            line = op.location.rsplit(":", 1)[0] if op.location.count(":") >= 2 else op.location
            out.append(f"{op.origin} @ {line}" if line else op.origin)
    return tuple(dict.fromkeys(out))


@dataclass(eq=False)
class Constant:
    """A constant tensor: dense bytes, a splat (one scalar everywhere) stored as a fill, or an
    external parameter (IREE's ``#stream.parameter.named<"scope"::"key">``) whose bytes the
    runtime loads from a parameter file, so its value is unknown here and never folded."""

    result: Value
    data: np.ndarray | None = None  # shape == result.shape, dtype matches; None for the others
    splat: Union[float, int, bool, None] = None
    location: str = ""
    parameter: tuple[str, str] | None = None  # (scope, key)
    name: str = ""  # the util.global it was loaded from: its key when exported as a parameter
    # a mutable global's state: the module constant that GlobalStore writes, never folded
    mutable: bool = False
    # a value of parameters the module's initializer computes at load (parameters/load_time.py):
    # no bytes here; the initializer's GlobalStore writes it, the functions read it
    computed: bool = False


@dataclass(eq=False)
class View:
    """The same bytes under another shape (collapse/expand_shape, reshape): no data moves."""

    result: Value
    source: Value
    byte_offset: int = 0
    location: str = ""
    # a barrier the compiler placed: readers keep reading the view (flow/views.py does not fold
    # it), so its source stays materialized (a convolution's patches, which GEMMs read densely)
    barrier: bool = False


@dataclass(eq=False)
class Check:
    """IREE's check dialect. kind: expect_true, expect_false, expect_all_true, expect_eq,
    expect_almost_eq (the *_const forms arrive with ``rhs`` a Constant's value). ``cf.assert`` is
    an expect_true whose ``message`` is the failure's text."""

    kind: str
    lhs: Value
    rhs: Value | None = None
    atol: float = 1e-4
    rtol: float = 0.0
    location: str = ""
    message: str = ""


@dataclass(eq=False)
class GlobalStore:
    """util.global.store / ml_program.global_store: ``source`` written into ``target``, the
    value of a mutable global's Constant (input/globals.py), where the next call reads it."""

    source: Value
    target: Value
    location: str = ""


@dataclass(eq=False)
class Block:
    arguments: list[Value]
    ops: list[Op]
    results: list[Value]  # what the block yields


@dataclass(eq=False)
class If:
    """scf.if: runs ``then`` when the rank-0 ``condition`` is non-zero, else ``otherwise``;
    ``results`` are what the block that ran yields. A ``condition`` that is a 0/1 ``Size``
    chooses between versions of one computation by the call's sizes (flow/versions.py): the
    host decides it before anything runs, and both blocks yield the If's own result values,
    which their last ops write in place."""

    condition: Value | Size
    then: Block
    otherwise: Block
    results: list[Value]
    location: str = ""


@dataclass(eq=False)
class While:
    """scf.while: ``before`` receives the carried values (first ``inits``) and yields
    ``[condition, *forwarded]``; while the condition is non-zero, ``after`` receives the
    forwarded values and yields the next carried values. ``results`` are the forwarded values
    of the ``before`` run whose condition was zero."""

    inits: list[Value]
    before: Block
    after: Block
    results: list[Value]
    location: str = ""


Op = Union[Generic, Constant, View, Check, If, While, GlobalStore]


def blocks_of(op: Op) -> tuple[Block, ...]:
    if isinstance(op, If):
        return (op.then, op.otherwise)
    if isinstance(op, While):
        return (op.before, op.after)
    return ()


def defined_by(op: Op) -> list[Value]:
    if isinstance(op, (Generic, If, While)):
        return list(op.results)
    if isinstance(op, (Constant, View)):
        return [op.result]
    return []


def read_by(op: Op) -> list[Value]:
    """The values ``op`` reads, those its blocks read from outside included."""
    if isinstance(op, Generic):
        return list(op.inputs)
    if isinstance(op, View):
        return [op.source]
    if isinstance(op, Check):
        return [v for v in (op.lhs, op.rhs) if v is not None]
    if isinstance(op, GlobalStore):
        return [op.source, op.target]
    if isinstance(op, If):
        condition = [op.condition] if isinstance(op.condition, Value) else []
        return [*condition, *free_values(op.then), *free_values(op.otherwise)]
    if isinstance(op, While):
        return [*op.inits, *free_values(op.before), *free_values(op.after)]
    return []


def walk_ops(ops: list[Op]):
    """Every op of ``ops`` and of their nested blocks, in program order."""
    for op in ops:
        yield op
        for block in blocks_of(op):
            yield from walk_ops(block.ops)


def free_values(block: Block) -> list[Value]:
    """The values ``block`` reads (its nested blocks included) that it does not define, in
    first-read order."""
    defined = set(block.arguments)
    free: dict[Value, None] = {}
    for op in block.ops:
        free.update((v, None) for v in read_by(op) if v not in defined)
        defined.update(defined_by(op))
    free.update((v, None) for v in block.results if v not in defined)
    return list(free)


@dataclass(frozen=True)
class Symbol:
    """A run-time size of a function (a ``?`` dim of an argument): the name its ``Size``
    expressions use, and what the caller may pass (``max`` None: no bound). A ``hidden`` size
    is known to the host program but kept from the kernels (IREE's
    ``flow.tensor.dynamic_constant``): its kernels take it as a run-time size, and the host
    program passes this value; the caller never gives it."""

    name: str
    min: int = 0
    max: int | None = None
    divisor: int = 1
    hidden: int | None = None


@dataclass(frozen=True)
class SizeCheck:
    """``cf.assert`` on run-time sizes (torch-mlir's shape guards that the sizes do not decide
    at compile time): ``condition``, a 0/1 ``Size``, must be 1 at a call's sizes, or the call
    fails with ``message`` before anything runs."""

    condition: Size
    message: str
    location: str = ""


@dataclass(eq=False)
class Function:
    name: str
    arguments: list[Value]
    ops: list[Op]
    results: list[Value]
    location: str = ""
    symbols: list[Symbol] = field(default_factory=list)
    size_checks: list[SizeCheck] = field(default_factory=list)


def map_blocks(function: Function, rewrite: Callable[[Function], Function]) -> Function:
    """``rewrite`` applied to ``function`` and, innermost first, to every nested block as a
    function of its arguments and the outer values it reads, yielding its results."""
    ops = [_map_op(op, function.name, rewrite) for op in function.ops]
    return rewrite(dataclasses.replace(function, ops=ops))


def _map_op(op: Op, name: str, rewrite) -> Op:
    if not blocks_of(op):
        return op
    new = {}
    for field_name in ("then", "otherwise", "before", "after"):
        block = getattr(op, field_name, None)
        if block is None:
            continue
        as_function = Function(f"{name}_{field_name}", [*block.arguments, *free_values(block)],
                               block.ops, block.results)
        done = map_blocks(as_function, rewrite)
        new[field_name] = Block(block.arguments, done.ops, done.results)
    return dataclasses.replace(op, **new)


@dataclass(eq=False)
class Program:
    functions: list[Function] = field(default_factory=list)
    name: str = "module"
    # run once at load, before any call (parameters/load_time.py); not callable
    initializer: Function | None = None
