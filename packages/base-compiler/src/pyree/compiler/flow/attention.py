"""Softmax attention as one op (pass ``fuse-attention``, for targets that declare
``Backend.fused_attention``).

Region formation leaves attention as a chain: a contraction S = A·B with an elementwise
epilogue (scale, mask, bias of the loop indices and loads), the softmax row kernel over S's
last dim (flow/row_fusion.py; with or without torch's select of 0 for a row that is all -inf),
and a contraction O = P·V with its epilogue. S and P, T x T per head, go through memory twice.
This pass recognizes that chain by its structure, where S and P have no other reader, and
replaces it by one Generic holding a ``kernel.Attention``: O's contraction over the keys j,
with the score's contraction over c as a second reduction loop. Everything is matched through
views and affine indices, never by name or shape; anything that does not fit exactly leaves the
chain as it was. Elementwise producers read only by the new op (torch's split scale of q and
k, the widening of V) are then recomputed in it, as region formation would.

With run-time sizes (a prompt's length: rows, keys, batch), the chain is matched the same way,
its sizes as polynomials (``pyree.compiler.sizes``): a split of the rows must divide exactly as
polynomials, a loop must provably stay in its range, and a size is never assumed to be one. Such
an op is formed only where the target's template takes it (``run_time``, the backend's predicate
on the outlined op: cuda sm_80+'s tensor-core template, f16/bf16 operands, static head dims);
everything else keeps the chain, as before.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable

import numpy as np
from pyree.compiler.flow.flash_decoding import split_keys
from pyree.compiler.flow.kernels import outline
from pyree.compiler.flow.rewrite import (
    compose,
    permutation_dims,
    plain_positions,
    position_loops,
    remap_loops,
)
from pyree.compiler.flow.views import source_index
from pyree.compiler.kernel import (
    MAX_DEPTH,
    Acc,
    AffineExpr,
    Attention,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Final,
    Gather,
    Kernel,
    Load,
    LoopIndex,
    Result,
    Select,
    Unary,
    affine_range,
    attention_nodes,
    contraction_product,
    depth,
    fold_pattern,
    fold_product,
    itemsize,
    map_result,
    result_nodes,
    result_roots,
    transform,
    walk,
)
from pyree.compiler.sizes import Size, compare, exact_quotient, is_static, num_elements, opaque
from pyree.compiler.tensor_program import (
    Check,
    Constant,
    Function,
    Generic,
    GlobalStore,
    If,
    Op,
    Value,
    View,
    While,
    defined_by,
    has_run_time_sizes,
    index_sizes,
    is_scatter,
    read_by,
    size_values,
    sources_of,
)

# The largest head dim of V: a SIMT thread keeps a row of O's accumulators in registers.
MAX_VALUE_DIM = 256
# The SIMT template's work grows as query rows x keys per row, against the chain's matmuls: past
# this many scores it loses to the chain, which keeps such problems unless the tensor-core
# template takes them (``_tensor_cores``; its work is the chain's matmuls, on tensor cores, in one
# kernel that never writes S or P, so no size keeps the chain there).
MAX_SCORES = 1 << 20
# The tensor-core template (codegen/cuda/attention_mma.py) takes an op with this many query rows
# per batch-head and f16 (bf16) operands; flash-decoding does not split its keys (a partial op
# runs on the SIMT kernel).
TENSOR_CORE_ROWS = 16
# Arithmetic nodes an elementwise producer may hold to be recomputed in the attention op.
MAX_INLINED = 48


def fuse_attention(function: Function, run_time: Callable[[Kernel], bool] | None = None
                   ) -> Function:
    """``run_time``: whether the target's templates take an attention kernel with run-time
    sizes (``Backend.run_time_attention``); a function with run-time sizes keeps its chains
    unless it takes every such op formed (all or none: an op cannot be split back)."""
    if function.symbols and run_time is None:
        return function
    ops = list(function.ops)
    changed = True
    while changed:
        changed = False
        graph = _Graph(ops, function.results)
        for k, op in enumerate(ops):
            new, at = None, k
            if isinstance(op, Generic) and op.attention is None:
                new = _attention(op, graph)
            elif isinstance(op, Generic):
                new = _inline_one(op, graph)
                if new is None and (taken := _with_consumer(op, graph)) is not None:
                    new, consumer = taken
                    at = ops.index(consumer)  # after every value the consumer reads
            if new is not None:
                ops[at] = new
                ops = _live(ops, function.results)
                changed = True
                break
    graph = _Graph(ops, function.results)
    if any(isinstance(op, Generic) and op.attention is not None and has_run_time_sizes(op)
           and not run_time(outline(op, "attention")) for op in ops):
        return function  # (a layout the template does not stage, a head dim past its limit)
    ops = [new for op in ops for new in (
        split_keys(op) if isinstance(op, Generic) and op.attention is not None
        and not _tensor_cores(op, graph) else [op])]
    return dataclasses.replace(function, ops=ops)


def _tensor_cores(op: Generic, graph: _Graph) -> bool:
    """Whether attention op ``op`` is prefill on f16 (bf16) operands, which the tensor-core
    template takes: ``TENSOR_CORE_ROWS`` query rows per batch-head (its last row loop one whose
    steps share their keys), and the score's and O's
    products reading one such type, widened, through the elementwise producers that the op will
    recompute (torch's scale of q and k, V's widening). The template decides for itself; an op
    it does not take runs on the SIMT kernel."""
    att = op.attention
    rows = op.loop_ranges[att.e - 1] if att.e >= 1 else 0
    if att.e < 1 or (is_static(rows) and rows < TENSOR_CORE_ROWS):
        return False  # (run-time rows: the template takes any number)
    folds = fold_pattern((Result(0, (), att.score_step),))
    product = fold_product(folds[0]) if folds else None
    if product is None or all(att.e - 1 in _loops_read(walk(x)) for x in (product.a, product.b)):
        return False  # (the keys of a row loop's every step differ: heads, a decode's one query dropped)
    types = {_narrow_type(x, op, graph) for x in (product.a, product.b, op.outputs[0].value)}
    return len(types) == 1 and types <= {"f16", "bf16"}


def _constant(x: Expr) -> bool:
    return not any(isinstance(n, (Load, Gather, LoopIndex, Acc, Final)) for n in walk(x))


def _narrow_type(x: Expr, op: Generic, graph: _Graph) -> str | None:
    """The f16 (bf16) type that operand ``x`` of ``op`` widens (times a constant), or None."""
    if isinstance(x, Binary) and x.op == "mul":
        x = x.a if _constant(x.b) else x.b if _constant(x.a) else x
    if isinstance(x, Cast) and x.op == "fpext" and isinstance(x.x, Load):
        return x.x.dtype
    if isinstance(x, Load) and x.dtype == "f32":
        producer = graph.producers.get(_view_base(op.inputs[x.binding], graph))
        if isinstance(producer, Generic) and producer.attention is None \
                and len(producer.outputs) == 1 and producer.num_parallel == len(producer.loop_ranges):
            return _narrow_type(producer.outputs[0].value, producer, graph)
    return None


class _Graph:
    """Readers of each value (a function result reads it too) and the op defining it."""

    def __init__(self, ops: list[Op], results: list[Value]):
        self.users: Counter = Counter(results)
        self.readers: dict[Value, list[Op]] = {}
        self.producers: dict[Value, Op] = {}
        for op in ops:
            for v in set(read_by(op)):
                self.users[v] += 1
                self.readers.setdefault(v, []).append(op)
            self.producers.update(dict.fromkeys(defined_by(op), op))


def _live(ops: list[Op], results: list[Value]) -> list[Op]:
    """``ops`` without those whose results nothing reads (side effects kept)."""
    while True:
        users = _Graph(ops, results).users
        live = [op for op in ops if isinstance(op, (Check, If, While, GlobalStore))
                or any(users[v] for v in defined_by(op))]
        if len(live) == len(ops):
            return live
        ops = live


def _reads_sizes(op: Generic, stores: bool = True) -> bool:
    """Whether ``op``'s expressions read a run-time size (as a value, or in an index; with
    ``stores``, in a result's index too): its loop ranges and shapes may be sizes, its body may
    not. (A row kernel's rows split by ``_refined`` store at ``s0 * head + query``.)"""
    loads = any(isinstance(v, Size) for r in op.outputs for e in result_nodes(r)
                if isinstance(e, Load) for ix in e.index for v in (*ix.coeffs, ix.const))
    return bool(size_values(op) or (index_sizes(op) if stores else loads))


def _more_than_one(n) -> bool:
    """Whether a loop of extent ``n`` takes more than one step; a run-time size is taken to (what
    holds for every size a loop of one step would not)."""
    return not is_static(n) or n > 1


def _zero(offset) -> bool:
    return is_static(offset) and offset == 0


def _quotient(b, a):
    """``b / a`` where ``a`` divides ``b`` for every size (ints, a size by an int, or a size by a
    size that it is an int multiple of), else None."""
    if is_static(a) and is_static(b):
        return b // a if b % a == 0 else None
    if not is_static(a):
        return exact_quotient(b, a)
    q = opaque("floordiv", b, a)
    return q if q * a == b else None


def probability_products(function: Function) -> set[Generic]:
    """The contractions that read a softmax's probabilities, and those whose scores that
    softmax reads: split-reductions keeps them whole, since a product split in two (a decode
    step's P·V, a 256-deep score) is no longer the chain this pass matches."""
    graph = _Graph(function.ops, function.results)
    found = set()
    for op in function.ops:
        if not isinstance(op, Generic) or len(op.outputs) != 1 or op.outputs[0].row:
            continue
        folds = fold_pattern(op.outputs)
        product = fold_product(folds[0]) if folds else None
        if product is not None and any(_reads_softmax(x, op, graph) for x in (product.a, product.b)):
            found.add(op)
            row = graph.producers[_view_base(op.inputs[_load_of(product, op, graph).binding],
                                             graph)]
            found.update(p for v in row.inputs if isinstance(
                p := graph.producers.get(_view_base(v, graph)), Generic) and _is_contraction(p))
    return found


def _load_of(product: Binary, op: Generic, graph: _Graph) -> Load:
    """The operand load of ``product`` that reads a softmax's probabilities."""
    x = next(x for x in (product.a, product.b) if _reads_softmax(x, op, graph))
    return x.x if isinstance(x, Cast) else x


def _reads_softmax(x: Expr, op: Generic, graph: _Graph) -> bool:
    load = x.x if isinstance(x, Cast) else x
    if not isinstance(load, Load):
        return False
    value = _view_base(op.inputs[load.binding], graph)
    row = graph.producers.get(value)
    return isinstance(row, Generic) and any(
        r.row and row.results[r.binding] is value
        and any(isinstance(n, Unary) and n.op == "exp" for n in walk(r.value))
        for r in row.outputs)


# ---- the chain -----------------------------------------------------------------------------
#
# The attention op's loops are the softmax row kernel's parallel loops, then O's column e, then
# the keys j (the row kernel's reduction loop) and the score's contraction loop c. Both
# contractions' loops are affine in these: a batch loop that merges (b, h) reads as 3*b + h.

def _attention(g2: Generic, graph: _Graph) -> Generic | None:
    """The attention op replacing the chain that ends in contraction ``g2``, or None."""
    if not _is_contraction(g2):
        return None
    g2 = _unit_terms_dropped(g2)
    out = g2.outputs[0]
    product = contraction_product(out)
    for x, v in ((product.a, product.b), (product.b, product.a)):
        found = _probabilities(g2, x, graph)
        if found is not None:
            return _build(g2, v, *found, graph)
    return None


def _unit_terms_dropped(op: Generic) -> Generic:
    """``op`` with the terms of its loops of one step (always 0) dropped from every index:
    a read through a view folded as ``heads + query`` (GPT-2's decode, one query) is then a
    read at ``heads``, one loop a position, as the matching below wants."""
    unit = [n == 1 for n in op.loop_ranges]
    if not any(unit):
        return op

    def plain(ix: AffineExpr) -> AffineExpr:
        return AffineExpr(tuple(0 if u else c for u, c in zip(unit, ix.coeffs)), ix.const)

    def leaf(e: Expr) -> Expr | None:
        return Load(e.binding, tuple(map(plain, e.index)), e.dtype) if isinstance(e, Load) else None

    return dataclasses.replace(op, outputs=tuple(
        map_result(r, leaf, index=tuple(map(plain, r.index))) for r in op.outputs))


def _is_contraction(op: Generic) -> bool:
    """One result ``acc + a * b`` in f32 over one reduction loop, static, no gathers."""
    if len(op.outputs) != 1 or len(op.loop_ranges) - op.num_parallel != 1 or op.num_parallel < 2:
        return False
    out = op.outputs[0]
    if out.row or _reads_sizes(op) or op.attention is not None or out.init is None:
        return False
    product = contraction_product(out)
    return (product is not None and product.dtype == "f32"
            and not any(isinstance(e, Gather) for e in result_nodes(out)))


def _through_views(value: Value, index: tuple[AffineExpr, ...], loop_ranges, graph: _Graph,
                   shared: bool = False):
    """(value, index) of the element read at ``index`` of ``value``, through views that only
    this read reads (``shared``: others may read them too); None where a view has another
    reader or a digit would carry."""
    while isinstance(graph.producers.get(value), View):
        view = graph.producers[value]
        if view.barrier or (graph.users[value] != 1 and not shared) \
                or not is_static(view.byte_offset) or view.byte_offset % itemsize(value.dtype):
            return None
        index = source_index(index, view.result.shape, view.source.shape,
                             view.byte_offset // itemsize(value.dtype), loop_ranges)
        if index is None:
            return None
        value = view.source
    return value, index


def _probabilities(g2: Generic, x: Expr, graph: _Graph):
    """Where ``x`` reads a softmax row result P that nothing else reads: (the load of P, the
    dtype P is rounded to, the row kernel, its ``_Softmax``), else None."""
    load = x.x if isinstance(x, Cast) and x.op == "fpext" else x
    if not isinstance(load, Load) or (load is not x) != (load.dtype != "f32"):
        return None
    value = g2.inputs[load.binding]
    while isinstance(graph.producers.get(value), View):
        view = graph.producers[value]
        if view.barrier or not _zero(view.byte_offset) or graph.users[value] != 1:
            return None
        value = view.source
    row = graph.producers.get(value)
    if not isinstance(row, Generic) or graph.users[value] != 1:
        return None
    op, row = row, _unit_terms_dropped(row)
    shapes = [v.shape for x in [g2.inputs[load.binding], *row.inputs]
              for v in _chain_values(x, graph)]
    row, absorbed = _with_max(row, graph)
    row = _refined(row, shapes)
    row = None if row is None else _unviewed(row, graph)
    softmax = None if row is None else _softmax(row, row.results.index(value), graph)
    if softmax is None or softmax.p_dtype != load.dtype:
        return None
    return load, row, dataclasses.replace(softmax, ops=(op, *absorbed))


def _unviewed(row: Generic, graph: _Graph) -> Generic:
    """``row`` reading through its views: each load of a view a load of the value below, so
    that two reads of one score through two views are one expression."""
    inputs = list(row.inputs)

    def leaf(e: Expr) -> Expr | None:
        if not isinstance(e, Load) or not isinstance(graph.producers.get(row.inputs[e.binding]),
                                                     View):
            return None
        at = _through_views(row.inputs[e.binding], e.index, row.loop_ranges, graph, shared=True)
        if at is None:
            return None
        if not any(v is at[0] for v in inputs):
            inputs.append(at[0])
        return Load(next(k for k, v in enumerate(inputs) if v is at[0]), at[1], e.dtype)

    outputs = tuple(map_result(r, leaf) for r in row.outputs)
    return dataclasses.replace(row, inputs=inputs, outputs=outputs)


def _with_max(row: Generic, graph: _Graph) -> tuple[Generic, list[Generic]]:
    """``row`` with the max fold it reads from a kernel of its own (the same loops but for
    loops of one step, read through views at the point it is stored, by nothing else) as one
    of its own folds, read as ``Final``: region formation leaves a softmax over rows with unit
    dims (a decode step's one query) as two kernels. Also the kernels taken in."""
    for b, value in enumerate(row.inputs):
        chain = _chain_values(value, graph)
        m = graph.producers.get(chain[-1])
        if not isinstance(m, Generic) or len(m.outputs) != 1 or any(graph.users[v] != 1 for v in chain):
            continue
        loop_map = _unit_loops_matched(m, row)
        fold = m.outputs[0]
        folds = fold_pattern(m.outputs)
        if loop_map is None or folds is None or folds[0][0] != "max" or fold.epilogue is not None \
                or fold.row or fold.init != Const(float("-inf"), "f32") \
                or any(isinstance(e, Gather) for e in result_nodes(fold)):
            continue
        n = len(row.loop_ranges)
        stored = tuple(compose(ix, loop_map, n) for ix in fold.index)
        loads = {e for r in row.outputs for e in result_nodes(r)
                 if isinstance(e, (Load, Gather)) and e.binding == b}
        if not loads or not all(isinstance(e, Load)
                                and _lands_on(value, e.index, stored, row.loop_ranges, graph) for e in loads):
            continue
        return _taken_in(row, value, m, loads, loop_map), [m]
    return row, []


def _unit_loops_matched(m: Generic, row: Generic) -> tuple[AffineExpr, ...] | None:
    """Each loop of ``m`` as a loop of ``row``: their loops of more than one step pair up in
    order (parallel with parallel, reductions with reductions, equal extents), a loop of one
    step is 0. None where they do not pair up."""
    def kept(op: Generic, lo: int, hi: int) -> list[int]:
        return [k for k in range(lo, hi) if op.loop_ranges[k] != 1]

    n = len(row.loop_ranges)
    pairs: list[tuple[int, int]] = []
    for (m_lo, m_hi), (r_lo, r_hi) in (((0, m.num_parallel), (0, row.num_parallel)),
                                       ((m.num_parallel, len(m.loop_ranges)), (row.num_parallel, n))):
        mine, theirs = kept(m, m_lo, m_hi), kept(row, r_lo, r_hi)
        if [m.loop_ranges[k] for k in mine] != [row.loop_ranges[k] for k in theirs]:
            return None
        pairs += zip(mine, theirs)
    loop_map = [AffineExpr((0,) * n, 0)] * len(m.loop_ranges)
    for k, j in pairs:
        loop_map[k] = AffineExpr.loop(n, j)
    return tuple(loop_map)


def _lands_on(value: Value, index: tuple[AffineExpr, ...], stored: tuple[AffineExpr, ...], ranges,
              graph: _Graph) -> bool:
    """Whether a read of ``value`` at ``index`` reads, through its views, the element stored at
    ``stored`` (both over the loop box ``ranges``)."""
    at = _through_views(value, index, ranges, graph)
    return at is not None and _same_point(at[1], stored, ranges)


def _taken_in(row: Generic, value: Value, m: Generic, loads: set,
              loop_map: tuple[AffineExpr, ...]) -> Generic:
    """``row`` folding ``m``'s one fold itself (its loops mapped by ``loop_map``), its ``loads``
    of it read as that fold's Final."""
    k = len([r for r in row.outputs if not r.row])
    n = len(row.loop_ranges)
    inputs = list(row.inputs)

    def renumbered(e: Expr) -> Expr | None:
        if isinstance(e, Load):
            value = m.inputs[e.binding]
            if not any(v is value for v in inputs):
                inputs.append(value)
            return Load(next(i for i, v in enumerate(inputs) if v is value),
                        tuple(compose(ix, loop_map, n) for ix in e.index), e.dtype)
        return Acc(k, e.dtype) if isinstance(e, Acc) else None

    # stored as ``row`` reads it (``value`` may be a view of m's result)
    moved = map_result(m.outputs[0], renumbered, binding=len(row.results), index=next(iter(loads)).index)
    final = Final(k, "f32")
    outputs = tuple(map_result(r, lambda e: final if e in loads else None) for r in row.outputs)
    return dataclasses.replace(row, inputs=inputs, results=row.results + [value],
                               outputs=outputs[:k] + (moved,) + outputs[k:])


def _same_point(a: tuple[AffineExpr, ...], b: tuple[AffineExpr, ...], ranges) -> bool:
    """Whether indices ``a`` and ``b`` are the same at every point of the loop box ``ranges``
    (they may differ in the loops of extent 1, which are 0)."""
    def key(ix: AffineExpr):
        return ix.const, tuple(c if _more_than_one(n) else 0 for c, n in zip(ix.coeffs, ranges))
    return len(a) == len(b) and all(key(x) == key(y) for x, y in zip(a, b))


def _chain_values(value: Value, graph: _Graph) -> list[Value]:
    """``value`` and the values it is a view of, down to one that is no view."""
    values = [value]
    while isinstance(graph.producers.get(values[-1]), View):
        values.append(graph.producers[values[-1]].source)
    return values


def _refined(row: Generic, shapes: list[tuple[int, ...]]) -> Generic | None:
    """``row`` with its parallel loops split where one of ``shapes`` (those of the values the
    chain reads and writes through views; each but its last dim spans the rows) splits them:
    a row kernel over 1536 collapsed rows reads the scores of 12 heads x 128 queries, which the
    contractions' loops index as two. None where the splits do not nest."""
    rows = num_elements(row.loop_ranges[:row.num_parallel])
    bounds = set()
    for shape in [row.loop_ranges[:row.num_parallel], *(s[:-1] for s in shapes)]:
        if num_elements(shape) == rows:
            bounds |= {num_elements(shape[k:]) for k in range(len(shape) + 1)}
    bounds = _nested(bounds)
    if bounds is None:
        return None
    top = len(bounds) - 1
    ranges = tuple(_quotient(bounds[k + 1], bounds[k]) for k in reversed(range(top)))
    if ranges == row.loop_ranges[:row.num_parallel]:
        return row
    n = len(ranges) + 1
    loop_map = []
    for d in range(row.num_parallel):  # loop k of ``ranges`` steps by bounds[top - 1 - k]
        low = bounds.index(num_elements(row.loop_ranges[d + 1:row.num_parallel]))
        high = bounds.index(num_elements(row.loop_ranges[d:row.num_parallel]))
        coeffs = [_quotient(bounds[top - 1 - k], bounds[low]) if low <= top - 1 - k < high else 0
                  for k in range(len(ranges))]
        loop_map.append(AffineExpr((*coeffs, 0), 0))
    loop_map.append(AffineExpr.loop(n, n - 1))

    loop_map = tuple(loop_map)

    def moved(e: Expr | None) -> Expr | None:
        return None if e is None else remap_loops(e, loop_map, n, lambda b: b)

    outputs = tuple(dataclasses.replace(
        r, value=moved(r.value), init=moved(r.init), epilogue=moved(r.epilogue),
        index=tuple(compose(ix, loop_map, n) for ix in r.index)) for r in row.outputs)
    return dataclasses.replace(row, outputs=outputs, loop_ranges=ranges + row.loop_ranges[-1:],
                               num_parallel=len(ranges))


def _nested(bounds: set) -> list | None:
    """``bounds`` (element counts, 1 among them) in increasing order where each divides the
    next, else None; sizes are ordered by that division alone."""
    if all(is_static(b) for b in bounds):
        out = sorted(bounds)
        return None if any(b % a for a, b in zip(out, out[1:])) else out
    out, rest = [1], set(bounds) - {1}
    while rest:
        below = [b for b in rest if _quotient(b, out[-1]) is not None
                 and all(_quotient(r, b) is not None for r in rest)]
        if len(below) != 1:
            return None
        out.append(below[0])
        rest.remove(below[0])
    return out


@dataclasses.dataclass(frozen=True)
class _Softmax:
    score: Expr  # what the row kernel takes the softmax of, over its loops
    masked_zero: bool
    p_dtype: str
    result: Result  # the row result P
    ops: tuple[Generic, ...] = ()  # the row kernel (and its max's) in the function


def _softmax(row: Generic, stored: int, graph: _Graph) -> _Softmax | None:
    """``row``'s structure where it is exactly a softmax over its one reduction loop whose row
    result is ``row.results[stored]`` and whose other results nothing reads."""
    if len(row.loop_ranges) - row.num_parallel != 1 or row.attention is not None \
            or _reads_sizes(row, stores=False):
        return None
    rows = [r for r in row.outputs if r.row]
    if len(rows) != 1 or rows[0].binding != stored:
        return None
    if any(graph.users[row.results[r.binding]] for r in row.outputs
           if not r.row and not any(row.results[r.binding] is x for x in row.inputs)):
        return None  # a fold read elsewhere (one that _with_max took in is read here alone)
    folds = fold_pattern(tuple(r for r in row.outputs if not r.row))
    maxima = [f for op, f in folds or () if op == "max"]
    if len(maxima) != 1:
        return None
    score = maxima[0]
    if score.dtype != "f32" or any(isinstance(e, Gather) for e in walk(score)):
        return None
    kinds = {}
    for k, r in enumerate(row.outputs):
        if not r.row:
            kind = _fold_kind(r, k, score)
            if kind is None or kind in kinds.values():
                return None
            kinds[k] = kind
    names = {kind: k for k, kind in kinds.items()}
    if set(names) not in ({"max", "sum"}, {"max", "sum", "all_masked"}):
        return None
    value = rows[0].value
    p_dtype = "f32"
    if isinstance(value, Cast) and value.op == "fptrunc":
        value, p_dtype = value.x, value.dtype
    masked_zero = "all_masked" in names
    if masked_zero:
        if not (isinstance(value, Select) and value.cond == Final(names["all_masked"], "i1")
                and _is_zero(value.a, row, graph)):
            return None
        value = value.b
    if value != Binary("div", _exp_shifted(score, names["max"]), Final(names["sum"], "f32"), "f32"):
        return None
    return _Softmax(score, masked_zero, p_dtype, rows[0])


def _exp_shifted(score: Expr, k_max: int) -> Expr:
    return Unary("exp", Binary("sub", score, Final(k_max, "f32"), "f32"), "f32")


def _is_zero(e: Expr, op: Generic, graph: _Graph) -> bool:
    """Whether ``e`` is f32 +0.0: a constant, or a read of a one-element constant tensor of it
    (torch's ``dense<0.0> : tensor<f32>`` broadcast over a run-time shape)."""
    if isinstance(e, Load) and e.dtype == "f32":
        c = graph.producers.get(_view_base(op.inputs[e.binding], graph))
        if isinstance(c, Constant) and c.parameter is None and not c.mutable:
            data = c.data.reshape(-1) if c.data is not None and c.data.size == 1 else None
            e = Const(c.splat if c.splat is not None else
                      float(data[0]) if data is not None and not np.signbit(data[0]) else None, "f32")
    return isinstance(e, Const) and e.dtype == "f32" and e.value == 0


def _fold_kind(r: Result, k: int, score: Expr) -> str | None:
    """Which of softmax's folds ``r`` (result k) is: max of the score, sum of exp(score - max),
    or whether every score is -inf."""
    if r.epilogue is not None or not isinstance(r.init, Const) or not isinstance(r.value, Binary):
        return None
    v, acc = r.value, Acc(k, r.value.dtype)
    if acc not in (v.a, v.b):
        return None
    term = v.b if v.a == acc else v.a
    init = r.init.value
    if v.op == "max" and term == score and init == float("-inf"):
        return "max"
    if v.op == "add" and init == 0 and isinstance(term, Unary) and isinstance(term.x, Binary) \
            and isinstance(term.x.b, Final):
        return "sum" if term == _exp_shifted(score, term.x.b.result) else None
    if v.op == "and" and v.dtype == "i1" and init is True and isinstance(term, Compare) \
            and term.predicate == "eq":
        x = term.a.x if isinstance(term.a, Cast) and term.a.op == "fpext" else term.a
        minus_inf = isinstance(term.b, Const) and term.b.value == float("-inf")
        return "all_masked" if x == score and minus_inf else None
    return None


def _build(g2: Generic, v: Expr, p_load: Load, row: Generic, softmax: _Softmax,
           graph: _Graph) -> Generic | None:
    """The attention op, where the score the row kernel reads comes from a contraction whose
    result nothing else reads; None otherwise."""
    width = len(row.loop_ranges) + 2  # the row's loops, e and c
    np_r = row.num_parallel
    e, j, c = np_r, np_r + 1, np_r + 2
    row_map = (*(AffineExpr.loop(width, d) for d in range(np_r)), AffineExpr.loop(width, j))
    g2_map = _consumer_loops(g2, p_load, row, softmax, row_map, e, j, width)
    if g2_map is None:
        return None
    found = _score_source(row, softmax, graph)
    if found is None:
        return None
    s_load, g1, s_index = found
    g1_map = _producer_loops(g1, tuple(compose(ix, row_map, width) for ix in s_index), c, width)
    if g1_map is None:
        return None
    loops = (*row.loop_ranges[:np_r], g2.loop_ranges[[d for d, ix in enumerate(g2_map)
                                                      if ix == AffineExpr.loop(width, e)][0]],
             row.loop_ranges[np_r], g1.loop_ranges[-1])
    if not is_static(loops[e]) or loops[e] > MAX_VALUE_DIM or not _fits(g1, g1_map, loops) \
            or not _one_to_one(g2_map[:g2.num_parallel], loops[:e + 1], g2.loop_ranges):
        return None
    inputs: list[Value] = []

    def moved(expr: Expr, op: Generic, moves) -> Expr:
        def binding(b: int) -> int:
            if not any(u is op.inputs[b] for u in inputs):
                inputs.append(op.inputs[b])
            return next(k for k, u in enumerate(inputs) if u is op.inputs[b])
        return remap_loops(expr, moves, width, binding)

    score = g1.outputs[0]
    dot = moved(score.epilogue, g1, g1_map) if score.epilogue is not None else Acc(0, "f32")
    # the row's score with its read of the contraction's result replaced by that result
    marked = transform(softmax.score, lambda x: Acc(0, "f32") if x == s_load else None)
    if any(x == s_load for x in walk(marked)):
        return None
    in_row = transform(moved(marked, row, row_map), lambda x: dot if x == Acc(0, "f32") else None)
    attention = Attention(
        score_init=moved(score.init, g1, g1_map), score_step=moved(score.value, g1, g1_map),
        score=in_row, masked_zero=softmax.masked_zero, p_dtype=softmax.p_dtype, e=e)
    if e in _loops_read(attention_nodes(attention)):
        return None
    out = g2.outputs[0]
    result = Result(binding=0, index=tuple(compose(ix, g2_map, width) for ix in out.index),
                    value=moved(v, g2, g2_map), init=moved(out.init, g2, g2_map),
                    epilogue=None if out.epilogue is None else moved(out.epilogue, g2, g2_map))
    op = Generic(inputs, list(g2.results), (result,), loops, e + 1, g2.location, "attention",
                 sources_of(g1, row, g2), attention)
    scores = math.prod(loops[:e]) * loops[j]
    if (not is_static(scores) or scores > MAX_SCORES) and not _tensor_cores(op, graph):
        return None  # (SIMT attention takes static sizes only)
    return op


def _consumer_loops(g2: Generic, p_load: Load, row: Generic, softmax: _Softmax, row_map,
                    e: int, j: int, width: int):
    """Each loop of ``g2`` over the attention op's loops: those g2 reads P with, from where the
    row kernel stores P (the same bytes through views); the one P does not depend on is O's
    column e; g2's reduction loop must be the row's, the keys j. None otherwise."""
    value = g2.inputs[p_load.binding]
    rows = tuple(compose(ix, row_map, width) for ix in
                 source_index(softmax.result.index, row.results[softmax.result.binding].shape,
                              value.shape, 0, row.loop_ranges) or ())
    plain = plain_positions(p_load.index)
    if not rows or len(set(plain.values())) != len(plain):
        return None
    loop_map: list[AffineExpr | None] = [None] * len(g2.loop_ranges)
    for position, ix in enumerate(p_load.index):
        if position in plain:
            loop_map[plain[position]] = rows[position]
        elif any(ix.coeffs) or rows[position] != AffineExpr((0,) * width, ix.const):
            return None  # a position that is neither one loop nor the constant stored there
    if loop_map[-1] != AffineExpr.loop(width, j):
        return None
    columns = [d for d, ix in enumerate(loop_map) if ix is None]
    if len(columns) > 1:  # a loop of one step that nothing reads P with stays at 0
        for d in [d for d in columns if g2.loop_ranges[d] == 1]:
            loop_map[d] = AffineExpr((0,) * width, 0)
        columns = [d for d in columns if g2.loop_ranges[d] != 1]
    if len(columns) != 1 or columns[0] >= g2.num_parallel:
        return None
    loop_map[columns[0]] = AffineExpr.loop(width, e)
    return tuple(loop_map)


def _score_source(row: Generic, softmax: _Softmax, graph: _Graph):
    """(the row kernel's load of S, the contraction storing S, the index it reads S at in the
    contraction's result, over the row's loops) where S is read there alone; else None."""
    found = []
    for x in walk(softmax.score):
        if not isinstance(x, Load):
            continue
        at = _through_views(row.inputs[x.binding], x.index, row.loop_ranges, graph)
        producer = graph.producers.get(at[0]) if at is not None else None
        if isinstance(producer, Generic) and _is_contraction(producer) \
                and _read_only_by(at[0], softmax.ops, graph) and producer.results[0] is at[0]:
            found.append((x, _unit_terms_dropped(producer), at[1]))
    return found[0] if len(found) == 1 else None


def _producer_loops(g1: Generic, s_index: tuple[AffineExpr, ...], c: int, width: int):
    """Each loop of ``g1`` over the attention op's loops, where the attention reads the element
    g1 stores at its result's index at ``s_index``; g1's reduction loop becomes c. None where
    an index position is neither one loop nor a constant the read matches."""
    index = g1.outputs[0].index
    loops: list[AffineExpr | None] = [None] * len(g1.loop_ranges)
    plain = plain_positions(index)
    for position, ix in enumerate(index):
        read = s_index[position]
        if position in plain:
            d = plain[position]
            if loops[d] is not None and loops[d] != read:
                return None
            loops[d] = read
        elif any(ix.coeffs) or read != AffineExpr((0,) * width, ix.const):
            return None
    loops[-1] = AffineExpr.loop(width, c)
    for d, ix in enumerate(loops):  # a loop of one step the result's index does not hold
        if ix is None and g1.loop_ranges[d] == 1:
            loops[d] = AffineExpr((0,) * width, 0)
    return None if any(ix is None for ix in loops) else tuple(loops)


def _fits(op: Generic, loop_map, loops: tuple[int, ...]) -> bool:
    """Whether each of ``op``'s loops, as the attention op's loops give it, stays in its range."""
    return all(compare("le", 0, lo) is True and compare("lt", hi, n) is True for (lo, hi), n in
               ((affine_range(ix, loops), n) for ix, n in zip(loop_map, op.loop_ranges)))


def _one_to_one(loop_map, ranges: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether ``loop_map`` (each of ``target``'s leading loops over loops of ``ranges``) takes
    every point of ``ranges`` to a point of ``target``'s and each of those from one point: O's
    every element computed once. The row-major offset of the image must enumerate the box as
    mixed-radix digits, each loop's coefficient the product of the ranges below it."""
    strides = [num_elements(target[d + 1:len(loop_map)]) for d in range(len(loop_map))]
    offset = [0] * len(ranges)
    for stride, ix in zip(strides, loop_map):
        if ix.const:
            return False
        offset = [o + stride * k for o, k in zip(offset, ix.coeffs)]
    digits = [(k, n) for k, n in zip(offset, ranges) if _more_than_one(n)]
    span = 1
    while digits:  # the digit of stride ``span`` next (in increasing order, as sizes cannot be sorted)
        at = next((i for i, (k, _) in enumerate(digits) if k == span), None)
        if at is None:
            return False
        span *= digits.pop(at)[1]
    return span == num_elements(target[:len(loop_map)])


def _loops_read(nodes) -> set[int]:
    """The loops the expressions ``nodes`` depend on."""
    dims: set[int] = set()
    for node in nodes:
        if isinstance(node, Load):
            dims |= {d for ix in node.index for d, k in enumerate(ix.coeffs) if k}
        elif isinstance(node, LoopIndex):
            dims.add(node.dim)
    return dims


# ---- recomputing producers ---------------------------------------------------------------

def _inline_one(op: Generic, graph: _Graph) -> Generic | None:
    """``op`` (an attention op) with one elementwise producer that only it reads recomputed in
    it, or None where there is none."""
    for b, value in enumerate(op.inputs):
        loads = [n for n in _nodes(op) if isinstance(n, (Load, Gather)) and n.binding == b]
        if any(isinstance(n, Gather) for n in loads):
            continue
        base = _view_base(value, graph)
        producer = graph.producers.get(base)
        if not isinstance(producer, Generic) or not _recomputable(producer, base) \
                or not _read_only_by(base, (op,), graph):
            continue
        new = _substitute(op, b, producer, graph)
        if new is not None and (_tensor_cores(new, graph) or not _tensor_cores(op, graph)):
            return new  # (a rotary q recomputed in the op would leave the tensor cores a product
            # of expressions, not of loads: it stays a kernel of its own)
    return None


def _view_base(value: Value, graph: _Graph) -> Value:
    while isinstance(graph.producers.get(value), View):
        value = graph.producers[value].source
    return value


def _read_only_by(value: Value, ops: tuple[Generic, ...], graph: _Graph) -> bool:
    """Whether ``ops`` are all that reads ``value``, directly or through views."""
    if graph.users[value] != len(graph.readers.get(value, ())):
        return False  # a function result
    return all(any(r is op for op in ops) or (isinstance(r, View) and not r.barrier
                                              and _read_only_by(r.result, ops, graph))
               for r in graph.readers.get(value, ()))


def _recomputable(producer: Generic, value: Value) -> bool:
    if producer.num_parallel != len(producer.loop_ranges) or len(producer.outputs) != 1 \
            or producer.attention is not None or _reads_sizes(producer):
        return False
    out = producer.outputs[0]
    nodes = list(walk(out.value))
    return (out.epilogue is None and producer.results[out.binding] is value
            and permutation_dims(out.index, len(producer.loop_ranges)) is not None
            and not any(isinstance(n, Gather) for n in nodes)
            and sum(isinstance(n, (Unary, Binary, Compare, Select)) for n in nodes) <= MAX_INLINED)


def _substitute(op: Generic, b: int, producer: Generic, graph: _Graph) -> Generic | None:
    out = producer.outputs[0]
    dims = permutation_dims(out.index, len(producer.loop_ranges))
    base = len(op.inputs)
    failed = []

    def leaf(e: Expr) -> Expr | None:
        if not isinstance(e, Load) or e.binding != b:
            return None
        at = _through_views(op.inputs[b], e.index, op.loop_ranges, graph)
        if at is None:
            failed.append(e)
            return None
        loop_map: list[AffineExpr] = [None] * len(dims)  # type: ignore[list-item]
        for position, d in enumerate(dims):
            loop_map[d] = at[1][position]
        return remap_loops(out.value, tuple(loop_map), len(op.loop_ranges), lambda k: base + k)

    new = _compact(_mapped(dataclasses.replace(op, inputs=op.inputs + producer.inputs,
                                               sources=sources_of(op, producer)), leaf))
    if failed or any(depth(root) > MAX_DEPTH for root in _roots(new)):
        return None
    return new


def _with_consumer(op: Generic, graph: _Graph):
    """(``op`` with the elementwise op that alone reads its result O as its epilogue, that op),
    or None: torch's rounding of a half-precision O to f16 after the batch matmul's view."""
    out = op.outputs[0]
    value = op.results[0]
    readers = graph.readers.get(value, [])
    chain = [value]
    while len(readers) == 1 and isinstance(readers[0], View) and graph.users[chain[-1]] == 1 \
            and not readers[0].barrier and _zero(readers[0].byte_offset):
        chain.append(readers[0].result)
        readers = graph.readers.get(chain[-1], [])
    consumer = readers[0] if len(readers) == 1 and graph.users[chain[-1]] == 1 else None
    if not isinstance(consumer, Generic) or consumer.attention is not None or is_scatter(consumer) \
            or consumer.num_parallel != len(consumer.loop_ranges) or len(consumer.outputs) != 1 \
            or _reads_sizes(consumer) or consumer.outputs[0].epilogue is not None:
        return None
    if any(isinstance(e, Gather) for e in result_nodes(consumer.outputs[0])):
        return None  # its computed indices are in its own loops
    loads = {e for e in result_nodes(consumer.outputs[0])
             if isinstance(e, Load) and consumer.inputs[e.binding] is chain[-1]}
    if len(loads) != 1:
        return None
    load = next(iter(loads))
    width = len(op.loop_ranges)
    loop_map = _consumer_map(op, load, consumer, chain[-1])
    if loop_map is None \
            or not _one_to_one(loop_map, op.loop_ranges[:op.num_parallel], consumer.loop_ranges) \
            or _offset(tuple(compose(ix, loop_map, width) for ix in load.index), chain[-1].shape) \
            != _offset(out.index, value.shape):
        return None  # the consumer must read O's every element where O stores it
    base = len(op.inputs)
    marked = transform(consumer.outputs[0].value, lambda e: Acc(0, "f32") if e == load else None)
    moved = remap_loops(marked, tuple(loop_map), width, lambda b: base + b)
    stored = out.epilogue if out.epilogue is not None else Acc(0, "f32")
    epilogue = transform(moved, lambda e: stored if e == Acc(0, "f32") else None)
    result = dataclasses.replace(out, epilogue=epilogue, index=tuple(
        compose(ix, tuple(loop_map), width) for ix in consumer.outputs[0].index))
    fused = dataclasses.replace(op, inputs=op.inputs + consumer.inputs, results=consumer.results,
                                outputs=(result,), sources=sources_of(op, consumer))
    return _compact(fused), consumer


def _consumer_map(op: Generic, load: Load, consumer: Generic, read: Value):
    """Each loop of ``consumer`` over ``op``'s loops: the same loops in order where the boxes
    are equal but for loops of extent 1 (which are 0), else where its ``load`` of O (through
    views, as ``read``) names one loop per position."""
    width = len(op.loop_ranges)
    ours = [d for d in range(op.num_parallel) if _more_than_one(op.loop_ranges[d])]
    theirs = [d for d, n in enumerate(consumer.loop_ranges) if _more_than_one(n)]
    if [op.loop_ranges[d] for d in ours] == [consumer.loop_ranges[d] for d in theirs]:
        loop_map = [AffineExpr((0,) * width)] * len(consumer.loop_ranges)
        for mine, d in zip(ours, theirs):
            loop_map[d] = AffineExpr.loop(width, mine)
        return tuple(loop_map)
    at = source_index(op.outputs[0].index, op.results[0].shape, read.shape, 0, op.loop_ranges)
    loops_read = position_loops(load.index)
    if at is None or loops_read is None or len(set(loops_read)) != len(consumer.loop_ranges):
        return None
    loop_map: list[AffineExpr] = [None] * len(consumer.loop_ranges)  # type: ignore[list-item]
    for position, d in enumerate(loops_read):
        loop_map[d] = at[position]
    return tuple(loop_map)


def _offset(index: tuple[AffineExpr, ...], shape: tuple[int, ...]) -> tuple:
    """The row-major element offset ``index`` reads in a value of ``shape``, as coefficients."""
    strides = [num_elements(shape[d + 1:]) for d in range(len(shape))]
    coeffs = [sum(st * ix.coeffs[k] for st, ix in zip(strides, index))
              for k in range(len(index[0].coeffs))] if index else []
    return tuple(coeffs), sum(st * ix.const for st, ix in zip(strides, index))


# ---- the attention op's expressions ----------------------------------------------------------

def _roots(op: Generic) -> list[Expr]:
    a = op.attention
    return [a.score_init, a.score_step, a.score, *result_roots(op.outputs[0])]


def _nodes(op: Generic):
    yield from attention_nodes(op.attention)
    yield from result_nodes(op.outputs[0])


def _mapped(op: Generic, leaf) -> Generic:
    """``op`` with ``transform(root, leaf)`` of each of its expressions."""
    a = op.attention
    attention = dataclasses.replace(a, score_init=transform(a.score_init, leaf),
                                    score_step=transform(a.score_step, leaf),
                                    score=transform(a.score, leaf))
    outputs = tuple(map_result(r, leaf) for r in op.outputs)
    return dataclasses.replace(op, outputs=outputs, attention=attention)


def _compact(op: Generic) -> Generic:
    """``op`` reading each of its inputs once, and only those it reads."""
    inputs: list[Value] = []
    numbers: dict[int, int] = {}
    for n in _nodes(op):
        if isinstance(n, (Load, Gather)) and n.binding not in numbers:
            value = op.inputs[n.binding]
            k = next((k for k, u in enumerate(inputs) if u is value), None)
            if k is None:
                inputs.append(value)
                k = len(inputs) - 1
            numbers[n.binding] = k

    def leaf(e: Expr) -> Expr | None:
        if isinstance(e, (Load, Gather)) and numbers[e.binding] != e.binding:
            return dataclasses.replace(e, binding=numbers[e.binding])
        return None

    return dataclasses.replace(_mapped(op, leaf), inputs=inputs)
