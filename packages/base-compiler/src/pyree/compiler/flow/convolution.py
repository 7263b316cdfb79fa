"""Convolutions as GEMMs: window contractions become an im2col copy and a one-reduction contraction.

Every backend's fast contraction template wants ``acc + X * Y`` over ONE reduction loop, with the
output's last two parallel loops m and n, X independent of n and Y independent of m. A convolution
arrives as a Generic whose image operand mixes parallel and reduction loops (``oh*2 + kh``) and has
several reduction loops (c, kh, kw), so it fell to the generic reduction templates. This pass,
run before dispatch-region formation, rewrites such a Generic into

- ``patches``: a data-movement Generic, ``patches[front.., k.., back..] = image(...)`` over the
  image's parallel loops and the reduction loops in the filter's order, so a ``View`` collapses
  the reduction dims of both the filter and the patches into one K dim that means the same thing;
- a contraction over (batch.., m group, n group | K) reading the filter and patches views and
  writing the original result with its original index, so consumers still fuse into it as
  epilogues and bias producers into its init. ``collapse_loops`` (flow/collapse.py) later merges
  the m and n groups (oh, ow) into single loops once the epilogue is known.

When the image is on the n side (NCHW: m = f, n = oh*ow) the patches are K-major with the n group
innermost, so the patches copy and the GEMM's n-panel both stream contiguously; on the m side
(NHWC: m = n*oh*ow, n = f) K is innermost. A tensor.pad in front (a Select Generic) fuses into
the patches copy by producer inlining, so the padded image is never written. A convolution whose
image needs no window once unit reduction loops are dropped (1x1, stride 1) gets no patches at
all. Depthwise convolutions and pooling have no filter-only output loop (no reuse to win), so
they are left alone.
"""

from __future__ import annotations

import dataclasses
import math

from pyree.compiler.flow.rewrite import (
    compose,
    dedupe_inputs,
    drop_unread,
    permutation_dims,
    plain_positions,
    remap_loops,
    transform,
)
from pyree.compiler.kernel import AffineExpr, Cast, Expr, Load, Result, contraction_product, itemsize
from pyree.compiler.tensor_program import Function, Generic, Op, Value, View, is_line_walk, is_scatter

# The patches of a channels-last convolution, which targets with implicit GEMM (a backend's
# ``implicit_gemm``) gather into the GEMM's operand tiles instead of copying (flow/implicit_gemm.py).
IMPLICIT_PATCHES = "implicit_im2col"
TENSOR_CORE_DTYPES = ("f16", "bf16")
CHUNK_BYTES = 16  # a tensor-core operand tile's chunk: 8 16-bit or 4 f32 channels


def rewrite_convolutions(function: Function, implicit: bool = False, f32: bool = False) -> Function:
    ops: list[Op] = []
    for op in function.ops:
        ops.extend(rewrite_convolution(op, implicit, f32)
                   if isinstance(op, Generic) and not is_scatter(op) and not is_line_walk(op)
                   else [op])
    return dataclasses.replace(function, ops=ops)


def rewrite_convolution(op: Generic, implicit: bool = False, f32: bool = False) -> list[Op]:
    """``[op]`` unchanged, or the ops that replace it (views, patches, contraction). ``implicit``:
    a 16-bit convolution (and with ``f32`` an f32 one: cuda's --pyree-cuda-f32-matmul=tf32 or
    3xtf32) whose channels come in whole 16-byte chunks reads its image and filter
    channels-last (transposed where they are not), so that K walks (taps, channels) and each
    chunk of a patch is 16 contiguous bytes of the image, and its patches are marked for the
    GEMM to gather."""
    if _contraction(op) is None:
        return [op]
    op = _drop_unit_reductions(op)
    x, y = _contraction(op)
    fx, fy = _is_plain(op, x), _is_plain(op, y)
    if fx == fy:  # both plain: no window (collapse_loops merges what it can); neither: no filter
        return [op]
    filt, image = (x, y) if fx else (y, x)
    moved: list[Op] = []
    channels = _channel_loop(op, filt, image, f32) if implicit else None
    conv = op
    if channels is not None:
        moved, conv, filt, image = _channels_last(op, filt, image, channels)
    rewritten = _im2col(conv, filt, image, IMPLICIT_PATCHES if channels is not None else "im2col")
    return moved + rewritten if rewritten else [op]


