"""dot_general, dot and convolution -> one ``acc + lhs * rhs`` reduction Generic each.

That is the shape linalg's matmuls and convolutions take, so ``flow/convolution.py`` turns a
convolution into im2col + GEMM whatever its dimension numbers (they only permute indices).
Convolution padding and lhs dilation become a pad Generic in front, which fuses into the patch
copy; feature and batch groups are one more parallel loop: views split the grouped dims of
the operands and the result into (group, per group), so every index stays a single loop.
Operands convert to the result type as StableHLO's ``convert`` does (unsigned stays unsigned).
"""

from __future__ import annotations

import re

from pyree.compiler.errors import CompileError
from pyree.compiler.input.dialects.stablehlo import hlo_fields
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.scalar import zero
from pyree.compiler.input.stablehlo.common import convert, hlo_attr, ints
from pyree.compiler.input.stablehlo.shape_ops import emit_padded
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import Acc, AffineExpr, Binary, Expr, Result
from pyree.compiler.tensor_program import Generic, Value, View
from xdsl.ir import Operation


def _emit_contraction(fn: FunctionLowering, op: Operation, lhs: Value, rhs: Value,
                      lhs_index, rhs_index, ranges: tuple[int, ...], num_parallel: int,
                      out_dtype: str,
                      out_shape: tuple[int, ...] | None = None) -> None:
    """``out[p] = sum_r lhs[lhs_index] * rhs[rhs_index]`` (no reduction loops: the product);
    on booleans the spec's sum and product are or and and. ``out_shape``: compute into that
    shape and view it as the result."""
    where = location_of(op)
    inputs = Inputs()
    add, mul = ("or", "and") if out_dtype == "i1" else ("add", "mul")
    product: Expr = Binary(mul, convert(inputs.load(lhs, lhs_index), out_dtype),
                           convert(inputs.load(rhs, rhs_index), out_dtype), out_dtype)
    n = len(ranges)
    index = tuple(AffineExpr.loop(n, d) for d in range(num_parallel))
    if num_parallel < n:
        output = Result(0, index, Binary(add, Acc(0, out_dtype), product, out_dtype),
                        zero(out_dtype))
    else:
        output = Result(0, index, product)
    if None in tensor_type_of(op.results[0].type, where, dynamic=True)[1]:  # a dot's ? dims
        result = fn.bind_value(op.results[0], out_dtype, tuple(ranges[:num_parallel]))
    else:
        result = fn.result_value(op.results[0], where)
    out = result if out_shape is None else fn.new_value(out_dtype, out_shape, "grouped")
    fn.emit(Generic(inputs.values, [out], (output,), ranges, num_parallel, where, op.name))
    if out is not result:
        fn.emit(View(result, out, 0, where))


