"""Per-channel affine ops after a product folded into it: inference batchnorm into the weights.

An inference-mode batchnorm after a convolution (or a linear layer) arrives as elementwise ops
``((y - mean) * invstd) * gamma + beta`` over the product's result y, each reading a constant
indexed by the output channel. Fused as the product's epilogue, it costs four vector ops per
output vector on the CPU, against nine multiply-adds a depthwise convolution does per output.
Folded here, before the convolutions are rewritten, a shift by a constant becomes part of the
product's starting value (``init``), and a scale by a constant multiplies the constant weight it
indexes by the same channel loop, as onnxruntime and PyTorch's inference fusions do; the ops
are gone. Only sums (``acc + term``) take them, not a max; only finite, non-zero scales fold (a
zero or infinite one would change what inf and NaN products give), into float weights whose
scaled values stay finite and non-zero, and only where the product's result has no other
reader; the sums round differently (sum of x * (w * s) against (sum of x * w) * s), within an
ulp or two of each term. Folding computes in f64 (a scaled weight) or f32 (a starting value of
f16 or bf16, flow/narrow_floats.py) and rounds once to the weight's or the value's type.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from pyree.compiler.flow.constant_folding import evaluate_elementwise, fold_constants, record_constant
from pyree.compiler.flow.narrow_floats import widened
from pyree.compiler.flow.rewrite import (
    compose,
    dedupe_inputs,
    drop_unread,
    plain_positions,
    position_loops,
    remap_loops,
)
from pyree.compiler.kernel import (
    DTYPES,
    Acc,
    AffineExpr,
    Binary,
    Cast,
    Const,
    Expr,
    Gather,
    Load,
    LoopIndex,
    Result,
    is_float,
    result_nodes,
    walk,
)
from pyree.compiler.tensor_program import (
    Constant,
    Function,
    Generic,
    Op,
    Value,
    is_scatter,
    read_by,
    sources_of,
)

FOLDABLE = {"add", "sub", "mul"}


def fold_channel_affine(function: Function) -> Function:
    function = fold_constants(function)
    known: dict[Value, np.ndarray] = {}
    readers: dict[int, int] = {}
    for op in function.ops:
        for v in read_by(op):
            readers[id(v)] = readers.get(id(v), 0) + 1
    for v in function.results:
        readers[id(v)] = readers.get(id(v), 0) + 1
    out: list[Op | None] = []
    front: list[Op] = []
    producer: dict[int, int] = {}  # a Generic's result -> its position in out
    changed: set[int] = set()
    for op in function.ops:
        record_constant(op, known)
        found = _fold(op, lambda v: out[producer[id(v)]] if id(v) in producer else None,
                      readers, known)
        if found is None:
            if isinstance(op, Generic):
                producer.update((id(r), len(out)) for r in op.results)
            out.append(op)
            continue
        product, new_ops = found  # in one chain, ops fold into the product one after another
        at = producer[id(product.results[0])]
        *constants, folded = new_ops
        for constant in constants:  # a scaled weight's unrounded values are known already
            if constant.result not in known:
                record_constant(constant, known)
        front += constants   # scaled weights: constants, defined ahead of every reader
        out[at] = folded
        producer[id(folded.results[0])] = at
        changed.add(at)
    for at in sorted(changed):
        found = _constant_init(out[at], known)
        if found is not None:
            front.append(found[0])
            out[at] = found[1]
    return dataclasses.replace(function, ops=front + [op for op in out if op is not None])


def _constant_init(product: Generic, known) -> tuple[Constant, Generic] | None:
    """The folded shifts and scales of ``product``'s starting value computed here, as one
    constant over the loops they read (per channel), so the kernel loads one value per output
    where it computed the chain."""
    r = product.outputs[0]
    loads = [e for e in walk(r.init) if isinstance(e, Load)]
    if not loads or any(product.inputs[e.binding] not in known for e in loads) \
            or any(isinstance(e, (Gather, LoopIndex, Acc)) for e in walk(r.init)):
        return None
    used = sorted({d for e in loads for ix in e.index for d, k in enumerate(ix.coeffs) if k})
    n = len(product.loop_ranges)
    to_used = tuple(AffineExpr.loop(len(used), used.index(d)) if d in used
                    else AffineExpr((0,) * len(used)) for d in range(n))
    bindings = sorted({e.binding for e in loads})
    ranges = tuple(product.loop_ranges[d] for d in used)
    value = Value(r.init.dtype, ranges, f"{product.results[0].name}_init")
    init = widened(remap_loops(r.init, to_used, len(used), bindings.index))  # one rounding
    table = Generic(inputs=[product.inputs[b] for b in bindings], results=[value],
                    outputs=(Result(0, AffineExpr.identity(len(used)), init),),
                    loop_ranges=ranges, num_parallel=len(used))
    data = evaluate_elementwise(table, [known[v] for v in table.inputs])
    if data is None:
        return None
    init = Load(len(product.inputs), tuple(AffineExpr.loop(n, d) for d in used), value.dtype)
    folded = dataclasses.replace(product, inputs=product.inputs + [value],
                                 outputs=(dataclasses.replace(r, init=init),))
    return Constant(value, data=data), dedupe_inputs(drop_unread(folded))


def _fold(op: Op, producer, readers, known) -> tuple[Generic, list[Op]] | None:
    """(the product, what replaces it) when ``op`` is a per-channel shift or scale of a
    product's result that folds into it, else None."""
    if not isinstance(op, Generic) or len(op.outputs) != 1 or op.num_parallel != len(op.loop_ranges) \
            or is_scatter(op):
        return None
    out, v = op.outputs[0], op.outputs[0].value
    if out.index != AffineExpr.identity(op.num_parallel) or not isinstance(v, Binary) \
            or v.op not in FOLDABLE or not is_float(v.dtype):
        return None
    for y, c in ((v.a, v.b), (v.b, v.a)) if v.op != "sub" else ((v.a, v.b),):
        if not (isinstance(y, Load) and isinstance(c, Load)) \
                or y.index != AffineExpr.identity(op.num_parallel):
            continue
        product = producer(op.inputs[y.binding])
        values = known.get(op.inputs[c.binding])
        if product is None or values is None or readers.get(id(op.inputs[y.binding])) != 1:
            continue
        folded = _into(product, op, v.op, c, values, known)
        if folded is not None:
            return product, folded
    return None


