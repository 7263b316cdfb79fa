"""Dispatch-region formation: fuse Generic ops so that one remaining Generic is one kernel.

Two rewrites, applied until neither fires:
- producer inlining: an elementwise Generic whose result has exactly one user is recomputed inside
  that user (its loads move into the user's loop space). Into a reduction's per-step ``value``,
  arithmetic is inlined only where the value reads each element once (a softmax's sum of
  exp(x - max)), data movement (loads, casts) always, so a matmul never recomputes arithmetic K
  times; into inits and epilogues, anything. Splat constants are inlined as ``Const`` wherever
  they are read.
- consumer fusion: an elementwise Generic that is the only user of a reduction's result becomes
  that reduction's epilogue (bias-add, activation after a matmul), so the intermediate never
  reaches memory.
- row fusion, once neither fires: a chain of reductions over the same rows and the elementwise op
  reading them joins one row kernel (``flow/row_fusion.py``: softmax, layernorm).
A value that is a function result, or is read by a check, a view or two ops, stays materialized.
Without ``recompute_broadcasts`` (CPU targets), producers fuse into readers of their own loop
space first, and only then into readers that read them under a broadcast, where a costly one
keeps its kernel (``flow/broadcasts.py``): by then it holds all the arithmetic of its space.
The passes before this one in ``flow/passes.py`` fold constants, constant gathers and views, so
a view between two ops no longer keeps its value materialized; the one after it merges each
reduction's adjacent loops (``flow/collapse.py``).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from pyree.compiler.flow.broadcasts import (
    arithmetic_under_broadcast,
    costly_under_broadcast,
    merge_broadcast_siblings,
)
from pyree.compiler.flow.rewrite import (
    compose,
    dedupe_inputs,
    drop_unread,
    is_data_movement,
    is_guarded_data_movement,
    map_results,
    permutation_dims,
    position_loops,
    remap_loops,
    transform,
    within_depth,
)
from pyree.compiler.flow.row_fusion import fuse_rows_once
from pyree.compiler.flow.split_reduction import has_contraction, is_contraction
from pyree.compiler.kernel import (
    MAX_DEPTH,
    Acc,
    AffineExpr,
    Cast,
    Const,
    Expr,
    Final,
    Gather,
    Load,
    Result,
    depth,
    fold_pattern,
    is_float,
    is_row_kernel,
    operands,
    result_nodes,
    scatter_result,
    walk,
)
from pyree.compiler.sizes import is_static
from pyree.compiler.tensor_program import (
    Check,
    Constant,
    Function,
    Generic,
    GlobalStore,
    If,
    Op,
    Value,
    While,
    defined_by,
    is_line_walk,
    is_scatter,
    read_by,
    sources_of,
)


def fuse_regions(function: Function, recompute_broadcasts: bool = True) -> Function:
    ops = _split_results(_drop_dead_results(function.ops, function.results), function.results)
    refused: dict = {}
    graph = _Graph(ops, function.results)
    cpu = not recompute_broadcasts
    while True:
        if _fuse_once(ops, graph, refused, defer=cpu, costly_stay=cpu) \
                or _copy_once(ops, graph, refused) \
                or (cpu and _fuse_once(ops, graph, refused, defer=False, costly_stay=True)):
            continue
        if not fuse_rows_once(ops):
            break
        graph = _Graph(ops, function.results)
    while True:  # dropping a dead op can leave its producers dead
        users = _Graph(ops, function.results).users
        live = [op for op in ops if not _is_dead(op, users)]
        if len(live) == len(ops):
            break
        ops = _drop_dead_results(live, function.results)
    if cpu:
        ops = merge_broadcast_siblings(ops)
    return dataclasses.replace(function, ops=ops)


def _split_results(ops: list[Op], results: list[Value]) -> list[Op]:
    """Each elementwise Generic of several results, each read by one Generic, as one Generic per
    result, so that each can inline into its reader. torch-mlir computes a scatter_add's index
    column and its updates in one such op, whose results no fusion took: histc wrote 4M int64
    places and 4M ones before its scatter read them."""
    users = _Graph(ops, results).users
    readers = Counter(v for op in ops if isinstance(op, Generic) for v in set(op.inputs))
    out: list[Op] = []
    for op in ops:
        if not isinstance(op, Generic) or len(op.outputs) < 2 or is_scatter(op) \
                or is_line_walk(op) or op.attention is not None \
                or op.num_parallel != len(op.loop_ranges) \
                or any(users[v] != 1 or readers[v] != 1 for v in op.results) \
                or any(isinstance(e, (Acc, Final)) for r in op.outputs for e in result_nodes(r)):
            out.append(op)
            continue
        out.extend(drop_unread(dataclasses.replace(op, results=[op.results[r.binding]],
                                                   outputs=(dataclasses.replace(r, binding=0),)))
                   for r in op.outputs)
    return out


class _Graph:
    """How many ops read each value (a function result counts as one more) and the Generic or
    Constant that defines it, kept current as fusion replaces ops: counting afresh after every
    fusion took half of forming MobileNet v2's regions. Values hash by identity."""

    def __init__(self, ops: list[Op], results: list[Value]):
        self.results = set(results)
        self.users: Counter = Counter(results)
        self.generic_users: Counter = Counter()  # of those, Generics
        self.producers: dict[Value, Op] = {}
        self.replace([], ops)

    def replace(self, old: list[Op], new: list[Op]) -> None:
        for op in old:
            self.users.subtract(set(read_by(op)))
            if isinstance(op, Generic):
                self.generic_users.subtract(set(op.inputs))
            for value in _defined(op):
                del self.producers[value]
        for op in new:
            self.users.update(set(read_by(op)))
            if isinstance(op, Generic):
                self.generic_users.update(set(op.inputs))
            self.producers.update(dict.fromkeys(_defined(op), op))