def _channel_loop(op: Generic, filt: Load, image: Load, f32: bool = False) -> int | None:
    """The reduction loop that indexes one dim of both the filter and the image by itself (the
    input channels), when both operands are the same 16-bit type (what the tensor cores take;
    with ``f32`` f32 too) and the channels fill whole chunks."""
    dtype = op.inputs[image.binding].dtype
    if dtype not in TENSOR_CORE_DTYPES + (("f32",) if f32 else ()) or \
            op.inputs[filt.binding].dtype != dtype:
        return None
    plain = [set(plain_positions(load.index).values()) for load in (filt, image)]
    loops = [r for r in range(op.num_parallel, len(op.loop_ranges)) if r in plain[0] and r in plain[1]]
    if len(loops) != 1 or op.loop_ranges[loops[0]] % (CHUNK_BYTES // itemsize(dtype)):
        return None
    return loops[0]


def _channels_last(op: Generic, filt: Load, image: Load, channels: int):
    """(transposes, op, filter, image) with the channel dim of the image moved last and that of
    the filter moved after the filter's last reduction dim (K then walks taps, then channels).
    Each transpose is read through a barrier view, so region formation does not inline it back
    into the patches (a pad in front fuses into it; a constant filter's transpose folds)."""
    moved, inputs, new_load = [], list(op.inputs), {}
    reductions = set(range(op.num_parallel, len(op.loop_ranges)))
    for load, last in ((image, None), (filt, reductions)):
        dim = next(i for i, d in plain_positions(load.index).items() if d == channels)
        rank = len(load.index)
        to = rank - 1 if last is None else max(i for i, ix in enumerate(load.index)
                                               if any(ix.coeffs[d] for d in last))
        order = [i for i in range(rank) if i != dim]
        order.insert(to, dim)
        if order == list(range(rank)):
            continue
        source = inputs[load.binding]
        value = Value(source.dtype, tuple(source.shape[i] for i in order), f"{source.name}_cl")
        index = tuple(_unit(order.index(i), rank) for i in range(rank))
        read = Value(value.dtype, value.shape, f"{value.name}_v")
        moved += [Generic(inputs=[source], results=[value],
                          outputs=(Result(0, tuple(_unit(d, rank) for d in range(rank)),
                                          Load(0, index, load.dtype)),),
                          loop_ranges=value.shape, num_parallel=rank, location=op.location,
                          origin="channels_last"),
                  View(read, value, location=op.location, barrier=True)]
        new_load[load] = Load(len(inputs), tuple(load.index[i] for i in order), load.dtype)
        inputs.append(read)
    if not moved:
        return [], op, filt, image
    outputs = tuple(dataclasses.replace(r, value=transform(r.value, lambda e: new_load.get(e)))
                    for r in op.outputs)
    op = dataclasses.replace(op, inputs=inputs, outputs=outputs)
    return moved, op, new_load.get(filt, filt), new_load.get(image, image)


def _contraction(op: Generic) -> tuple[Load, Load] | None:
    """The two loads of ``acc + cast(a) * cast(b)``, the only result of a reduction."""
    if len(op.outputs) != 1 or op.num_parallel == len(op.loop_ranges):
        return None
    out = op.outputs[0]
    if permutation_dims(out.index, op.num_parallel) is None:
        return None
    product = contraction_product(out)
    if product is None:
        return None
    a, b = _load_under_casts(product.a), _load_under_casts(product.b)
    return None if a is None or b is None else (a, b)


def _load_under_casts(e: Expr) -> Load | None:
    while isinstance(e, Cast):
        e = e.x
    return e if isinstance(e, Load) else None


def _loops(load: Load) -> set[int]:
    return {d for ix in load.index for d, c in enumerate(ix.coeffs) if c}


def _is_plain(op: Generic, load: Load) -> bool:
    """Each index dim is one distinct loop, or 0 on a unit dim (a projected permutation)."""
    seen = set()
    for ix, size in zip(load.index, op.inputs[load.binding].shape):
        nz = [d for d, c in enumerate(ix.coeffs) if c]
        if not nz and ix.const == 0 and size == 1:
            continue
        if ix.const != 0 or len(nz) != 1 or ix.coeffs[nz[0]] != 1 or nz[0] in seen:
            return False
        seen.add(nz[0])
    return True


def _drop_unit_reductions(op: Generic) -> Generic:
    """Removes reduction loops of one iteration (a 1x1 filter's kh, kw), keeping at least one."""
    n, np_ = len(op.loop_ranges), op.num_parallel
    keep = [d for d in range(n) if d < np_ or op.loop_ranges[d] != 1]
    if len(keep) == np_:
        keep.append(n - 1)
    if len(keep) == n:
        return op
    loop_map = tuple(AffineExpr(tuple(int(keep[j] == d) for j in range(len(keep))))
                     for d in range(n))
    return _move(op, loop_map, tuple(op.loop_ranges[d] for d in keep), np_)


def _move(op: Generic, loop_map, ranges: tuple[int, ...], num_parallel: int) -> Generic:
    """``op`` in another loop space (``loop_map``: old loop -> affine over the new loops)."""
    n = len(ranges)

    def go(e):
        return None if e is None else remap_loops(e, loop_map, n, lambda b: b)

    outputs = tuple(Result(r.binding, tuple(compose(ix, loop_map, n) for ix in r.index),
                           go(r.value), go(r.init), go(r.epilogue)) for r in op.outputs)
    return dataclasses.replace(op, outputs=outputs, loop_ranges=ranges, num_parallel=num_parallel)


def _unit(d: int, n: int) -> AffineExpr:
    return AffineExpr(tuple(int(j == d) for j in range(n)))


def _im2col(op: Generic, filt: Load, image: Load, origin: str) -> list[Op] | None:
    ranges, np_ = op.loop_ranges, op.num_parallel
    n_loops = len(ranges)
    reductions = list(range(np_, n_loops))
    in_f, in_i = _loops(filt), _loops(image)
    cls = {}
    for d in range(np_):
        cls[d] = "s" if d in in_f and d in in_i else "f" if d in in_f else "i" if d in in_i else None
    if None in cls.values() or any(r not in in_f for r in reductions):
        return None
    # The filter's reduction dims, with only unit dims between them (a dropped 1-wide kh), are
    # one K dim of a view; their order is K's order.
    position = {next(d for d, c in enumerate(ix.coeffs) if c): i
                for i, ix in enumerate(filt.index) if any(ix.coeffs)}
    first = min(position[r] for r in reductions)
    last = max(position[r] for r in reductions)
    shape = op.inputs[filt.binding].shape
    in_k = set(position[r] for r in reductions)
    if any(i not in in_k and shape[i] != 1 for i in range(first, last + 1)):
        return None
    k_loops = sorted(reductions, key=lambda r: position[r])

    # The output's innermost run of one class is the n group; the run before it, of the other
    # class, the m group; every other parallel loop is a batch loop, kept in output order.
    order = list(permutation_dims(op.outputs[0].index, np_))
    n_cls = cls[order[-1]]
    if n_cls == "s":
        return None
    m_cls = "f" if n_cls == "i" else "i"
    split = len(order)
    while split > 0 and cls[order[split - 1]] == n_cls:
        split -= 1
    m_start = split
    while m_start > 0 and cls[order[m_start - 1]] == m_cls:
        m_start -= 1
    if m_start == split:
        return None  # no filter-only loop (depthwise): nothing to reuse, not a GEMM
    n_group = order[split:]

    # Patches: image loops before K, then K, then the n group if the image is the n side.
    back = n_group if n_cls == "i" else []
    front = [d for d in order if cls[d] in "is" and d not in back]
    p_loops = front + k_loops + back
    K = math.prod(ranges[r] for r in k_loops)
    image_value = op.inputs[image.binding]
    patches = Value(image_value.dtype, tuple(ranges[d] for d in p_loops), f"{_name(op)}_patches")
    p_map = tuple(_unit(p_loops.index(d), len(p_loops)) if d in p_loops
                  else AffineExpr((0,) * len(p_loops)) for d in range(n_loops))
    copy = Generic(inputs=[image_value], results=[patches],
                   outputs=(Result(0, tuple(_unit(d, len(p_loops)) for d in range(len(p_loops))),
                                   remap_loops(image, p_map, len(p_loops), lambda b: 0)),),
                   loop_ranges=patches.shape, num_parallel=len(p_loops), location=op.location,
                   origin=origin)
    p_shape = (tuple(ranges[d] for d in front) + (K,) + tuple(ranges[d] for d in back))
    p_view = Value(patches.dtype, p_shape, f"{patches.name}_k")

    # The contraction: parallel loops in output order, then K.
    n_new = np_ + 1
    c_map = tuple(_unit(order.index(d), n_new) if d < np_ else AffineExpr((0,) * n_new)
                  for d in range(n_loops))
    kdim = _unit(np_, n_new)
    filt_value = op.inputs[filt.binding]
    f_shape = filt_value.shape[:first] + (K,) + filt_value.shape[last + 1:]
    f_view = Value(filt_value.dtype, f_shape, f"{filt_value.name}_k")
    f_index = (tuple(compose(ix, c_map, n_new) for ix in filt.index[:first]) + (kdim,)
               + tuple(compose(ix, c_map, n_new) for ix in filt.index[last + 1:]))
    p_index = (tuple(c_map[d] for d in front) + (kdim,) + tuple(c_map[d] for d in back))
    base = len(op.inputs)
    new_load = {filt: Load(base, f_index, filt.dtype), image: Load(base + 1, p_index, image.dtype)}

    moved = _move(op, c_map, tuple(ranges[d] for d in order) + (K,), np_)
    out = op.outputs[0]
    value = transform(out.value, lambda e: new_load.get(e))
    result = dataclasses.replace(moved.outputs[0], value=value)
    contraction = dataclasses.replace(moved, inputs=op.inputs + [f_view, p_view], outputs=(result,))
    contraction = dedupe_inputs(drop_unread(contraction))

    # The patches are read through a barrier view even when it reshapes nothing (one reduction
    # loop): fusion never inlines through it, so the copy is not folded back into the GEMM.
    return [View(f_view, filt_value, location=op.location), copy,
            View(p_view, patches, location=op.location, barrier=True), contraction]


def _name(op: Generic) -> str:
    return op.results[0].name or "conv"
