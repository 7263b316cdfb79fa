"""StableHLO data movement: broadcast, reshape, transpose, slices, concatenate, pad, iota,
reverse, dynamic (update) slices. Each is a View or one parallel Generic whose loads are affine,
except where a start index is data (dynamic slices) or padding is interior: then a clamped
``Gather``. Dynamic start indices are clamped into range first, as the spec says.
"""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.scalar import zero
from pyree.compiler.input.stablehlo.common import (
    all_of,
    as_index,
    clamp,
    convert,
    emit_map,
    in_range,
    index_value,
    ints,
)
from pyree.compiler.input.stablehlo.elementwise import broadcast_load
from pyree.compiler.input.stablehlo.householder import lower_householder_product
from pyree.compiler.input.stablehlo.lapack import lapack_call, lower_lapack
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import AffineExpr, Binary, Compare, Const, Expr, LoopIndex, Result, Select
from pyree.compiler.tensor_program import Generic, Value, View
from xdsl.ir import Operation, SSAValue


def lower_broadcast_in_dim(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    shape = tensor_type_of(op.results[0].type, where)[1]
    bdims = ints(op, "broadcast_dimensions")
    emit_map(fn, op, lambda inputs: broadcast_load(fn, inputs, op.operands[0], shape, bdims,
                                                   where))


def lower_reshape(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    source = fn.tensor(op.operands[0], where)
    fn.emit(View(fn.result_value(op.results[0], where), source, 0, where))


def lower_get_dimension_size(fn: FunctionLowering, op: Operation) -> None:
    """Static shapes: the size is a constant."""
    shape = tensor_type_of(op.operands[0].type, location_of(op))[1]
    fn.env[op.results[0]] = Const(shape[ints(op, "dimension")[0]], "i32")


def lower_identity(fn: FunctionLowering, op: Operation) -> None:
    """optimization_barrier: the results are the operands."""
    for operand, result in zip(op.operands, op.results):
        fn.env[result] = fn.entry(operand, location_of(op))


def lower_custom_call(fn: FunctionLowering, op: Operation) -> None:
    """JAX's ``@shape_assertion`` (a check of dynamic dims, which are static here) is dropped,
    as IREE drops it; ``@ProductOfElementaryHouseholderReflectors`` (JAX's QR) is computed
    (householder.py), JAX's linear-algebra calls (lapack.py) and ``@ApproxTopK`` (exactly:
    sort.py); any other target is refused by name."""
    where = location_of(op)
    target = op.properties.get("call_target_name") or op.attributes.get("call_target_name")
    name = getattr(target, "data", None)
    if name == "shape_assertion" and not op.results:
        return
    if name == "ProductOfElementaryHouseholderReflectors":
        return lower_householder_product(fn, op)
    if name == "ApproxTopK":
        from pyree.compiler.input.stablehlo.sort import lower_approx_top_k
        return lower_approx_top_k(fn, op)
    if (kind := lapack_call(name or "")) is not None:
        return lower_lapack(fn, op, kind)
    solver = name and name.startswith(("lapack_", "cusolver_", "hipsolver_", "cu_", "hip_"))
    hint = (" — of JAX's LAPACK and cuSOLVER calls pyree computes potrf, getrf, trsm, geqrf, "
            "orgqr, syevd and gesdd (cholesky, lu, qr, eigh, svd, solve, inv, det, "
            "solve_triangular); not general eigenvalues (geev)") if solver else ""
    raise CompileError(f"stablehlo.custom_call @{name} is not supported (only JAX's "
                       f"@shape_assertion, @ProductOfElementaryHouseholderReflectors, "
                       f"@ApproxTopK and potrf, getrf, trsm, geqrf, orgqr, syevd, gesdd){hint}",
                       where)


def lower_transpose(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    perm = ints(op, "permutation")
    source = fn.tensor(op.operands[0], where)
    rank = len(perm)
    index = [None] * rank
    for j, d in enumerate(perm):
        index[d] = AffineExpr.loop(rank, j)
    emit_map(fn, op, lambda inputs: inputs.load(source, tuple(index)))


def lower_slice(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    starts, strides = ints(op, "start_indices"), ints(op, "strides", [])
    source = fn.tensor(op.operands[0], where)
    rank = len(starts)
    strides = strides or [1] * rank
    index = tuple(AffineExpr.loop(rank, d, strides[d], starts[d]) for d in range(rank))
    emit_map(fn, op, lambda inputs: inputs.load(source, index))


def lower_reverse(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    source = fn.tensor(op.operands[0], where)
    rank, flipped = len(source.shape), set(ints(op, "dimensions"))
    index = tuple(AffineExpr.loop(rank, d, -1, source.shape[d] - 1) if d in flipped
                  else AffineExpr.loop(rank, d) for d in range(rank))
    emit_map(fn, op, lambda inputs: inputs.load(source, index))


def lower_iota(fn: FunctionLowering, op: Operation) -> None:
    d = ints(op, "iota_dimension")[0]
    dtype = tensor_type_of(op.results[0].type, location_of(op))[0]
    emit_map(fn, op, lambda inputs: convert(LoopIndex(d), dtype))


def lower_concatenate(fn: FunctionLowering, op: Operation) -> None:
    """Each element loads from the operand whose span along the dimension holds it."""
    where = location_of(op)
    axis = ints(op, "dimension")[0]
    parts = [fn.tensor(v, where) for v in op.operands]
    dtype, shape = tensor_type_of(op.results[0].type, where)
    rank = len(shape)

    def build(inputs: Inputs) -> Expr:
        starts = [0]
        for part in parts:
            starts.append(starts[-1] + part.shape[axis])
        value: Expr | None = None
        for k in range(len(parts) - 1, -1, -1):
            index = tuple(AffineExpr.loop(rank, d, 1, -starts[k] if d == axis else 0) for d in range(rank))
            load = inputs.load(parts[k], index)
            value = load if value is None else Select(
                Compare("lt", LoopIndex(axis), Const(starts[k + 1], "index")), load, value, dtype)
        return value

    emit_map(fn, op, build)


def lower_pad(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    source = fn.tensor(op.operands[0], where)
    rank = len(source.shape)
    low = ints(op, "edge_padding_low")
    interior = ints(op, "interior_padding", [0] * rank)
    emit_map(fn, op, lambda inputs: padded_read(
        inputs, source, low, interior, fn.scalar(op.operands[1], inputs, where), where))


def padded_read(inputs: Inputs, source: Value, low: list[int], interior: list[int],
                pad_value: Expr, where: str) -> Expr:
    """The element of ``source`` padded by ``low`` (negative: cropped) and ``interior`` at the
    loop indices, or ``pad_value`` where the padded tensor holds padding (everywhere, for an
    empty ``source``: JAX pads one so in the gradient of cumprod)."""
    if 0 in source.shape:
        return pad_value
    rank = len(source.shape)
    conds: list[Expr] = []
    at: list[Expr] = []
    for d, n in enumerate(source.shape):
        step = interior[d] + 1
        q = Binary("add", LoopIndex(d), Const(-low[d], "index"), "index")
        conds += in_range(q, 0, (n - 1) * step + 1)
        if step > 1:
            conds.append(Compare("eq", Binary("rem", q, Const(step, "index"), "index"),
                                 Const(0, "index")))
            q = Binary("div", q, Const(step, "index"), "index")
        at.append(q)
    if all(s == 0 for s in interior):
        load = inputs.load(source, tuple(AffineExpr.loop(rank, d, 1, -low[d]) for d in range(rank)))
    else:
        load = inputs.gather(source, tuple(at), where)
    return Select(all_of(conds), load, pad_value, source.dtype)


def emit_padded(fn: FunctionLowering, source: Value, low: list[int], high: list[int],
                interior: list[int], pad: SSAValue | None, where: str, origin: str) -> Value:
    """A new Value: ``source`` padded with the scalar ``pad`` (None: zero), in front of
    convolutions and base-dilated windows."""
    if not any(low) and not any(high) and not any(interior):
        return source
    shape = tuple(lo + hi + n + (n - 1) * i
                  for n, lo, hi, i in zip(source.shape, low, high, interior))
    if min(shape, default=1) < 0:  # (an empty tensor, e.g. an empty batch, stays empty)
        raise CompileError(f"padding {low}/{high} takes more than all of {source.shape}", where)
    out = fn.new_value(source.dtype, shape, "padded")
    inputs = Inputs()
    pad_value = zero(source.dtype) if pad is None else fn.scalar(pad, inputs, where)
    value = padded_read(inputs, source, low, interior, pad_value, where)
    rank = len(shape)
    fn.emit(Generic(inputs.values, [out], (Result(0, AffineExpr.identity(rank), value),), shape, rank,
                    where, origin))
    return out


def _starts(fn: FunctionLowering, op: Operation, inputs: Inputs, first: int,
            shape: tuple[int, ...], sizes: tuple[int, ...], where: str) -> list[Expr]:
    """The start index operands, clamped into [0, dim - size]."""
    return [clamp(as_index(fn.scalar(v, inputs, where)), 0, n - s)
            for v, n, s in zip(op.operands[first:], shape, sizes)]


def _shifted(inputs: Inputs, value: Value, starts: list[Expr], sign: int, where: str) -> Expr:
    """``value`` at the loop indices plus ``sign`` times ``starts`` (affine when constant)."""
    rank = len(starts)
    if all(isinstance(s, Const) for s in starts):
        return inputs.load(value, tuple(AffineExpr.loop(rank, d, 1, sign * int(s.value))
                                        for d, s in enumerate(starts)))
    return inputs.gather(value, tuple(
        Binary("add" if sign > 0 else "sub", LoopIndex(d), s, "index")
        for d, s in enumerate(starts)), where)


def lower_dynamic_slice(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    source = fn.tensor(op.operands[0], where)
    sizes = tuple(ints(op, "slice_sizes"))
    emit_map(fn, op, lambda inputs: _shifted(
        inputs, source, _starts(fn, op, inputs, 1, source.shape, sizes, where), 1, where))


def lower_dynamic_update_slice(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    dest, update = fn.tensor(op.operands[0], where), fn.tensor(op.operands[1], where)
    rank = len(dest.shape)

    def build(inputs: Inputs) -> Expr:
        starts = _starts(fn, op, inputs, 2, dest.shape, update.shape, where)
        inside = []
        for d, (s, n) in enumerate(zip(starts, update.shape)):
            inside.append(Compare("ge", LoopIndex(d), s))
            inside.append(Compare("lt", LoopIndex(d), Binary("add", s, index_value(n), "index")))
        return Select(all_of(inside), _shifted(inputs, update, starts, -1, where),
                      inputs.load(dest, AffineExpr.identity(rank)), dest.dtype)

    emit_map(fn, op, build)


def lower_broadcast(fn: FunctionLowering, op: Operation) -> None:
    """stablehlo.broadcast: ``broadcast_sizes`` new leading dims, the operand in the rest."""
    where = location_of(op)
    shape = tensor_type_of(op.results[0].type, where)[1]
    rank = len(tensor_type_of(op.operands[0].type, where)[1])
    bdims = list(range(len(shape) - rank, len(shape)))
    emit_map(fn, op, lambda inputs: broadcast_load(fn, inputs, op.operands[0], shape, bdims,
                                                   where))


def lower_torch_index_select(fn: FunctionLowering, op: Operation) -> None:
    """``out[pre, i..., post] = input[pre, index[i...], post]`` (``dim``; ``batch_dims`` leading
    dims shared by input and index)."""
    where = location_of(op)
    source, index = (fn.tensor(v, where) for v in op.operands)
    dim, batch = ints(op, "dim")[0], ints(op, "batch_dims", [0])[0]
    rank, index_rank = len(source.shape), len(index.shape)
    loops = AffineExpr.identity(rank - 1 + index_rank - batch)

    def build(inputs: Inputs) -> Expr:
        position = inputs.load(index, loops[:batch] + loops[dim:dim + index_rank - batch])
        at = [LoopIndex(k) for k in range(dim)] + [as_index(position)] + [
            LoopIndex(k + index_rank - batch) for k in range(dim, rank - 1)]
        return inputs.gather(source, tuple(at), where)

    emit_map(fn, op, build)