def _defined(op: Op) -> list[Value]:
    if isinstance(op, Generic):
        return op.results
    return [op.result] if isinstance(op, Constant) else []


def _fuse_once(ops: list[Op], graph: _Graph, refused: dict, defer: bool,
               costly_stay: bool) -> bool:
    """Fuses one producer into its only user. ``refused`` remembers the (user, input, producer)
    pairs that would not fuse: both ops are unchanged objects until one of them fuses, so the
    answer stands, and asking again on every pass made fusion quadratic in the model's size.
    It holds the ops themselves, so the ids it is keyed by stay theirs. With ``defer``, a
    producer of arithmetic whose user reads it under a broadcast is left for later while it may
    still take producers of its own; with ``costly_stay``, one that would repeat much work there keeps its
    kernel."""
    users, producers = graph.users, graph.producers
    for op in ops:
        if not isinstance(op, Generic) or is_line_walk(op) or _passes_widening(op, graph):
            continue
        scatter = scatter_result(op.outputs)
        for j, value in enumerate(op.inputs):
            producer = producers.get(value)
            if users[value] != 1 or producer is None or is_scatter(producer) \
                    or is_line_walk(producer) \
                    or (scatter is not None and j == scatter.scatter.start):
                continue
            key = (id(op), j, id(producer))
            if key in refused or (defer and isinstance(producer, Generic)
                                  and arithmetic_under_broadcast(op, producer)
                                  and _may_grow(producer, producers)):
                continue
            if isinstance(producer, Constant) and producer.splat is not None:
                fused = _inline_splat(op, j, producer)
            elif isinstance(producer, Generic) and costly_stay \
                    and costly_under_broadcast(op, producer):
                fused = None
            elif isinstance(producer, Generic):
                fused = _inline_producer(op, j, producer) or (
                    None if scatter is not None else _fuse_epilogue(producer, op, j))
            else:
                fused = None
            if fused is None:
                refused[key] = (op, producer)
            else:
                ops[ops.index(op)] = fused
                ops.remove(producer)
                graph.replace([op, producer], [fused])
                return True
    return False


def _may_grow(producer: Generic, producers: dict) -> bool:
    """Whether ``producer`` reads a value another Generic computes (which may yet fuse into it)."""
    return any(isinstance(producers.get(v), Generic) for v in producer.inputs)


