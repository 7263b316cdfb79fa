"""Transposed convolutions in sub-pixel form: a convolution over a zero-dilated image becomes one
ordinary convolution per output phase, and an interleave.

torch-mlir (and the ONNX importer through it) lowers ``conv_transpose`` with stride ``s`` as a
stride-1 convolution over the input written every ``s``-th element into zeros (a strided
``tensor.insert_slice`` into a zero fill). Along such a dim, output ``y = s*q + ph`` meets
nonzero image elements only at the taps ``k = k0 + s*t`` (one residue ``k0`` per phase ``ph``),
which read input element ``q + t + c``: a stride-1 convolution of the undilated input with every
``s``-th filter tap. So each phase is a convolution with ``1/s`` of the taps per strided dim
over a ``1/s`` share of the outputs: ``s^d`` times less work than multiplying the zeros (what
cuDNN and IREE's GPU path do too). Each phase is built as the model would have written it, a
zero pad (or crop) of the input, a sliced filter and a convolution, so the convolution pass
(flow/convolution.py) sees ordinary convolutions; a constant filter's slices fold at compile
time. One elementwise Generic then interleaves the phases into the result.

Only a sum of products ``acc + image * other`` qualifies: skipping a zero tap then drops a
zero term. The chain's ``0 * w`` of an infinite or NaN ``w`` gave NaN where the zero taps met
it; the sub-pixel form, like PyTorch's kernels, never multiplies those zeros. Anything else (a
max over the window, a filter read at a stride, a loop index in the body, run-time sizes, a phase
with no taps) keeps the convolution over the dilated image.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.scalar import zero
from pyree.compiler.kernel import (
    Acc,
    AffineExpr,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Gather,
    Load,
    LoopIndex,
    Result,
    Select,
    compose,
    result_nodes,
    transform,
)
from pyree.compiler.sizes import num_elements, static_shape
from pyree.compiler.tensor_program import Generic, Op, Value, View
from xdsl.dialects import tensor
from xdsl.ir import SSAValue


@dataclass(frozen=True)
class Dilated:
    """A value that is ``source`` (seen in ``shape``: a grouped convolution's expand_shape)
    written at ``offset + stride * i`` along each dim, zeros elsewhere."""

    source: Value
    shape: tuple[int, ...]
    offsets: tuple[int, ...]
    strides: tuple[int, ...]


@dataclass(frozen=True)
class _Dim:
    """One strided dim of the image: its output loop ``p``, tap loop ``k``, stride, the image
    index's offset from ``p + k`` to the source's ``s*i`` (``e``) and the source's extent."""

    image_dim: int
    p: int
    k: int
    stride: int
    e: int
    extent: int


@dataclass(frozen=True)
class _Phase:
    """One residue along one dim: outputs ``s*q + ph`` (``q < count``) take the taps
    ``k0 + s*t`` (``t < taps``), which read source element ``q + t + shift``."""

    ph: int
    k0: int
    taps: int
    count: int
    shift: int


def dilated(fn: FunctionLowering, ssa: SSAValue) -> Dilated | None:
    """What ``ssa`` is when a strided ``tensor.insert_slice`` wrote it into zeros, directly or
    through an expand_shape that splits only unstrided, whole dims (a grouped convolution's
    channels)."""
    op = ssa.owner
    if isinstance(op, tensor.ExpandShapeOp):
        inner = dilated(fn, op.src)
        value = fn.env.get(ssa)
        if inner is None or not isinstance(value, Value) or not static_shape(value.shape):
            return None
        groups = [[i.value.data for i in group] for group in op.reassociation]
        offsets, strides, shape = [], [], []
        for d, group in enumerate(groups):
            if len(group) == 1:
                offsets.append(inner.offsets[d])
                strides.append(inner.strides[d])
                shape.append(inner.shape[d])
                continue
            if (inner.strides[d], inner.offsets[d]) != (1, 0) or \
                    inner.shape[d] != num_elements(value.shape[j] for j in group):
                return None
            offsets += [0] * len(group)
            strides += [1] * len(group)
            shape += [value.shape[j] for j in group]
        return Dilated(inner.source, tuple(shape), tuple(offsets), tuple(strides))
    if not isinstance(op, tensor.InsertSliceOp) or op.offsets or op.sizes or op.strides:
        return None
    strides = tuple(op.static_strides.get_values())
    zero = fn.splat_of(op.dest)
    source = fn.env.get(op.source)
    if (all(s == 1 for s in strides) or zero is None or zero.value != 0
            or not isinstance(source, Value) or len(source.shape) != len(strides)
            or not static_shape(source.shape)):
        return None
    return Dilated(source, source.shape, tuple(op.static_offsets.get_values()), strides)


def split(fn: FunctionLowering, generic: Generic, image: int, d: Dilated) -> list[Op] | None:
    """The phase convolutions and the interleave that compute ``generic`` (a convolution
    reading the dilated value as its input ``image``), or None where the form does not apply."""
    dims = _strided_dims(generic, image, d)
    if dims is None:
        return None
    ranges = generic.loop_ranges
    phases = [[_phase(dim, ph, ranges) for ph in range(min(dim.stride, ranges[dim.p]))] for dim in dims]
    if any(p.taps == 0 for per_dim in phases for p in per_dim):
        return None
    ops: list[Op] = []
    source = _source(fn, d, ops)
    parts: list[tuple[tuple[_Phase, ...], Value]] = []
    for combo in itertools.product(*phases):
        part = _phase_convolution(fn, generic, image, source, dims, combo, ops)
        if part is None:
            return None
        parts.append((combo, part))
    ops.append(_interleave(generic, dims, parts))
    return ops


def _strided_dims(generic: Generic, image: int, d: Dilated) -> list[_Dim] | None:
    if (len(generic.outputs) != 1 or generic.attention is not None or not static_shape(generic.loop_ranges)
            or generic.num_parallel == len(generic.loop_ranges)):
        return None
    result = generic.outputs[0]
    if result.row or result.epilogue is not None or _image_factor(result, image) is None:
        return None
    nodes = list(result_nodes(result))
    if any(isinstance(n, (Gather, LoopIndex)) for n in nodes):
        return None
    loads = {n for n in nodes if isinstance(n, Load) and n.binding == image}
    if len(loads) != 1:
        return None
    index = next(iter(loads)).index
    shape = generic.inputs[image].shape
    dims, used = [], set()
    for j, (ix, off, s) in enumerate(zip(index, d.offsets, d.strides)):
        extent = d.shape[j]
        loops = [k for k, c in enumerate(ix.coeffs) if c]
        if s == 1 or extent == 1:
            if off != 0 or extent != shape[j]:
                return None
            continue
        if len(loops) != 2 or any(ix.coeffs[k] != 1 for k in loops):
            return None
        p, k = loops
        if p >= generic.num_parallel or k < generic.num_parallel or used & {p, k}:
            return None
        used |= {p, k}
        dims.append(_Dim(j, p, k, s, ix.const - off, extent))
    others = [ix for j, ix in enumerate(index) if j not in {dim.image_dim for dim in dims}]
    if not dims or any(ix.coeffs[k] for ix in others for k in used):
        return None
    return dims


def _image_factor(result: Result, image: int) -> Expr | None:
    """The image's Load where the result is ``acc + image * other`` (casts widening either)."""
    v = result.value
    if not isinstance(v, Binary) or v.op != "add":
        return None
    product = v.b if isinstance(v.a, Acc) else v.a if isinstance(v.b, Acc) else None
    if not isinstance(product, Binary) or product.op != "mul":
        return None
    sides = [_uncast(product.a), _uncast(product.b)]
    images = [x for x in sides if isinstance(x, Load) and x.binding == image]
    return images[0] if len(images) == 1 else None


def _uncast(e: Expr) -> Expr:
    while isinstance(e, Cast) and e.op in ("extf", "sitofp", "uitofp", "extsi", "extui"):
        e = e.x
    return e


def _phase(dim: _Dim, ph: int, ranges: tuple[int, ...]) -> _Phase:
    s, outputs, taps = dim.stride, ranges[dim.p], ranges[dim.k]
    k0 = (-ph - dim.e) % s
    return _Phase(ph, k0, max(0, -(-(taps - k0) // s)), -(-(outputs - ph) // s), (ph + k0 + dim.e) // s)


def _phase_convolution(fn: FunctionLowering, generic: Generic, image: int, source: Value, dims: list[_Dim],
                       combo: tuple[_Phase, ...], ops: list[Op]) -> Value | None:
    """One phase's convolution (its padded input and sliced filters emitted into ``ops``)."""
    n = len(generic.loop_ranges)
    loop_map = list(AffineExpr.identity(n))
    ranges = list(generic.loop_ranges)
    for dim, ph in zip(dims, combo):
        loop_map[dim.p] = AffineExpr.loop(n, dim.p, dim.stride, ph.ph)
        loop_map[dim.k] = AffineExpr.loop(n, dim.k, dim.stride, ph.k0)
        ranges[dim.p], ranges[dim.k] = ph.count, ph.taps
    taps = {dim.k for dim in dims}
    inputs = list(generic.inputs)
    inputs[image] = _padded_input(fn, source, dims, combo, ops)
    sliced: dict[int, tuple[AffineExpr, ...]] = {}
    for load in {x for x in result_nodes(generic.outputs[0]) if isinstance(x, Load)}:
        if load.binding == image or not any(load.index[j].coeffs[k] for j in range(len(load.index))
                                            for k in taps):
            continue
        if load.binding in sliced and sliced[load.binding] != load.index:
            return None
        filtered = _sliced_filter(fn, generic.inputs[load.binding], load.index, dims, combo, ops)
        if filtered is None:
            return None
        inputs[load.binding] = filtered
        sliced[load.binding] = load.index

    def leaf(e: Expr) -> Expr | None:
        if not isinstance(e, Load):
            return None
        if e.binding == image:
            index = list(e.index)
            for dim in dims:
                index[dim.image_dim] = AffineExpr(tuple(int(k in (dim.p, dim.k)) for k in range(n)))
            return Load(e.binding, tuple(index), e.dtype)
        if e.binding in sliced:  # a sliced filter's tap dim reads t alone
            return Load(e.binding, tuple(_tap_read(ix, taps, n) or compose(ix, tuple(loop_map), n)
                                         for ix in e.index), e.dtype)
        return Load(e.binding, tuple(compose(ix, tuple(loop_map), n) for ix in e.index), e.dtype)

    result = generic.outputs[0]
    out = generic.results[0]
    shape = list(out.shape)
    for dim, ph in zip(dims, combo):
        for j, ix in enumerate(result.index):
            if ix.coeffs[dim.p]:
                if ix != AffineExpr.loop(len(generic.loop_ranges), dim.p):
                    return None
                shape[j] = ph.count
    value = fn.new_value(out.dtype, tuple(shape), f"{out.name}_phase")
    phase_result = replace(result, value=transform(result.value, leaf),
                           init=None if result.init is None else transform(result.init, leaf))
    ops.append(replace(generic, inputs=inputs, results=[value], outputs=(phase_result,),
                       loop_ranges=tuple(ranges)))
    return value


def _tap_read(ix: AffineExpr, taps: set[int], n: int) -> AffineExpr | None:
    k = next((k for k in taps if ix.coeffs[k]), None)
    return None if k is None else AffineExpr.loop(n, k)


def _source(fn: FunctionLowering, d: Dilated, ops: list) -> Value:
    """The undilated source in the shape the convolution reads it (a View where reshaped)."""
    if d.shape == d.source.shape:
        return d.source
    view = fn.new_value(d.source.dtype, d.shape, f"{d.source.name}_grouped")
    ops.append(View(view, d.source))
    return view


def _padded_input(fn: FunctionLowering, source: Value, dims: list[_Dim], combo: tuple[_Phase, ...],
                  ops: list[Op]) -> Value:
    """``source`` along each strided dim from element ``shift`` on, ``count + taps - 1`` long,
    zero outside it: the image of one phase, as a padded convolution reads it."""
    rank = len(source.shape)
    shape = list(source.shape)
    index = list(AffineExpr.identity(rank))
    inside: Expr | None = None
    for dim, ph in zip(dims, combo):
        j = dim.image_dim
        shape[j] = ph.count + ph.taps - 1
        index[j] = AffineExpr.loop(rank, j, 1, ph.shift)
        conds = []
        if ph.shift < 0:
            conds.append(Compare("ge", LoopIndex(j), Const(-ph.shift, "index")))
        if shape[j] - 1 + ph.shift >= dim.extent:
            conds.append(Compare("lt", LoopIndex(j), Const(dim.extent - ph.shift, "index")))
        for c in conds:
            inside = c if inside is None else Binary("and", inside, c, "i1")
    inputs = Inputs()
    value: Expr = inputs.load(source, tuple(index))
    if inside is not None:
        value = Select(inside, value, zero(source.dtype), source.dtype)
    padded = fn.new_value(source.dtype, tuple(shape), f"{source.name}_phase")
    ops.append(Generic(inputs.values, [padded], (Result(0, AffineExpr.identity(rank), value),),
                       tuple(shape), rank, origin="tensor.pad"))
    return padded


def _sliced_filter(fn: FunctionLowering, filt: Value, index: tuple[AffineExpr, ...], dims: list[_Dim],
                   combo: tuple[_Phase, ...], ops: list[Op]) -> Value | None:
    """Every ``stride``-th tap of ``filt`` from the phase's residue on, along each dim its
    index reads a tap loop in (``k + const`` alone), or None for any other use of a tap loop."""
    rank = len(filt.shape)
    shape = list(filt.shape)
    slice_index = list(AffineExpr.identity(rank))
    for dim, ph in zip(dims, combo):
        reading = [j for j, ix in enumerate(index) if ix.coeffs[dim.k]]
        if len(reading) != 1:
            return None
        j = reading[0]
        ix = index[j]
        if sum(1 for c in ix.coeffs if c) != 1 or ix.coeffs[dim.k] != 1:
            return None
        shape[j] = ph.taps
        slice_index[j] = AffineExpr.loop(rank, j, dim.stride, ph.k0 + ix.const)
    inputs = Inputs()
    value = inputs.load(filt, tuple(slice_index))
    sliced = fn.new_value(filt.dtype, tuple(shape), f"{filt.name}_taps")
    ops.append(Generic(inputs.values, [sliced], (Result(0, AffineExpr.identity(rank), value),),
                       tuple(shape), rank, origin="tensor.extract_slice"))
    return sliced


def _interleave(generic: Generic, dims: list[_Dim], parts: list[tuple[tuple[_Phase, ...], Value]]) -> Generic:
    """The result: each element from the phase its output position falls in."""
    result = generic.outputs[0]
    out = generic.results[0]
    rank = len(out.shape)
    dim_of = {dim.p: j for dim in dims for j, ix in enumerate(result.index) if ix.coeffs[dim.p]}
    inputs = Inputs()
    value: Expr | None = None
    for combo, part in reversed(parts):
        index = [LoopIndex(j) for j in range(rank)]
        cond: Expr | None = None
        for dim, ph in zip(dims, combo):
            j = dim_of[dim.p]
            s = Const(dim.stride, "index")
            index[j] = Binary("div", LoopIndex(j), s, "index")
            c = Compare("eq", Binary("rem", LoopIndex(j), s, "index"), Const(ph.ph, "index"))
            cond = c if cond is None else Binary("and", cond, c, "i1")
        read = inputs.gather(part, tuple(index), generic.location)
        value = read if value is None else Select(cond, read, value, out.dtype)
    return Generic(inputs.values, [out], (Result(0, AffineExpr.identity(rank), value),), out.shape, rank,
                   generic.location, "tensor.insert_slice", generic.sources)
