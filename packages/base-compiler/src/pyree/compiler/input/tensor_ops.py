"""tensor dialect ops -> Views (reshapes, contiguous slices) and Generics (copies, pads).

Everything is static: offsets, sizes, strides and pad widths must be attributes. Pads and
inserts select, per element, between a load of the source and another value; the load on the
unselected side may index outside the source (``kernel.Select`` evaluates only one side).
"""

from __future__ import annotations

import numpy as np
from pyree.compiler.errors import CompileError
from pyree.compiler.input.body import convert, lower_block
from pyree.compiler.input.function import Dim, Empty, FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.run_time_sizes import size_of
from pyree.compiler.input.types import check_tensor_bytes, tensor_type_of
from pyree.compiler.kernel import (
    DTYPES,
    AffineExpr,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    LoopIndex,
    Result,
    Select,
    itemsize,
    size_value,
)
from pyree.compiler.sizes import Size, compare, is_static, num_elements, static_shape
from pyree.compiler.tensor_program import Constant, Generic, SizeCheck, Value, View
from xdsl.dialects import tensor
from xdsl.dialects.builtin import DYNAMIC_INDEX
from xdsl.ir import Operation, SSAValue


def lower_empty(fn: FunctionLowering, op: Operation) -> None:
    """tensor.empty (and linalg.init_tensor, its older name): its ``?`` dims are its operands,
    in order: run-time sizes, or constants."""
    where = location_of(op)
    dtype, shape = tensor_type_of(op.results[0].type, where, dynamic=True)
    sizes = iter(op.operands)
    shape = tuple(size_of(fn, next(sizes), where) if d is None else d for d in shape)
    check_tensor_bytes(shape, dtype, f"{op.name} of {list(shape)}", where)
    fn.env[op.results[0]] = Empty(dtype, shape)


def lower_cast(fn: FunctionLowering, op: tensor.CastOp) -> None:
    """The same value: a ``?`` of the result takes the source's dim, and a static dim of the
    result where the source has a run-time size holds that size to it (``FunctionLowering.
    unify``; a size only the host program knows stays so in the source, and the result is a
    view of it with the static shape)."""
    where = location_of(op)
    sdtype, _ = tensor_type_of(op.source.type, where, dynamic=True)
    dtype, shape = tensor_type_of(op.dest.type, where, dynamic=True)
    if sdtype != dtype or len(shape) != len(fn.entry(op.source, where).shape):
        raise CompileError(f"tensor.cast from {op.source.type} to {op.dest.type}", where)
    for s, d in zip(fn.entry(op.source, where).shape, shape):
        if d is not None:
            fn.unify(s, d, where)
    entry = fn.entry(op.source, where)
    static = tuple(s if d is None else d for s, d in zip(entry.shape, shape))
    if static == entry.shape:
        fn.env[op.dest] = entry
    else:
        source = fn.tensor(op.source, where)
        fn.emit(View(fn.bind_value(op.dest, dtype, static), source, 0, where))


def lower_reshape(fn: FunctionLowering, op: Operation) -> None:
    """collapse_shape, expand_shape, reshape: the same bytes under the result's shape. A
    ``?`` of the result is an expand's ``output_shape`` operand, or a collapse's product of
    the source dims it groups."""
    where = location_of(op)
    source = fn.tensor(op.operands[0], where)
    dtype, shape = tensor_type_of(op.results[0].type, where, dynamic=True)
    if None in shape:
        shape = _reshaped(fn, op, source, shape, where)
    fn.emit(View(fn.bind_value(op.results[0], dtype, shape), source, 0, where))