def _widening(op: Generic) -> bool:
    """An elementwise Generic that only extends a float to a wider float (``fpext(x)``)."""
    return (op.num_parallel == len(op.loop_ranges) and len(op.outputs) == 1
            and isinstance(op.outputs[0].value, Cast) and op.outputs[0].value.op == "fpext"
            and isinstance(op.outputs[0].value.x, Load))


def _passes_widening(op: Generic, graph: _Graph) -> bool:
    """A widening cast read by one Generic takes no producer: it fuses into its reader's loads
    (data movement inlines even into a matmul's operands), and its producer keeps writing the
    narrow value. Else the producer would absorb it and write the wide one: an f16 layernorm
    whose output an f16 linear extends to f32 wrote f32, twice the bytes, and the product then
    read an f32 operand the tensor cores do not take."""
    if not _widening(op):
        return False
    value = op.results[0]
    return graph.users[value] == 1 and graph.generic_users[value] == 1


MAX_COPIES = 4       # users an elementwise producer may be recomputed in
MAX_COPIED_NODES = 48  # expression nodes of a producer worth recomputing
# Index arithmetic (a producer of few nodes that reads nothing but scalars: a decode step's
# masks over the cache's rows, its position clamped) is recomputed in any number of readers up
# to this, wherever they read it: a few integer operations where a dispatch of its own cost a
# launch (GPT-2's decode had four such kernels a step).
MAX_INDEX_COPIES = 64
MAX_INDEX_NODES = 12


def _copy_once(ops: list[Op], graph: _Graph, refused: dict) -> bool:
    """Recomputes one small elementwise producer inside each of its users (all Generics that
    read each of its elements once), so it never reaches memory: a softmax's exp(x - max) is
    read by the sum and by the division, and copying it makes both read x instead of an
    intermediate written once and read twice. Runs when no single-user fusion is left."""
    for producer in ops:
        if not isinstance(producer, Generic) or len(producer.results) != 1 or is_scatter(producer) \
                or is_line_walk(producer):
            continue
        value = producer.results[0]
        index = _index_arithmetic(producer)
        if not 2 <= graph.users[value] <= (MAX_INDEX_COPIES if index else MAX_COPIES) \
                or value in graph.results:
            continue
        readers = [op for op in ops if op is not producer and any(v is value for v in read_by(op))]
        key = (id(producer), *map(id, readers))
        if key in refused or len(list(walk(producer.outputs[0].value))) > MAX_COPIED_NODES:
            continue
        fused = []
        for op in readers:
            j = next((i for i, v in enumerate(op.inputs) if v is value), None) \
                if isinstance(op, Generic) else None
            scatter = scatter_result(op.outputs) if isinstance(op, Generic) else None
            copy = None if j is None or is_line_walk(op) \
                or not (index or _reads_once(op, j)) \
                or (is_scatter(op) and not (index and j != scatter.scatter.start)) \
                else _inline_producer(op, j, producer)
            if copy is None:
                break
            fused.append(copy)
        else:
            for op, copy in zip(readers, fused):
                ops[ops.index(op)] = copy
            ops.remove(producer)
            graph.replace([*readers, producer], fused)
            return True
        refused[key] = (producer, readers)
    return False


def _index_arithmetic(producer: Generic) -> bool:
    """Whether ``producer`` is a few integer or boolean operations of its loop indices and
    scalars (rank-0 inputs) alone (``MAX_INDEX_COPIES``)."""
    value = producer.outputs[0].value
    nodes = list(walk(value))
    return len(nodes) <= MAX_INDEX_NODES and not is_float(value.dtype) and all(
        not isinstance(e, (Load, Gather)) or not producer.inputs[e.binding].shape for e in nodes)


def _reads_once(op: Generic, j: int) -> bool:
    """Whether every read of input j in ``op`` is a load at a permutation of all op's loops."""
    n = len(op.loop_ranges)
    return all(isinstance(e, Load) and permutation_dims(e.index, n) is not None
               for r in op.outputs for e in result_nodes(r)
               if isinstance(e, (Load, Gather)) and e.binding == j)