def lower_dot_general(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    lhs, rhs = (fn.tensor(v, where) for v in op.operands[:2])
    lhs_shape, rhs_shape = lhs.shape, rhs.shape  # run-time sizes where the types say ?
    if op.name == "stablehlo.dot":
        fields = {"lhs_contracting_dimensions": [len(lhs_shape) - 1],
                  "rhs_contracting_dimensions": [0]}
    else:
        fields = hlo_fields(hlo_attr(op, "dot_dimension_numbers"))
    lb, rb = fields.get("lhs_batching_dimensions", []), fields.get("rhs_batching_dimensions", [])
    lc = fields.get("lhs_contracting_dimensions", [])
    rc = fields.get("rhs_contracting_dimensions", [])
    lf = [d for d in range(len(lhs_shape)) if d not in lb + lc]
    rf = [d for d in range(len(rhs_shape)) if d not in rb + rc]
    num_parallel = len(lb) + len(lf) + len(rf)
    n = num_parallel + len(lc)

    def index(dims, batch, free, contracting, free_start):
        loops = []
        for d in dims:
            if d in batch:
                loops.append(batch.index(d))
            elif d in contracting:
                loops.append(num_parallel + contracting.index(d))
            else:
                loops.append(free_start + free.index(d))
        return tuple(AffineExpr.loop(n, loop) for loop in loops)

    for a, b in zip(lb + lc, rb + rc):  # batch and contracting dims pair up
        fn.unify(lhs.shape[a], rhs.shape[b], where)
    lhs_shape, rhs_shape = lhs.shape, rhs.shape
    ranges = tuple([lhs_shape[d] for d in lb] + [lhs_shape[d] for d in lf]
                   + [rhs_shape[d] for d in rf] + [lhs_shape[d] for d in lc])
    out_dtype = tensor_type_of(op.results[0].type, where, dynamic=True)[0]
    _emit_contraction(fn, op, lhs, rhs, index(range(len(lhs_shape)), lb, lf, lc, len(lb)),
                      index(range(len(rhs_shape)), rb, rf, rc, len(lb) + len(lf)),
                      ranges, num_parallel, out_dtype)


# The raw form's fields, per operand: (field, the compact form's name) of its two named dims.
_RAW_DIMS = (("input", (("batch", "b"), ("feature", "f"))),
             ("kernel", (("input_feature", "i"), ("output_feature", "o"))),
             ("output", (("batch", "b"), ("feature", "f"))))


def _layout(op: Operation, where: str) -> list[list[str]]:
    """The dim names of the lhs, rhs and result, from either spelling of ``dimension_numbers``:
    ``[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]`` (what JAX prints) or IREE's and XLA's
    ``raw input_batch_dimension = 0, input_feature_dimension = 3, input_spatial_dimensions =
    [1, 2], kernel_... , output_...``. Each must name every dim of its operand once."""
    attr = hlo_attr(op, "dimension_numbers")
    if attr.data.split(" ", 1)[0] == "raw":
        fields = hlo_fields(attr)
        layouts = []
        for prefix, named in _RAW_DIMS:
            dims = {d: str(s) for s, d in enumerate(fields.get(f"{prefix}_spatial_dimensions", []))}
            for key, name in named:
                value = fields.get(f"{prefix}_{key}_dimension")
                if isinstance(value, list) and len(value) == 1:
                    dims[value[0]] = name
            layouts.append([dims.get(d, "?") for d in range(max(dims, default=-1) + 1)])
    else:
        layouts = [part.split(",") for part in re.findall(r"\[([^\]]*)\]", attr.data.replace(" ", ""))]
    ranks = [len(tensor_type_of(v.type, where)[1]) for v in (*op.operands[:2], op.results[0])]
    spatial = [str(s) for s in range(ranks[0] - 2)]
    if len(layouts) != 3 or any(sorted(layout) != sorted([*names, *spatial]) or len(layout) != rank
                                for layout, names, rank in zip(layouts, ("bf", "io", "bf"), ranks)):
        raise CompileError(f"stablehlo.convolution: dimension_numbers <{attr.data}> do not name "
                           f"each dim of its {ranks[0]}-d operands and result once "
                           "(batch/feature, kernel input/output feature, and the spatial dims)",
                           where)
    return layouts


def lower_convolution(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    lhs_layout, rhs_layout, out_layout = _layout(op, where)
    lhs_shape = tensor_type_of(op.operands[0].type, where)[1]
    out_dtype, out_shape = tensor_type_of(op.results[0].type, where)
    spatial = len(lhs_layout) - 2
    strides = ints(op, "window_strides", [1] * spatial)
    padding = ints(op, "padding", [0] * 2 * spatial)
    lhs_dil = ints(op, "lhs_dilation", [1] * spatial)
    rhs_dil = ints(op, "rhs_dilation", [1] * spatial)
    reverse = ints(op, "window_reversal", [0] * spatial)
    fgc = ints(op, "feature_group_count", [1])[0]
    bgc = ints(op, "batch_group_count", [1])[0]
    rhs_shape = tensor_type_of(op.operands[1].type, where)[1]
    _check_window(lhs_shape, rhs_shape, out_shape, (lhs_layout, rhs_layout, out_layout),
                  strides, padding, lhs_dil, rhs_dil, reverse, fgc, bgc, where)

    # The lhs padded and dilated: a Generic of its own, fused later into the patch copy.
    low, high, interior = ([0] * len(lhs_shape) for _ in range(3))
    for s in range(spatial):
        d = lhs_layout.index(str(s))
        low[d], high[d], interior[d] = padding[2 * s], padding[2 * s + 1], lhs_dil[s] - 1
    lhs = fn.tensor(op.operands[0], where)
    padded = emit_padded(fn, lhs, low, high, interior, None, where, op.name)
    _conv_generic(fn, op, padded, fn.tensor(op.operands[1], where), lhs_layout, rhs_layout,
                  out_layout, out_dtype, out_shape, strides, rhs_dil, reverse, fgc, bgc)


def _check_window(lhs_shape, rhs_shape, out_shape, layouts, strides, padding, lhs_dil, rhs_dil,
                  reverse, fgc, bgc, where: str) -> None:
    """The window attributes are as many as the spatial dims and in range, the groups divide
    what they split, and the result has StableHLO's shape for them (a smaller declared result
    would otherwise be computed in part, silently)."""
    lhs_layout, rhs_layout, out_layout = layouts
    spatial = len(lhs_layout) - 2

    def refuse(what: str):
        raise CompileError(f"stablehlo.convolution: {what}", where)

    for name, values, count, low in (("window_strides", strides, spatial, 1),
                                     ("lhs_dilation", lhs_dil, spatial, 1),
                                     ("rhs_dilation", rhs_dil, spatial, 1),
                                     ("window_reversal", reverse, spatial, None),  # i1: -1
                                     ("padding", padding, 2 * spatial, None)):
        if len(values) != count or (low is not None and min(values, default=low) < low):
            refuse(f"{name} {values} should be {count} values" + (f" of at least {low}"
                                                                 if low is not None else ""))
    lhs = dict(zip(lhs_layout, lhs_shape))
    rhs = dict(zip(rhs_layout, rhs_shape))
    if fgc < 1 or bgc < 1 or (fgc > 1 and bgc > 1):
        refuse(f"feature_group_count {fgc} and batch_group_count {bgc}: both at least 1, "
               "and not both above 1")
    if lhs["f"] % fgc or lhs["b"] % bgc or rhs["o"] % (fgc * bgc):
        refuse(f"the groups ({fgc} of features, {bgc} of batches) do not divide the input "
               f"features ({lhs['f']}), batch ({lhs['b']}) and output features ({rhs['o']})")
    expected = {"b": lhs["b"] // bgc, "f": rhs["o"]}
    for s in range(spatial):
        size = (lhs[str(s)] - 1) * lhs_dil[s] + 1 + padding[2 * s] + padding[2 * s + 1]
        window = (rhs[str(s)] - 1) * rhs_dil[s] + 1
        expected[str(s)] = max(0, (size - window) // strides[s] + 1) if lhs[str(s)] else 0
    shape = tuple(expected[name] for name in out_layout)
    if shape != tuple(out_shape):
        refuse(f"the result should be {'x'.join(map(str, shape))} for these operands and "
               f"window, not {'x'.join(map(str, out_shape))}")


def _split(fn: FunctionLowering, value: Value, layout: list[str], name: str, groups: int,
           where: str) -> tuple[Value, list[str]]:
    """``value`` viewed with dim ``name`` split into (groups ``g``, the rest): adjacent dims
    of a row-major tensor, so no data moves."""
    if groups == 1:
        return value, layout
    d = layout.index(name)
    shape = value.shape[:d] + (groups, value.shape[d] // groups) + value.shape[d + 1:]
    grouped = fn.new_value(value.dtype, shape, f"{value.name}_groups")
    fn.emit(View(grouped, value, 0, where))
    return grouped, layout[:d] + ["g", name] + layout[d + 1:]


def _conv_generic(fn, op, lhs, rhs, lhs_layout, rhs_layout, out_layout, out_dtype, out_shape,
                  strides, rhs_dil, reverse, fgc, bgc) -> None:
    """Groups split the lhs feature (or batch) dim, the rhs and result output feature dims
    into (g, per group), so that every index is one loop: the form im2col recognizes."""
    where = location_of(op)
    groups = fgc * bgc
    lhs, lhs_layout = _split(fn, lhs, lhs_layout, "f" if fgc > 1 else "b", groups, where)
    rhs, rhs_layout = _split(fn, rhs, rhs_layout, "o", groups, where)
    out_f = out_layout.index("f")
    if groups > 1:
        out_layout = out_layout[:out_f] + ["g", "f"] + out_layout[out_f + 1:]
        out_shape = out_shape[:out_f] + (groups, out_shape[out_f] // groups) \
            + out_shape[out_f + 1:]
    if lhs.shape[lhs_layout.index("f")] != rhs.shape[rhs_layout.index("i")]:
        raise CompileError("convolution feature counts do not match feature_group_count", where)
    # Parallel loops: the output's dims; reductions: the filter's, in the filter's order.
    loop_of = {("g" if name == "g" else "out_" + name): p for p, name in enumerate(out_layout)}
    ranges = list(out_shape)
    for name, size in zip(rhs_layout, rhs.shape):
        if name not in ("o", "g"):
            loop_of["k_" + name] = len(ranges)
            ranges.append(size)
    n = len(ranges)

    def term(*parts: tuple[str, int], const: int = 0) -> AffineExpr:
        coeffs = [0] * n
        for loop, coeff in parts:
            coeffs[loop_of[loop]] += coeff
        return AffineExpr(tuple(coeffs), const)

    named = {"g": ("g", 1), "b": ("out_b", 1), "f": ("k_i", 1)}
    lhs_index = []
    for name in lhs_layout:
        if name in named:
            lhs_index.append(term(named[name]))
            continue
        s, k = int(name), rhs.shape[rhs_layout.index(name)]
        if reverse[s]:
            lhs_index.append(term(("out_" + name, strides[s]), ("k_" + name, -rhs_dil[s]),
                                  const=rhs_dil[s] * (k - 1)))
        else:
            lhs_index.append(term(("out_" + name, strides[s]), ("k_" + name, rhs_dil[s])))
    rhs_named = {"g": "g", "o": "out_f"}
    rhs_index = tuple(term((rhs_named.get(name, "k_" + name), 1)) for name in rhs_layout)
    _emit_contraction(fn, op, lhs, rhs, tuple(lhs_index), rhs_index, tuple(ranges),
                      len(out_shape), out_dtype, tuple(out_shape) if groups > 1 else None)