def _reshaped(fn: FunctionLowering, op: Operation, source: Value, shape: tuple,
              where: str) -> tuple:
    if isinstance(op, tensor.ExpandShapeOp):
        given = iter(op.dynamic_output_shape)
        return tuple(size_of(fn, next(given), where) if d is None else d for d in shape)
    if isinstance(op, tensor.CollapseShapeOp):
        groups = [[i.value.data for i in group] for group in op.reassociation]
        return tuple(num_elements(source.shape[i] for i in group) if d is None else d
                     for d, group in zip(shape, groups))
    shape_source = op.operands[1].owner if isinstance(op, tensor.ReshapeOp) else None
    if isinstance(shape_source, tensor.FromElementsOp):  # torch-mlir's view: sizes as elements
        given = tuple(size_of(fn, v, where) for v in shape_source.operands)
        if len(given) != len(shape) or any(d is not None and d != g for d, g in zip(shape, given)) \
                or num_elements(given) != num_elements(source.shape):
            raise CompileError(f"tensor.reshape to {list(given)} does not fit its result type "
                               f"{op.results[0].type} and its source's shape "
                               f"{list(source.shape)}, or pyree cannot tell that it does", where)
        return given
    raise CompileError(f"dynamic dimensions are not supported yet in the result of "
                       f"'{op.name}' ({op.results[0].type})", where)


def lower_extract_slice(fn: FunctionLowering, op: tensor.ExtractSliceOp) -> None:
    where = location_of(op)
    offsets, sizes, strides = _slice(fn, op, where)
    source = fn.tensor(op.source, where)
    _check_slice_bounds(fn, source.shape, offsets, sizes, strides, where)
    dtype, shape = tensor_type_of(op.result.type, where, dynamic=True)
    result = fn.bind_value(op.result, dtype, _sliced_shape(sizes, shape, where))
    kept = _kept_dims(sizes, result.shape, where)
    if not _data_offsets(offsets) and static_shape(offsets) \
            and _is_contiguous(source.shape, offsets, sizes, strides):
        rows = [num_elements(source.shape[d + 1:]) for d in range(len(offsets))]
        start = sum(o * r for o, r in zip(offsets, rows))
        fn.emit(View(result, source, start * itemsize(source.dtype), where))
        return
    rank = len(result.shape)
    inputs = Inputs()
    if _data_offsets(offsets):
        at = [_offset_in_kernel(fn, o, inputs, where) for o in offsets]
        value = inputs.gather(source, tuple(
            at[j] if kept[j] is None else Binary("add", at[j], Binary(
                "mul", LoopIndex(kept[j]), Const(int(strides[j]), "index"), "index"), "index")
            for j in range(len(offsets))), where)
    else:
        index = tuple(AffineExpr.loop(rank, kept[j], strides[j], offsets[j])
                      for j in range(len(offsets)))
        value = inputs.load(source, index)
    fn.emit(Generic(inputs.values, [result], (Result(0, AffineExpr.identity(rank), value),),
                    result.shape, rank, where, op.name))


def lower_insert_slice(fn: FunctionLowering, op: tensor.InsertSliceOp) -> None:
    """An offset or a size may be a run-time size (a transposed convolution over a dynamic
    length inserts its dilated input at ``[0, 0, k]`` of size ``n``), held inside the
    destination as an extract_slice is inside its source; strides are constants."""
    where = location_of(op)
    offsets, sizes, strides = _slice(fn, op, where)
    source = fn.tensor(op.source, where)
    dest = fn.tensor(op.dest, where)
    _check_slice_bounds(fn, dest.shape, offsets, sizes, strides, where,
                        "tensor.insert_slice writes past its destination")
    kept = _kept_dims(sizes, source.shape, where)
    rank = len(dest.shape)
    inputs = Inputs()
    if any(s != 1 for s, n in zip(strides, sizes) if n != 1) or _data_offsets(offsets):
        offsets = [_offset_in_kernel(fn, o, inputs, where) for o in offsets]
        inside, inserted = _strided_insert(inputs, source, offsets, sizes, strides, kept, where)
    else:
        index = tuple(AffineExpr.loop(rank, j, 1, -offsets[j]) for j in range(rank)
                      if kept[j] is not None)
        inside, inserted = _inside(offsets, sizes), inputs.load(source, index)
    value = Select(inside, inserted, inputs.load(dest, AffineExpr.identity(rank)), dest.dtype)
    result = fn.bind_value(op.result, dest.dtype, dest.shape)
    fn.emit(Generic(inputs.values, [result], (Result(0, AffineExpr.identity(rank), value),),
                    dest.shape, rank, where, op.name))