def _drop_dead_results(ops: list[Op], results: list[Value]) -> list[Op]:
    """Generics without the results nobody reads, unless a kept result reads their accumulator.
    torch's amax and max(dim) import as max-with-indices; with the indices unused, the max alone
    is a plain fold, which every backend reduces in parallel instead of one thread per row."""
    users = _Graph(ops, results).users
    out = []
    for op in ops:
        if isinstance(op, Generic) and len(op.outputs) > 1:
            op = _without_unread_results(op, users)
        out.append(op)
    return out


def _without_unread_results(op: Generic, users: Counter) -> Generic:
    needed = {k for k, r in enumerate(op.outputs) if users[op.results[r.binding]] > 0}
    if not needed:
        return op  # dead as a whole: _is_dead drops it
    frontier = list(needed)
    while frontier:
        for e in result_nodes(op.outputs[frontier.pop()]):
            if isinstance(e, (Acc, Final)) and e.result not in needed:
                needed.add(e.result)
                frontier.append(e.result)
    if len(needed) == len(op.outputs):
        return op
    keep = sorted(needed)
    position = {k: i for i, k in enumerate(keep)}

    def leaf(e: Expr) -> Expr | None:
        return dataclasses.replace(e, result=position[e.result]) \
            if isinstance(e, (Acc, Final)) else None

    outputs = tuple(dataclasses.replace(r, binding=i)
                    for i, r in enumerate(map_results(tuple(op.outputs[k] for k in keep), leaf)))
    results = [op.results[op.outputs[k].binding] for k in keep]
    return drop_unread(dataclasses.replace(op, results=results, outputs=outputs))


def _is_dead(op: Op, users: Counter) -> bool:
    """Ops without side effects whose results nothing reads (control flow may hold checks)."""
    if isinstance(op, (Check, If, While, GlobalStore)):
        return False
    return all(users[v] == 0 for v in defined_by(op))


def _inline_splat(op: Generic, j: int, producer: Constant) -> Generic:
    const = Const(producer.splat, producer.result.dtype)
    return drop_unread(_rebuild(op, {j: lambda load: const}))


def _inline_producer(op: Generic, j: int, producer: Generic) -> Generic | None:
    """Recomputes ``producer`` (elementwise, one result) where ``op`` loads input ``j``. A padded
    read (a bounds check and a load) also inlines into a reduction that is not a contraction, a
    depthwise convolution's or a pooling's window: its compares cost less than the pad's own
    dispatch and pass over memory (MobileNet v2's pad kernels were a large part of its kernel
    time; BENCHMARKS.md). A contraction keeps plain operand loads, which its tensor-core
    templates need."""
    if producer.num_parallel != len(producer.loop_ranges) or len(producer.results) != 1:
        return None
    out = producer.outputs[0]
    dims = _written_loops(out.index, producer.results[0].shape, len(producer.loop_ranges))
    if dims is None or out.epilogue is not None:
        return None
    body = out.value
    if _gathers(op, j) or (_rereads_in_value_of_reduction(op, j) and not is_data_movement(body)
                           and not (is_guarded_data_movement(body) and not has_contraction(op))):
        return None
    if _path_to_load(op, j) - 1 + depth(body) > MAX_DEPTH:
        return None  # decided before building: a long chain asks again at every step
    base = len(op.inputs)
    inputs = op.inputs + producer.inputs

    def substitute(load: Load) -> Expr:
        loop_map: list[AffineExpr] = [None] * len(producer.loop_ranges)  # type: ignore[list-item]
        for position, d in enumerate(dims):
            if d is not None:
                loop_map[d] = load.index[position]
        return remap_loops(body, tuple(loop_map), len(op.loop_ranges), lambda b: base + b)

    fused = _rebuild(dataclasses.replace(op, inputs=inputs, sources=sources_of(op, producer)),
                     {j: substitute})
    if not within_depth(fused) or (_distinct_reads(op, j) > 1 and _nodes(fused) > MAX_COPIED_TREE):
        return None
    return dedupe_inputs(drop_unread(fused))