def _into(product: Generic, op: Generic, kind: str, c: Load, values: np.ndarray, known):
    """The ops replacing ``product`` with ``op``'s shift or scale by constant ``c`` folded in."""
    if len(product.outputs) != 1 or product.num_parallel == len(product.loop_ranges):
        return None
    r = product.outputs[0]
    if r.epilogue is not None or r.row or product.results[0].dtype != op.results[0].dtype:
        return None
    dims = position_loops(r.index)
    if dims is None or product.results[0].shape != op.results[0].shape:
        return None
    if _added_term(r.value) is None:  # a shift or scale passes through a sum, not a max
        return None
    n = len(product.loop_ranges)
    to_product = tuple(AffineExpr.loop(n, dims[d]) for d in range(op.num_parallel))
    index = tuple(compose(ix, to_product, n) for ix in c.index)
    channel = Load(len(product.inputs), index, c.dtype)
    init = r.init if r.init is not None else Const(0.0, r.value.dtype)
    inputs = list(product.inputs) + [op.inputs[c.binding]]
    new_ops: list[Op] = []
    if kind == "mul":
        if not (np.all(np.isfinite(values)) and np.all(values != 0)):
            return None
        weight = _weight(product, index, lambda b: inputs[b] in known)
        if weight is None:
            return None
        source = inputs[weight.binding]
        exact = _scaled(known[source], weight.index, values, index)
        if exact is None:
            return None
        with np.errstate(over="ignore", under="ignore"):
            scaled = exact.astype(DTYPES[source.dtype])
        if not np.all(np.isfinite(scaled)) or np.any((scaled == 0) != (known[source] == 0)):
            return None  # a weight the scale pushes past the type's range (f16) stays as it is
        new = Value(source.dtype, source.shape, f"{source.name}_scaled")
        new_ops.append(Constant(new, data=scaled, location=op.location))
        known[new] = exact  # a second scale (batchnorm's gamma after its invstd) rounds once
        inputs[weight.binding] = new
        init = init if init == Const(0.0, init.dtype) else Binary("mul", init, channel, init.dtype)
    else:
        init = Binary(kind, init, channel, init.dtype)
    result = dataclasses.replace(r, init=init)
    folded = dataclasses.replace(product, inputs=inputs, results=[op.results[0]], outputs=(result,),
                                 origin=f"{product.origin}+{op.origin}",
                                 sources=sources_of(product, op))
    return new_ops + [folded]


def _weight(product: Generic, channel_index, constant) -> Load | None:
    """The product's factor that is a load of a constant input (``constant(binding)``) indexed
    by every loop the channel constant reads, each as a dim of its own: the weight to scale."""
    term = _added_term(product.outputs[0].value)
    if not isinstance(term, Binary) or term.op != "mul":
        return None
    loops = {d for ix in channel_index for d, k in enumerate(ix.coeffs) if k}
    for side in (term.a, term.b):
        while isinstance(side, Cast) and side.op == "fpext":  # an int weight (sitofp) never scales
            side = side.x
        if (isinstance(side, Load) and is_float(side.dtype) and constant(side.binding)
                and loops <= set(plain_positions(side.index).values()) and _reads(product, side.binding) == 1):
            return side
    return None


def _added_term(value: Expr) -> Expr | None:
    """``t`` of a fold ``acc + t``, else None."""
    if not isinstance(value, Binary) or value.op != "add" or Acc(0, value.dtype) not in (value.a, value.b):
        return None
    return value.b if value.a == Acc(0, value.dtype) else value.a


def _reads(op: Generic, binding: int) -> int:
    """How many loads of ``op`` read input ``binding`` (a weight read twice must not scale)."""
    return sum(isinstance(e, Load) and e.binding == binding
               for r in op.outputs for e in result_nodes(r))


def _scaled(weights: np.ndarray, w_index, values: np.ndarray, c_index):
    """``weights`` times the channel constant at each weight element's channel loops, in f64:
    the caller rounds once to the weight's type (f16 weights were scaled in f16 per op)."""
    loop_dim = {loop: dim for dim, loop in plain_positions(w_index).items()}
    grid = np.indices(weights.shape, sparse=True)
    at = []
    for ix, size in zip(c_index, values.shape):
        flat = np.full((1,) * weights.ndim, ix.const, np.int64)
        for d, k in enumerate(ix.coeffs):
            if k:
                flat = flat + k * grid[loop_dim[d]]
        if flat.min() < 0 or flat.max() >= size:
            return None
        at.append(flat)
    values = values.astype(np.float64)
    # (a second scale's weights are the first's f64 products already: used as they are)
    return weights.astype(np.float64, copy=False) * (values[tuple(at)] if at else values)