def _strided_insert(inputs: Inputs, source: Value, offsets: list[Expr], sizes: list[int],
                    strides: list[int], kept: list[int | None], where: str) -> tuple[Expr, Expr]:
    """(i1: the destination element is one the slice writes, the source element it gets) for
    an insert with strides: element ``offset + stride * i`` of a dim takes source element
    ``i``, so the elements between (a transposed convolution's zero-dilated input) keep the
    destination's. The source index ``(x - offset) / stride`` is no affine function of the
    loops: the source is read as a Gather, only where the test holds."""
    conds, index = [], []
    for d, (o, n, s) in enumerate(zip(offsets, sizes, strides)):
        rel = Binary("sub", LoopIndex(d), o, "index")
        conds.append(Compare("ge", rel, Const(0, "index")))
        conds.append(Compare("lt", rel, _index(s * (n - 1) + 1)))
        if s != 1 and n != 1:
            conds.append(Compare("eq", Binary("rem", rel, Const(int(s), "index"), "index"),
                                 Const(0, "index")))
            rel = Binary("div", rel, Const(int(s), "index"), "index")
        if kept[d] is not None:
            index.append(rel)
    return _all(conds), inputs.gather(source, tuple(index), where)


def lower_pad(fn: FunctionLowering, op: tensor.PadOp) -> None:
    where = location_of(op)
    low, high = list(op.static_low.get_values()), list(op.static_high.get_values())
    if op.low or op.high:
        raise CompileError("tensor.pad needs static low/high widths", where)
    source = fn.tensor(op.source, where)
    rank = len(source.shape)
    inputs = Inputs()
    block = op.region.block
    # A negative width crops (torch-mlir's col2im, F.fold, pads by -padding).
    padded = tuple(n + lo + hi for n, lo, hi in zip(source.shape, low, high))
    if any(isinstance(d, int) and d < 0 for d in padded):
        raise CompileError(f"tensor.pad low {low} high {high} crops more than the source's "
                           f"{list(source.shape)}", where)
    pad_value = lower_block(fn, block, {a: LoopIndex(d) for d, a in enumerate(block.args)},
                            inputs, list(range(rank)), where, padded)[0]
    index = tuple(AffineExpr.loop(rank, d, 1, -low[d]) for d in range(rank))
    # Along a run-time sized dim of n the source is inside [low, low + n): the kernel is given
    # ``low + n``; along one not padded every index is inside.
    inside = _inside_dims([(d, lo, n) for d, (lo, n) in enumerate(zip(low, source.shape))
                           if not isinstance(n, Size)])
    for d, (lo, hi, n) in enumerate(zip(low, high, source.shape)):
        if isinstance(n, Size) and (lo or hi):
            inside = _all([inside, Compare("ge", LoopIndex(d), Const(int(lo), "index")),
                           Compare("lt", LoopIndex(d), size_value(n + lo, "index"))])
    value = Select(inside, inputs.load(source, index), pad_value, source.dtype)
    result = fn.bind_value(op.result, source.dtype, padded)
    fn.emit(Generic(inputs.values, [result], (Result(0, AffineExpr.identity(rank), value),),
                    result.shape, rank, where, op.name))


def lower_concat(fn: FunctionLowering, op: tensor.ConcatOp) -> None:
    """Each element loads from the input whose span along ``dim`` holds it."""
    where = location_of(op)
    dim = op.dim.value.data
    parts = [fn.tensor(v, where) for v in op.inputs]
    starts = [0]
    for part in parts:
        starts.append(starts[-1] + part.shape[dim])
    dtype, shape = tensor_type_of(op.result.type, where, dynamic=True)
    # a ``?`` of the result: the parts' sum along ``dim``, the first part's size elsewhere
    result = fn.bind_value(op.result, dtype, tuple(
        s if s is not None else starts[-1] if d == dim else parts[0].shape[d]
        for d, s in enumerate(shape)))
    rank = len(result.shape)
    inputs = Inputs()
    value: Expr = _load_shifted(inputs, parts[-1], rank, dim, starts[-2])
    for k in range(len(parts) - 2, -1, -1):
        inside = Compare("lt", LoopIndex(dim), size_value(starts[k + 1], "index"))
        value = Select(inside, _load_shifted(inputs, parts[k], rank, dim, starts[k]), value,
                       result.dtype)
    fn.emit(Generic(inputs.values, [result], (Result(0, AffineExpr.identity(rank), value),),
                    result.shape, rank, where, op.name))