def _written_loops(index: tuple[AffineExpr, ...], shape: tuple, num_loops: int
                  ) -> tuple[int | None, ...] | None:
    """The loop each position of an elementwise result's ``index`` writes, where the positions
    are a permutation of all loops, or a unit dim written at 0 (None): torch-mlir writes a
    scatter's index column as ``[N, 1]`` from one loop."""
    dims = permutation_dims(index, num_loops)
    if dims is not None:
        return dims
    unit = [k for k, ix in enumerate(index)
            if shape[k] == 1 and ix.const == 0 and not any(ix.coeffs)]
    rest = permutation_dims(tuple(ix for k, ix in enumerate(index) if k not in unit), num_loops)
    if not unit or rest is None:
        return None
    loops = iter(rest)
    return tuple(None if k in unit else next(loops) for k in range(len(index)))


MAX_COPIED_TREE = 1024  # expression nodes of a kernel that recomputes a producer at several places


def _distinct_reads(op: Generic, j: int) -> int:
    """The places at which ``op`` reads input ``j`` (each recomputes an inlined producer)."""
    return len({e for r in op.outputs for e in result_nodes(r)
                if isinstance(e, (Load, Gather)) and e.binding == j})


def _nodes(op: Generic) -> int:
    """Distinct expression nodes of ``op``: a chain of producers each read at two places (a
    log-step scan, as torch's cummax was, read at i and i - 2^k) doubled with every step inlined, and
    compiling its last kernel took minutes."""
    return len({e for r in op.outputs for e in result_nodes(r)})


def _fuse_epilogue(root: Generic, consumer: Generic, j: int) -> Generic | None:
    """Makes elementwise ``consumer`` (reading ``root``'s only result as input j) root's epilogue."""
    if (root.num_parallel == len(root.loop_ranges) or len(root.results) != 1
            or is_row_kernel(root.outputs)
            or consumer.num_parallel != len(consumer.loop_ranges) or len(consumer.results) != 1
            or consumer.inputs[j] is not root.results[0] or _gathers(consumer, j)):
        return None
    # dims root writes at 0 (a unit dim of the value: a linear's [1, n] reshaped to [1, 1, n])
    # are read at 0 too, whatever the consumer's index there: both drop out of the matching
    written = [p for p, ix in enumerate(root.outputs[0].index) if not _at_zero(ix)]
    if any(root.results[0].shape[p] != 1 for p in range(len(root.outputs[0].index))
           if p not in written):
        return None
    root_dims = permutation_dims(tuple(root.outputs[0].index[p] for p in written),
                                 root.num_parallel)
    reads = {e.index for r in consumer.outputs for e in result_nodes(r)
             if isinstance(e, Load) and e.binding == j}
    if root_dims is None or len(reads) != 1:
        return None
    read_dims = _permutation_but_units(tuple(next(iter(reads))[p] for p in written),
                                       consumer.loop_ranges)
    if read_dims is None or any(consumer.loop_ranges[d] != root.loop_ranges[root_dims[position]]
                                for position, d in enumerate(read_dims)):
        return None  # the consumer reads part of the value (a slice): not the same loop space
    # consumer loop read_dims[i] walks dim i of the value, which root writes from its loop
    # root_dims[i]; a consumer loop of extent 1 that the read skips (a reshape's unit dim) is 0.
    n = len(root.loop_ranges)
    loop_map: list[AffineExpr] = [AffineExpr.loop(n, None)] * len(consumer.loop_ranges)
    for position, d in enumerate(read_dims):
        loop_map[d] = AffineExpr(tuple(int(k == root_dims[position]) for k in range(n)))
    base = len(root.inputs)
    inputs = root.inputs + consumer.inputs
    r0, c0 = root.outputs[0], consumer.outputs[0]
    finished = r0.epilogue if r0.epilogue is not None else Acc(0, r0.value.dtype)

    def leaf(e: Expr) -> Expr | None:
        return finished if isinstance(e, Load) and e.binding == base + j else None

    moved = remap_loops(c0.value, tuple(loop_map), n, lambda b: base + b)
    index = tuple(compose(ix, tuple(loop_map), n) for ix in c0.index)
    if _moves_matrix_dims(root, index):
        return None
    result = Result(binding=0, index=index, value=r0.value, init=r0.init,
                    epilogue=transform(moved, leaf))
    fused = Generic(inputs=inputs, results=list(consumer.results), outputs=(result,),
                    loop_ranges=root.loop_ranges, num_parallel=root.num_parallel,
                    location=root.location, origin=f"{root.origin}+{consumer.origin}",
                    sources=sources_of(root, consumer))
    return dedupe_inputs(drop_unread(fused)) if within_depth(fused) else None