def _load_shifted(inputs: Inputs, value: Value, rank: int, dim: int, start: int) -> Expr:
    return inputs.load(value, tuple(AffineExpr.loop(rank, d, 1, -start if d == dim else 0)
                                    for d in range(rank)))


def lower_insert(fn: FunctionLowering, op: tensor.InsertOp) -> None:
    where = location_of(op)
    at = _constant_indices(fn, op.indices, "tensor.insert", where)
    dest = fn.tensor(op.dest, where)
    rank = len(dest.shape)
    inputs = Inputs()
    here = _all([Compare("eq", LoopIndex(d), Const(i, "index")) for d, i in enumerate(at)])
    value = Select(here, fn.scalar(op.scalar, inputs, where),
                   inputs.load(dest, AffineExpr.identity(rank)), dest.dtype)
    result = fn.result_value(op.result, where)
    fn.emit(Generic(inputs.values, [result], (Result(0, AffineExpr.identity(rank), value),),
                    dest.shape, rank, where, op.name))


def lower_extract(fn: FunctionLowering, op: tensor.ExtractOp) -> None:
    """A Load at constant indices; at computed ones (scalars of the function), a Gather."""
    where = location_of(op)
    source = fn.tensor(op.tensor, where)
    inputs = Inputs()
    if not all(isinstance(fn.entry(index, where), Const) for index in op.indices):
        at = tuple(fn.scalar(index, inputs, where) for index in op.indices)
        fn.define_scalar(op.result, inputs.gather(source, at, where), inputs, where, op.name)
        return
    at = _constant_indices(fn, op.indices, "tensor.extract", where)
    if not all(0 <= i < n for i, n in zip(at, source.shape)):
        raise CompileError(f"tensor.extract index {at} is outside {source.shape}", where)
    load = inputs.load(source, tuple(AffineExpr((), i) for i in at))
    fn.define_scalar(op.result, load, inputs, where, op.name)


def lower_from_elements(fn: FunctionLowering, op: tensor.FromElementsOp) -> None:
    where = location_of(op)
    dtype, shape = tensor_type_of(op.result.type, where)
    inputs = Inputs()
    elements = [fn.scalar(e, inputs, where) for e in op.elements]
    result = fn.result_value(op.result, where)
    if all(isinstance(e, Const) for e in elements):
        data = np.array([e.value for e in elements], DTYPES[dtype]).reshape(shape)
        fn.emit(Constant(result, data=data, location=where))
        return
    rank = len(shape)
    value: Expr = elements[-1]
    for flat in range(len(elements) - 2, -1, -1):
        at = np.unravel_index(flat, shape)
        value = Select(_all([Compare("eq", LoopIndex(d), Const(int(i), "index"))
                             for d, i in enumerate(at)]), elements[flat], value, dtype)
    fn.emit(Generic(inputs.values, [result], (Result(0, AffineExpr.identity(rank), value),),
                    shape, rank, where, op.name))


def lower_splat(fn: FunctionLowering, op: tensor.SplatOp) -> None:
    """A ``?`` dim of the result is its size operand, in order (``tensor.splat %x[%n]``)."""
    where = location_of(op)
    inputs = Inputs()
    value = fn.scalar(op.input, inputs, where)
    if op.dynamicSizes:
        dtype, shape = tensor_type_of(op.result.type, where, dynamic=True)
        sizes = iter(op.dynamicSizes)
        result = fn.bind_value(op.result, dtype, tuple(size_of(fn, next(sizes), where)
                                                       if d is None else d for d in shape))
    else:
        result = fn.result_value(op.result, where)
    if isinstance(value, Const) and static_shape(result.shape):
        fn.emit(Constant(result, splat=value.value, location=where))
        return
    rank = len(result.shape)
    fn.emit(Generic(inputs.values, [result], (Result(0, AffineExpr.identity(rank), value),),
                    result.shape, rank, where, op.name))


# ---- helpers -------------------------------------------------------------------------------

def _constant_indices(fn: FunctionLowering, indices, what: str, where: str) -> list[int]:
    at = []
    for index in indices:
        entry = fn.entry(index, where)
        if not isinstance(entry, Const):
            raise CompileError(f"{what} with non-constant indices is not supported yet", where)
        at.append(int(entry.value))
    return at


def _slice(fn: FunctionLowering, op, where: str) -> tuple[list, list, list]:
    """A slice's offsets, sizes and strides: an offset or a size may be a run-time size (a ``?``
    of the static ones, given by an operand computed from dims: ``x[:, -1]`` of a dynamic
    sequence starts at ``n - 1``); strides must be constants. An offset past the source is
    the kernels' run-time checks' to refuse. A stride given as an operand must be an
    ``arith.constant`` (torch-mlir writes a slice of an empty tensor's strides that way)."""
    given_sizes, given_offsets, given_strides = iter(op.sizes), iter(op.offsets), iter(op.strides)
    sizes = [size_of(fn, next(given_sizes), where) if n == DYNAMIC_INDEX else n
             for n in op.static_sizes.get_values()]
    offsets = [_offset(fn, next(given_offsets), where) if n == DYNAMIC_INDEX else n
               for n in op.static_offsets.get_values()]
    strides = [_constant_stride(fn, next(given_strides), op.name, where) if n == DYNAMIC_INDEX
               else n for n in op.static_strides.get_values()]
    return offsets, sizes, strides


def _constant_stride(fn: FunctionLowering, ssa: SSAValue, name: str, where: str) -> int:
    entry = fn.entry(ssa, where)
    if not isinstance(entry, Const):
        raise CompileError(f"'{name}' with dynamic strides is not supported yet", where)
    return int(entry.value)


def _offset(fn: FunctionLowering, ssa: SSAValue, where: str):
    """A slice's offset: a size (an int or a ``Size``), or the SSA value of one computed from
    tensor contents or a loop's counter (an RNN's step ``t`` inside its scf.for), which the
    slice's kernel reads, its places then gathered (clamped into range, as a Gather is)."""
    entry = fn.entry(ssa, where)
    return size_of(fn, ssa, where) if isinstance(entry, (Dim, Const)) else ssa


def _data_offsets(offsets: list) -> bool:
    return any(isinstance(o, SSAValue) for o in offsets)


def _check_slice_bounds(fn: FunctionLowering, shape: tuple, offsets: list, sizes: list,
                        strides: list, where: str,
                        what: str = "tensor.extract_slice reads past its source") -> None:
    """Each dim of a slice with run-time sizes stays inside its source, checked on the host
    when the sizes do not decide it (``offset + size * stride <= dim + stride - 1``: the last
    element read is below ``dim``), so that a slice past the end is an InvocationError before
    anything runs, on every target (a Vulkan shader that finds it out of range just does
    nothing). Inside a control-flow block, where the host checks nothing per call, each
    kernel's own run-time check is what remains."""
    for dim, offset, size, stride in zip(shape, offsets, sizes, strides):
        if isinstance(offset, SSAValue):  # read by the kernel: its gather clamps into range
            continue
        if all(is_static(v) for v in (dim, offset, size)):
            continue  # the static checks (input/checks.py) decide it
        bounds = {sym.name: (sym.min, sym.max) for sym in fn.symbols}
        inside = compare("le", offset + size * stride, dim + stride - 1, bounds)
        if not is_static(offset):  # an offset computed with a negative side may fall below 0
            starts = compare("le", 0, offset, bounds)
            inside = starts if inside is True else inside if starts is True else \
                False if False in (starts, inside) else starts * inside
        if inside is False:
            raise CompileError(f"{what}: offset {offset}, size {size}, stride {stride} of a "
                               f"dim of {dim}", where)
        if inside is not True and fn.ops is fn.top_ops:
            fn.size_checks.append(SizeCheck(
                inside, f"{what}: offset {offset}, size {size}, stride {stride} of a dim of "
                        f"{dim}", where))