def _moves_matrix_dims(root: Generic, index: tuple[AffineExpr, ...]) -> bool:
    """Whether a contraction would write its result with its m and n loops no longer the two
    innermost dims, in order, unit dims aside (an attention's ``transpose(p @ v)``; not a
    linear's ``[1, n]`` reshaped to ``[1, 1, n]``): the CPU and Vulkan emitters
    order loops by the result's strides, which then no longer leaves a matmul to match; the
    transpose stays a kernel of its own."""
    folds = fold_pattern(root.outputs)
    if not folds or not is_contraction(folds[0], root.num_parallel):
        return False
    m, n = root.num_parallel - 2, root.num_parallel - 1
    index = tuple(ix for ix in index if not _at_zero(ix))  # a unit dim written at 0 moves nothing
    return len(index) < 2 or index[-2:] != (AffineExpr.loop(len(root.loop_ranges), m),
                                            AffineExpr.loop(len(root.loop_ranges), n))


def _at_zero(ix: AffineExpr) -> bool:
    """Index 0 wherever the loops are (a run-time size in it is not known to be 0)."""
    return all(is_static(c) and c == 0 for c in (*ix.coeffs, ix.const))


def _permutation_but_units(index: tuple[AffineExpr, ...],
                           loop_ranges: tuple[int, ...]) -> tuple[int, ...] | None:
    """For an index that reads each loop of ``loop_ranges`` once, in some order, but may skip
    loops of extent 1, the loop of each position."""
    dims = position_loops(index)
    if dims is None or len(set(dims)) != len(dims) or any(
            loop_ranges[d] != 1 for d in range(len(loop_ranges)) if d not in dims):
        return None
    return dims


def _rereads_in_value_of_reduction(op: Generic, j: int) -> bool:
    """Whether a reduction's per-step value reads some element of input j more than once (a
    matmul reads A[m, k] for every n): arithmetic inlined there would be recomputed each time.
    A value that reads each element once (a softmax's sum of exp(x - max), a variance's sum of
    squares) computes the producer exactly as often as the producer itself would."""
    if op.num_parallel == len(op.loop_ranges):
        return False
    n = len(op.loop_ranges)
    return any(isinstance(e, Load) and e.binding == j and permutation_dims(e.index, n) is None
               for r in op.outputs for e in walk(r.value))


def _path_to_load(op: Generic, j: int) -> int:
    """The most nodes on a path from a root of ``op`` down to a load of input j (0 if none):
    inlining an expression of depth d there makes that path ``_path_to_load - 1 + d`` long."""
    longest: dict = {}
    for r in op.outputs:
        for e in result_nodes(r):
            if e not in longest:
                below = max((longest[c] for c in operands(e)), default=0)
                hit = isinstance(e, Load) and e.binding == j
                longest[e] = 1 if hit else below + 1 if below else 0
    return max(longest.values(), default=0)


def _gathers(op: Generic, j: int) -> bool:
    """Whether ``op`` gathers from input j: its elements are read at computed indices, so only
    a materialized value will do (fused loads may sit in a Gather's index, never its source)."""
    return any(isinstance(e, Gather) and e.binding == j for r in op.outputs for e in result_nodes(r))


def _rebuild(op: Generic, replace: dict) -> Generic:
    """Replaces every Load of input j (j in ``replace``) by ``replace[j](load)``."""

    def leaf(e: Expr) -> Expr | None:
        if isinstance(e, (Load, Gather)) and e.binding in replace:  # a Gather: splats only
            return replace[e.binding](e)
        return None

    return dataclasses.replace(op, outputs=map_results(op.outputs, leaf))