def _sliced_shape(sizes: list, shape: tuple, where: str) -> tuple:
    """The (possibly rank-reduced) result shape of a slice of ``sizes``, its type's ``shape``
    with ``?`` as None: each size fills the next dim, or is a dropped unit dim."""
    kept = _kept_dims(sizes, shape, where)
    return tuple(size for size, r in zip(sizes, kept) if r is not None)


def _kept_dims(sizes: list, reduced_shape: tuple, where: str) -> list[int | None]:
    """For each sliced dim, its dim in the (possibly rank-reduced) shape (None there: ``?``,
    any size), or None if dropped. A unit size may be kept or dropped; the first way that
    matches every dim is taken (``[1, n, 8]`` into ``?x8`` drops the 1, not the ``?``)."""
    def match(i: int, r: int) -> list[int | None] | None:
        if i == len(sizes):
            return [] if r == len(reduced_shape) else None
        if r < len(reduced_shape) and reduced_shape[r] in (None, sizes[i]) \
                and (rest := match(i + 1, r + 1)) is not None:
            return [r, *rest]
        if is_static(sizes[i]) and sizes[i] == 1 and (rest := match(i + 1, r)) is not None:
            return [None, *rest]
        return None

    kept = match(0, 0)
    if kept is None:
        shown = tuple("?" if d is None else d for d in reduced_shape)
        raise CompileError(f"slice sizes {sizes} do not match the result shape {shown}", where)
    return kept


def _is_contiguous(shape, offsets, sizes, strides) -> bool:
    """Does the slice cover one run of the row-major source? Then it is a View."""
    first = next((d for d, n in enumerate(sizes) if n != 1), len(sizes))
    if any(strides[d] != 1 for d in range(len(sizes)) if sizes[d] != 1):
        return False
    return all(sizes[d] == shape[d] for d in range(first + 1, len(sizes)))


def _inside(offsets, sizes) -> Expr:
    """i1: is every loop index d within [offsets[d], offsets[d] + sizes[d])?"""
    return _inside_dims([(d, o, n) for d, (o, n) in enumerate(zip(offsets, sizes))])


def _inside_dims(dims: list[tuple[int, int, int]]) -> Expr:
    """i1: is loop index d within [o, o + n) for each (d, o, n)?"""
    conds = []
    for d, o, n in dims:
        conds.append(Compare("ge", LoopIndex(d), _index(o)))
        conds.append(Compare("lt", LoopIndex(d), _index(o + n)))
    return _all(conds)


def _index(value) -> Expr:
    """An index value: a constant, or a run-time size the kernel is given."""
    return Const(int(value), "index") if is_static(value) else size_value(value, "index")


def _offset_in_kernel(fn: FunctionLowering, offset, inputs: Inputs, where: str) -> Expr:
    """A slice's offset (``_offset``) in its kernel: an SSA value is a scalar the kernel reads."""
    if isinstance(offset, SSAValue):
        return convert(fn.scalar(offset, inputs, where), "index")
    return _index(offset)


def _all(conds: list[Expr]) -> Expr:
    out = conds[0] if conds else Const(True, "i1")
    for c in conds[1:]:
        out = Binary("and", out, c, "i1")
    return out


def lower_gather(fn: FunctionLowering, op: Operation) -> None:
    """tensor.gather: ``out[b..., s...] = source[c...]``, ``c`` the index vector at batch
    position ``b`` for the ``gather_dims`` (in order) and the slice loops ``s`` for the others;
    a gathered dim is dropped from the result, or kept as size 1."""
    where = location_of(op)
    source, indices = (fn.tensor(v, where) for v in op.operands)
    dims = list(op.properties["gather_dims"].get_values())
    out = fn.result_value(op.results[0], where)
    batch = len(indices.shape) - 1
    kept_gathered = len(out.shape) == batch + len(source.shape)
    rank = len(out.shape)
    loops = AffineExpr.identity(rank)
    inputs = Inputs()
    slice_loop = iter(range(batch, rank))
    index = []
    for d in range(len(source.shape)):
        if d in dims:
            k = dims.index(d)
            index.append(inputs.load(indices, loops[:batch] + (AffineExpr((0,) * rank, k),)))
            if kept_gathered:
                next(slice_loop)
        else:
            index.append(LoopIndex(next(slice_loop)))
    value = inputs.gather(source, tuple(index), where)
    fn.emit(Generic(inputs.values, [out], (Result(0, loops, value),), out.shape, rank, where,
                    op.name))


def lower_generate(fn: FunctionLowering, op: Operation) -> None:
    """``tensor.generate``: its body computes each element from the element's indices; ``?``
    dims are its size operands, in order."""
    where = location_of(op)
    dtype, shape = tensor_type_of(op.results[0].type, where, dynamic=True)
    sizes = iter(op.operands)
    shape = tuple(size_of(fn, next(sizes), where) if d is None else d for d in shape)
    result = fn.bind_value(op.results[0], dtype, shape)
    block, rank, inputs = op.regions[0].block, len(shape), Inputs()
    (value,) = lower_block(fn, block, {a: LoopIndex(d) for d, a in enumerate(block.args)},
                           inputs, list(range(rank)), where, shape)
    if value.dtype != dtype:
        raise CompileError(f"tensor.generate yields {value.dtype} for a tensor of {dtype}", where)
    fn.emit(Generic(inputs.values, [result], (Result(0, AffineExpr.identity(rank), value),),
                    shape, rank, where, op.name))


def bitcast_elements(fn: FunctionLowering, source: Value, ssa, dtype: str, shape: tuple,
                     where: str, origin: str) -> None:
    """Binds ``ssa`` to ``source``'s elements read as ``dtype`` (of the same width)."""
    result = fn.bind_value(ssa, dtype, shape)
    index = AffineExpr.identity(len(shape))
    inputs = Inputs()
    value = Cast("bitcast", inputs.load(source, index), dtype)
    fn.emit(Generic(inputs.values, [result], (Result(0, index, value),), shape, len(shape),
                    where, origin))


def lower_bitcast(fn: FunctionLowering, op: Operation) -> None:
    """``tensor.bitcast``: each element's bits as the result's element type."""
    where = location_of(op)
    source = fn.tensor(op.operands[0], where)
    dtype = tensor_type_of(op.results[0].type, where, dynamic=True)[0]
    if itemsize(dtype) != itemsize(source.dtype) or "i1" in (dtype, source.dtype):
        raise CompileError(f"tensor.bitcast from {source.dtype} to {dtype}: the element widths "
                           "differ", where)
    bitcast_elements(fn, source, op.results[0], dtype, source.shape, where, op.name)


def iota(fn: FunctionLowering, shape: tuple[int, ...], d: int, dtype: str, where: str) -> Value:
    """The index along ``d`` of every element, as ``dtype``."""
    value = fn.new_value(dtype, shape, "iota")
    fn.emit(Generic([], [value], (Result(0, AffineExpr.identity(len(shape)), convert(LoopIndex(d), dtype)),),
                    shape, len(shape), where, "iota"))
    return value


def permuted(fn: FunctionLowering, value: Value, order: list[int], where: str, origin: str,
             hint: str) -> Value:
    """``value`` with its dims in ``order`` (result dim k is dim order[k]), copied."""
    rank = len(order)
    shape = tuple(value.shape[k] for k in order)
    index = [None] * rank
    for k, d in enumerate(order):
        index[d] = AffineExpr.loop(rank, k)
    inputs = Inputs()
    load = inputs.load(value, tuple(index))
    out = fn.new_value(value.dtype, shape, hint)
    fn.emit(Generic(inputs.values, [out], (Result(0, AffineExpr.identity(rank), load),), shape,
                    rank, where, origin))
    return out
