"""Nodes torch-mlir converts to a wrong answer, rewritten into ONNX ops it converts correctly.

- Div and Mod of unsigned integers: torch-mlir lowers them to signed division
  (``arith.divsi``), wrong for every value with its top bit set (200 / 3 of uint8 gave 0).
  torch-mlir has no Cast to a wider unsigned type and back, so the quotient is built in the
  operands' own type: a divisor with its top bit set divides at most once (``a >= b``); any
  other divides ``a >> 1`` exactly as signed division does, and doubling that quotient leaves
  a remainder that ``b`` divides at most once more.
- TopK, Clip, MaxPool and GlobalMaxPool of unsigned integers: torch-mlir orders them as signed (TopK picked
  127 over 200); they run on the values plus the top bit, which orders them as signed.
- Neg of integers: lowered through f32, wrong past 2^24; ``0 - x``. Selu without its
  attributes: torch-mlir's defaults are ONNX's rounded to 6 digits; ONNX's given.
- Mod with ``fmod=1`` of floats: lowered as ``a - trunc(a / b) * b``, wrong past 2^24
  quotients and NaN for an infinite ``b``; the exact remainder (``fmod=0``, ``frem``) of the
  magnitudes, negated where ``a`` is negative or -0.0.
- Max, Min, Clip and Sign of floats with a NaN input: torch-mlir's compares lost the NaN; the
  result is NaN where any input is. Equal of a value with itself (folded to true): not IsNaN.
- Cast from a float type to UINT8: torch-mlir converts it with ``fptosi`` to i8, wrong for
  every value from 128 up; a Cast to INT32 first makes the last step an integer truncation.
- LpNormalization: torch-mlir divides by the norm unguarded, NaN for an all-zero slice where
  ONNX's reference (and onnxruntime) give zeros; rebuilt as the norm (ReduceL1 or ReduceL2)
  and a division by it, with a zero norm divided as one.
- Det: torch-mlir's lowering eliminates without pivoting (a zero pivot gave NaN for
  [[0, 1], [2, 3]], a small one loses precision). Rewritten as LAPACK's getrf computes it,
  unrolled over the static size: Gaussian elimination with partial pivoting (the first row of
  largest magnitude), the determinant the pivots' product, negated per row swap; a zero pivot
  leaves a zero column below it, so it divides as one. A size known only at run time is
  refused.
- LSTM, GRU and RNN: torch-mlir's conversions ignore ``sequence_lens`` and LSTM's peephole
  weights ``P``; a node that gives either is refused by name rather than run without them, as
  is one whose activations are not Sigmoid, Tanh or Relu (a GRU's HardSigmoid came out wrong). A
  bidirectional GRU or RNN, which torch-mlir does not convert, runs as two forward ones (the
  second over the reversed sequence), concatenated.
- GridSample (2-D, zeros padding): in nearest mode torch-mlir picks the upper pixel at a tie,
  ONNX (and PyTorch) the even one (``rint``): the grid is rounded first, as ONNX's reference
  does, and moved to the centre of the chosen pixel, where torch-mlir picks the same one. In
  both modes it reads a clamped pixel, not zero, for a coordinate past the high edge (or a
  bilinear one below -1): those outputs are set to zero after it.
- DequantizeLinear (not blocked): torch-mlir reads a per-axis unsigned zero point as signed
  (196 as -60); rebuilt as ONNX's reference computes it, ``(x - zero_point) * scale`` in f32,
  the per-axis operands reshaped to broadcast along ``axis``.
- ReverseSequence: torch-mlir slices by the run-time ``sequence_lens`` (a dynamic
  ``tensor.extract_slice``); rebuilt as a Gather from the flattened input (GatherElements
  needs opset 11; the node tests' model is at 10) of each element's offset with its time
  coordinate ``t`` replaced by ``len - 1 - t`` where ``t < len``, over the static shape.
- MatMul of a vector and a stack of 3 or more dims: torch-mlir cannot lower that
  ``aten.matmul``; the vector becomes a row (or column) matrix, dropped again after, as
  numpy.matmul defines it.
- ArgMax and ArgMin with ``select_last_index`` on an input with a dim known only at run time:
  torch-mlir flips the input and maps the flipped index ``i`` back as ``|i - (dim - 1)|`` with
  the static dim, which is -1 where the axis is such a dim: ``i + 2`` (an index past the end
  for every row). Rebuilt (whichever dim is the run-time one) with the axis's dim read at run
  time: the input reversed along ``axis`` by a Gather of ``n - 1 - Range(n)``,
  the first index of that, and ``n - 1`` minus it.
- InstanceNormalization over spatial dims known only at run time: torch-mlir divides the
  sum of squares by the static element count, -1 there, so the variance came out negated and
  every output NaN. Rebuilt as ONNX defines it: ReduceMean over the spatial axes of x and of
  the squared deviation, ``scale * (x - mean) / sqrt(var + epsilon) + B`` per channel.
- MaxPool's Indices: torch-mlir gives each index within its (batch, channel) plane, as
  PyTorch does; ONNX's (and onnxruntime's) count over the whole tensor. The plane's offset,
  ``(n * C + c) * H * W``, is added over the static shape (a run-time shape is refused by name
  rather than answered per plane); ``storage_order=1`` (column-major indices) is refused too.
- Pad of mode ``wrap``: torch-mlir's import never returned (a loop at full CPU). Each padded
  axis is a Gather of the positions ``(i - before) mod n`` (pads past the dim's length too, as
  ONNX's reference wraps); pads (and axes) given at run time, and negative ones, are refused
  by name.
- QLinearMatMul: torch-mlir drops zero points that are not constants (the integer product of
  ``a`` and ``b`` came out as if both were zero). Rewritten as ONNX's reference computes it:
  the int32 product of ``a - a_zero_point`` and ``b - b_zero_point``, times
  ``a_scale * b_scale / y_scale`` in f64, rounded half to even, plus ``y_zero_point``, clamped.
- Einsum without ``->``: torch-mlir converts no implicit output; the output written out.
- Resize (linear, cubic) of f16/bf16 and linear of integers: torch-mlir's conversion gave
  invalid IR; interpolated in f32 and converted back (``_narrow_resize``).
- MatMulInteger: a per-row ``a_zero_point`` was subtracted along K, and uint8 times uint8
  left an unparsable matmul; the int32 product of the centred operands.
- QLinearConv with per-channel weight scales and a bias: torch-mlir adds the bias unscaled
  (every output saturated); rebuilt as ONNX's reference computes it (``_qlinear_conv``).
- Gemm without C: torch-mlir drops ``alpha``; a Gemm of alpha 1 times alpha.
- AveragePool with ``ceil_mode`` and ``count_include_pad``: torch-mlir divides a last window
  that runs past the input and its pads by the whole kernel; the pads made explicit zeros and
  pooled with ``count_include_pad`` 0 divide it by what it covers (onnxruntime's, PyTorch's).
- Softmax and Hardmax before opset 13 (the input flattened to 2-D at ``axis``): torch-mlir gave
  Hardmax the per-axis meaning of opset 13 and refused Softmax; Flatten, the op along the rows
  (Softmax as the exp of LogSoftmax, which torch-mlir converts there), Reshape back.
- Slice of a negative step whose constant start lies past the dim (tf2onnx's reverse, start
  INT64_MAX): torch-mlir clamps starts for positive steps only; the bounds clamped as ONNX
  defines them. Split with the ``split`` attribute (before opset 13): torch-mlir split equally;
  one Gather per output.
- A reduction with ``noop_with_empty_axes`` and no axes: torch-mlir's import aborted the
  process (a dialect conversion of a root op without a block); the reduction's elementwise
  part (``|x|`` for ReduceL1, ``x`` for ReduceSum), as ONNX's reference computes it.
- Tile with a constant repeat of 0: torch-mlir's conversion divided by zero (SIGFPE); the
  empty result as ConstantOfShape of the input's shape times the repeats.
"""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.importers.onnx_rewrites import control_flow
from pyree.compiler.importers.onnx_rewrites.types import elem_type, static_shape


def rewrite_nodes(proto):
    """``proto`` with the nodes above rewritten (shapes inferred again), or ``proto`` itself
    where there are none."""
    import onnx

    graph = proto.graph
    values = (*graph.input, *graph.value_info, *graph.output)
    types = {v.name: elem_type(v.type) for v in values}
    types.update((t.name, t.data_type) for t in graph.initializer)
    shapes = {v.name: static_shape(v.type) for v in values}
    shapes.update((t.name, tuple(t.dims)) for t in graph.initializer)
    dims = {v.name: tuple(d.dim_value if d.HasField("dim_value") else None
                          for d in v.type.tensor_type.shape.dim) for v in values
            if v.type.WhichOneof("value") == "tensor_type" and v.type.tensor_type.HasField("shape")}
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    constants = {t.name: t for t in graph.initializer}
    constants.update((node.output[0], a.t) for node in graph.node if node.op_type == "Constant"
                     for a in node.attribute if a.name == "value")
    nodes, rewritten = [], False
    for index, node in enumerate(graph.node):
        rule = _RULES.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        prefix = f"{node.name or node.op_type}_{index}_"
        new = rule(Nodes(node, prefix, opset, shapes, dims, constants), types) if rule else None
        if new is None:
            nodes.append(node)
            continue
        rewritten = True
        nodes += new
    if not rewritten:
        return proto
    model = type(proto)()
    model.CopyFrom(proto)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return onnx.shape_inference.infer_shapes(model, data_prop=True)


class _Own(str):
    """A name of the replaced node's own inputs or outputs, kept as it is."""


class Nodes:
    """The nodes replacing one. Its own inputs and outputs (``inputs``, ``outputs``: _Own names)
    keep their names; every other value is named after the node (``prefix`` + a word), so no
    word a rule picks can take the name of a value of the graph."""

    def __init__(self, node, prefix: str, opset: int, shapes: dict, dims: dict | None = None,
                 constants: dict | None = None):
        self.node, self.prefix, self.opset, self.shapes, self.nodes = node, prefix, opset, shapes, []
        self.dims = dims or {}  # each dim (None: not known) of each value whose type has a shape
        self.constants = constants or {}  # TensorProtos of initializers and Constant nodes
        self.inputs = [_Own(name) for name in node.input]
        self.outputs = [_Own(name) for name in node.output]

    def name(self, value: str) -> str:
        return value if isinstance(value, _Own) or not value else self.prefix + value

    def op(self, op_type: str, inputs: list[str], output: str, **attributes) -> str:
        import onnx

        self.nodes.append(onnx.helper.make_node(op_type, [self.name(x) for x in inputs],
                                                [self.name(output)], **attributes))
        return output

    def constant(self, output: str, value, dtype) -> str:
        """A scalar constant, as raw bytes (torch-mlir reads no inline uint16 data)."""
        import numpy as np
        import onnx

        self.nodes.append(onnx.helper.make_node("Constant", [], [self.name(output)],
                          value=onnx.numpy_helper.from_array(np.array(value, dtype),
                                                             self.name(output))))
        return output


_UNSIGNED = {2, 4, 12, 13}  # TensorProto.UINT8, UINT16, UINT32, UINT64
_INTEGERS = {*_UNSIGNED, 3, 5, 6, 7}  # and INT8, INT16, INT32, INT64


def _unsigned_division(n: Nodes, types: dict):
    node = n.node
    elem = types.get(node.input[0])
    if elem not in _UNSIGNED:
        return None
    import onnx

    if n.opset < 11:
        raise CompileError(f"{node.op_type} of unsigned integers at opset {n.opset}: torch-mlir "
                           "divides them as signed, and pyree's rewrite needs BitShift (opset "
                           "11); upgrade the model with --opset-version")
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    (a, b), (y,) = n.inputs[:2], n.outputs
    n.constant("0", 0, dtype)
    n.constant("1", 1, dtype)
    n.constant("top", 1 << (8 * dtype.itemsize - 1), dtype)
    # (Not Less, rather than GreaterOrEqual: torch-mlir converts the latter from opset 16 only)
    n.op("Less", [b, "top"], "small")
    n.op("Less", [a, b], "none")
    n.op("Where", ["none", "0", "1"], "q_big")
    n.op("BitShift", [a, "1"], "half", direction="RIGHT")
    n.op("Div", ["half", b], "q_half")
    n.op("BitShift", ["q_half", "1"], "q_even", direction="LEFT")
    n.op("Mul", ["q_even", b], "taken")
    n.op("Sub", [a, "taken"], "left")
    n.op("Less", ["left", b], "done")
    n.op("Where", ["done", "0", "1"], "carry")
    n.op("Add", ["q_even", "carry"], "q_small")
    n.op("Where", ["small", "q_small", "q_big"], y if node.op_type == "Div" else "q")
    if node.op_type == "Mod":
        n.op("Mul", ["q", b], "qb")
        n.op("Sub", [a, "qb"], y)
    return n.nodes


def _unsigned_order(n: Nodes, types: dict, input_names=None):
    """TopK, Clip and MaxPool of unsigned integers: torch-mlir orders them as signed (TopK
    picked 127 over 200 of UINT8, Clip's bound 128 read as -128, MaxPool kept 130 over 200).
    Adding the top bit (``2^(w-1)``, wrapping) maps the unsigned order onto the signed one in
    the same type (torch-mlir casts to no wider unsigned type), so the op runs on the shifted
    values and adding it again restores them; TopK's indices and MaxPool's are unchanged."""
    import onnx

    node = n.node
    elem = types.get(node.input[0])
    if elem not in _UNSIGNED:
        return None
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    n.constant("top", 1 << (8 * dtype.itemsize - 1), dtype)
    take = [0] if node.op_type != "Clip" else range(len(n.inputs))  # (TopK's k is INT64)
    inputs = [n.op("Add", [x, "top"], f"shifted{i}") if i in take and x else x
              for i, x in enumerate(n.inputs)]
    outputs = ["shifted_out", *(input_names or n.outputs[1:])]
    n.nodes.append(onnx.helper.make_node(node.op_type, [n.name(x) for x in inputs],
                                         [n.name(x) for x in outputs], name=node.name,
                                         domain=node.domain))
    n.nodes[-1].attribute.extend(node.attribute)
    n.op("Add", ["shifted_out", "top"], n.outputs[0])
    return n.nodes


def _mod(n: Nodes, types: dict):
    return _unsigned_division(n, types) or _float_fmod(n, types)


def _float_fmod(n: Nodes, types: dict):
    node = n.node
    elem = types.get(node.input[0])
    if elem not in _FLOATS or not any(a.name == "fmod" and a.i == 1 for a in node.attribute):
        return None
    import onnx

    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    (a, b), (y,) = n.inputs[:2], n.outputs
    n.op("Abs", [a], "a_magnitude")
    n.op("Abs", [b], "b_magnitude")
    n.op("Mod", ["a_magnitude", "b_magnitude"], "magnitude", fmod=0)
    n.constant("1", 1, dtype)
    n.constant("0", 0, dtype)
    n.op("Div", ["1", a], "reciprocal")  # -0.0 negative too (-inf)
    n.op("Less", ["reciprocal", "0"], "negative")
    n.op("Neg", ["magnitude"], "negated")
    n.op("Where", ["negative", "negated", "magnitude"], y)
    return n.nodes


def _integer_negation(n: Nodes, types: dict):
    import onnx

    elem = types.get(n.node.input[0])
    if elem in _FLOATS or elem is None:
        return None
    n.constant("0", 0, onnx.helper.tensor_dtype_to_np_dtype(elem))
    n.op("Sub", ["0", n.inputs[0]], n.outputs[0])
    return n.nodes


_SELU = {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875}


def _selu_defaults(n: Nodes, types: dict):
    given = {a.name for a in n.node.attribute}
    if set(_SELU) <= given:
        return None
    n.op("Selu", n.inputs, n.outputs[0],
         **{**_SELU, **{k: v for k, v in _attributes(n.node).items() if k in given}})
    return n.nodes


def _keeps_nan(n: Nodes, types: dict):
    """Max, Min, Clip and Sign of floats with a NaN input give NaN, as onnxruntime and ONNX's
    reference do (torch-mlir's compares dropped a NaN in Max's first operand and turned Clip's
    and Sign's into a bound or 0); Equal of a value with itself is ``not IsNaN`` (torch-mlir
    folded it to true)."""
    node = n.node
    if types.get(node.input[0]) not in _FLOATS:
        return None
    if node.op_type == "Equal":
        if node.input[0] != node.input[1]:
            return None
        n.op("IsNaN", [n.inputs[0]], "nan")
        n.op("Not", ["nan"], n.outputs[0])
        return n.nodes
    checked = [x for x in (n.inputs if node.op_type in ("Max", "Min") else n.inputs[:1]) if x]
    n.nodes.append(_renamed(node, n, "plain"))
    for i, x in enumerate(checked):
        n.op("IsNaN", [x], f"nan{i}")
        if i:
            n.op("Or", [f"any{i - 1}" if i > 1 else "nan0", f"nan{i}"], f"any{i}")
    anywhere = f"any{len(checked) - 1}" if len(checked) > 1 else "nan0"
    n.op("Sum", checked, "nans")  # NaN wherever an input is (broadcast as the op broadcasts)
    n.op("Where", [anywhere, "nans", "plain"], n.outputs[0])
    return n.nodes


def _clip(n: Nodes, types: dict):
    return _unsigned_order(n, types) or _keeps_nan(n, types)


def _renamed(node, n: Nodes, output: str):
    """``node`` itself with its (first) output named ``output`` of ``n``."""
    import onnx
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    copy.output[0] = n.name(output)
    return copy


def _qlinear_matmul(n: Nodes, types: dict):
    import numpy as np
    import onnx

    T = onnx.TensorProto
    a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero = [*n.inputs, "", ""][:8]
    out = types.get(y_zero or a)
    if out is None:
        return None
    info = np.iinfo(onnx.helper.tensor_dtype_to_np_dtype(out))
    for x, zero in ((a, a_zero), (b, b_zero)):
        n.op("Cast", [x], x + "_i32", to=T.INT32)
        if zero:
            n.op("Cast", [zero], zero + "_i32", to=T.INT32)
            n.op("Sub", [x + "_i32", zero + "_i32"], x + "_centred")
        else:
            n.op("Identity", [x + "_i32"], x + "_centred")
    n.op("MatMul", [a + "_centred", b + "_centred"], "product")
    n.op("Mul", [a_scale, b_scale], "scales")
    n.op("Div", ["scales", y_scale], "multiplier")
    n.op("Cast", ["multiplier"], "multiplier_f64", to=T.DOUBLE)
    n.op("Cast", ["product"], "product_f64", to=T.DOUBLE)
    n.op("Mul", ["product_f64", "multiplier_f64"], "scaled")
    if y_zero:
        n.op("Cast", [y_zero], "zero_f64", to=T.DOUBLE)
        n.op("Add", ["scaled", "zero_f64"], "shifted")
    else:
        n.op("Identity", ["scaled"], "shifted")
    n.op("Round", ["shifted"], "rounded")
    n.constant("low", info.min, np.float64)
    n.constant("high", info.max, np.float64)
    n.op("Clip", ["rounded", "low", "high"], "clamped")
    n.op("Cast", ["clamped"], "clamped_i32", to=T.INT32)  # (see _cast_to_uint8)
    n.op("Cast", ["clamped_i32"], n.outputs[0], to=out)
    return n.nodes


def _qlinear_conv(n: Nodes, types: dict):
    """QLinearConv with per-channel weight scales and a bias, which torch-mlir adds unscaled
    (every output saturated): ONNX's reference steps, the convolution of ``x - x_zero_point``
    and ``w - w_zero_point`` in f64 (exact: integer sums below 2^53), plus the bias, times
    ``x_scale * w_scale[c] / y_scale``, rounded half to even, plus ``y_zero_point``, clamped."""
    import numpy as np
    import onnx

    T = onnx.TensorProto
    x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero, bias = [*n.inputs, "", ""][:9]
    w_shape, scale_shape = n.shapes.get(w), n.shapes.get(w_scale)
    if not bias or scale_shape is None or int(np.prod(scale_shape)) <= 1:
        return None
    out = types.get(y_zero or x)
    if w_shape is None or out is None:
        raise CompileError(f"QLinearConv '{n.node.name or n.node.output[0]}': per-channel "
                           "weight scales with a bias need the weight's shape known at import")
    spatial = len(w_shape) - 2
    n.constant("w_axis", [-1] + [1] * (spatial + 1), np.int64)
    n.constant("y_axis", [1, -1] + [1] * spatial, np.int64)
    for value, zero, axis in ((x, x_zero, None), (w, w_zero, "w_axis")):
        n.op("Cast", [value], value + "_f64", to=T.DOUBLE)
        if zero:
            n.op("Cast", [zero], zero + "_f64", to=T.DOUBLE)
            if axis:
                n.op("Reshape", [zero + "_f64", axis], zero + "_along")
            n.op("Sub", [value + "_f64", zero + "_along" if axis else zero + "_f64"],
                 value + "_centred")
        else:
            n.op("Identity", [value + "_f64"], value + "_centred")
    conv = {k: v for k, v in _attributes(n.node).items()}
    n.op("Conv", [x + "_centred", w + "_centred"], "product", **conv)
    n.op("Cast", [bias], "bias_f64", to=T.DOUBLE)
    n.op("Reshape", ["bias_f64", "y_axis"], "bias_along")
    n.op("Add", ["product", "bias_along"], "biased")
    for scale in (x_scale, w_scale, y_scale):
        n.op("Cast", [scale], scale + "_f64", to=T.DOUBLE)
    n.op("Reshape", [w_scale + "_f64", "y_axis"], "w_scale_along")
    n.op("Mul", [x_scale + "_f64", "w_scale_along"], "scales")
    n.op("Div", ["scales", y_scale + "_f64"], "multiplier")
    n.op("Mul", ["biased", "multiplier"], "scaled")
    if y_zero:
        n.op("Cast", [y_zero], "zero_f64", to=T.DOUBLE)
        n.op("Add", ["scaled", "zero_f64"], "shifted")
    else:
        n.op("Identity", ["scaled"], "shifted")
    info = np.iinfo(onnx.helper.tensor_dtype_to_np_dtype(out))
    n.op("Round", ["shifted"], "rounded")
    n.constant("low", info.min, np.float64)
    n.constant("high", info.max, np.float64)
    n.op("Clip", ["rounded", "low", "high"], "clamped")
    n.op("Cast", ["clamped"], "clamped_i32", to=T.INT32)  # (see _cast_to_uint8)
    n.op("Cast", ["clamped_i32"], n.outputs[0], to=out)
    return n.nodes


def _matmul_integer(n: Nodes, types: dict):
    """MatMulInteger as ONNX's reference computes it: the int32 product of ``a - a_zero_point``
    and ``b - b_zero_point``. torch-mlir subtracted a per-row (1-D, length M) ``a_zero_point``
    along K instead (a wrong answer where M == K) and left an unparsable ``cast_unsigned``
    matmul for uint8 times uint8."""
    import numpy as np
    import onnx

    T = onnx.TensorProto
    a, b, a_zero, b_zero = [*n.inputs, "", ""][:4]
    if a_zero and len(n.shapes.get(a_zero) or ()) == 1:
        n.constant("column", [-1, 1], np.int64)  # per row: along the rows of a
        n.op("Reshape", [a_zero, "column"], "a_zero_rows")
        a_zero = "a_zero_rows"
    for x, zero in ((a, a_zero), (b, b_zero)):
        n.op("Cast", [x], x + "_i32", to=T.INT32)
        if zero:
            n.op("Cast", [zero], zero + "_i32", to=T.INT32)
            n.op("Sub", [x + "_i32", zero + "_i32"], x + "_centred")
        else:
            n.op("Identity", [x + "_i32"], x + "_centred")
    n.op("MatMul", [a + "_centred", b + "_centred"], n.outputs[0])
    return n.nodes


def _einsum_output(n: Nodes, types: dict):
    """Einsum without ``->``: torch-mlir converts no implicit output (an invalid permute); the
    output written out as ONNX (and numpy) define it, the broadcast dims (``...``) first, then
    each label used once, in alphabetical order."""
    import onnx

    equation = "".join(_attributes(n.node).get("equation", b"").decode().split())
    if not equation or "->" in equation:
        return None
    labels = equation.replace("...", "").replace(",", "")
    once = sorted(c for c in set(labels) if labels.count(c) == 1)
    output = ("..." if "..." in equation else "") + "".join(once)
    n.nodes.append(onnx.helper.make_node("Einsum", list(n.inputs), list(n.outputs),
                                         name=n.node.name, equation=f"{equation}->{output}"))
    return n.nodes


def _narrow_resize(n: Nodes, types: dict):
    """Resize (linear or cubic) of f16 or bf16, or linear of integers: torch-mlir's conversion
    multiplies the input's type by f32 weights (invalid IR). Interpolated in f32 and converted
    back, as onnxruntime computes it: rounded once for the 16-bit floats, truncated for
    integers (a linear interpolation stays within its inputs' range)."""
    import onnx

    T = onnx.TensorProto
    elem = types.get(n.node.input[0])
    mode = _attributes(n.node).get("mode", b"nearest").decode()
    narrow = elem in (T.FLOAT16, T.BFLOAT16) and mode in ("linear", "cubic")
    integer = elem in _INTEGERS and mode == "linear"
    if not (narrow or integer):
        return None
    n.op("Cast", [n.inputs[0]], "wide", to=T.FLOAT)
    n.nodes.append(onnx.helper.make_node("Resize", [n.name("wide"), *n.inputs[1:]],
                                         [n.name("resized")], name=n.node.name))
    n.nodes[-1].attribute.extend(n.node.attribute)
    if integer:  # (float to int32 first: see _cast_to_uint8)
        n.op("Cast", ["resized"], "resized_i32", to=T.INT32)
    n.op("Cast", ["resized_i32" if integer else "resized"], n.outputs[0], to=elem)
    return n.nodes


def _cast_to_uint8(n: Nodes, types: dict):
    import onnx

    T = onnx.TensorProto
    to = next((a.i for a in n.node.attribute if a.name == "to"), None)
    if to != T.UINT8 or types.get(n.node.input[0]) not in _FLOATS:
        return None
    n.op("Cast", [n.inputs[0]], "i32", to=T.INT32)
    n.op("Cast", ["i32"], n.outputs[0], to=T.UINT8)
    return n.nodes


def _recurrent(n: Nodes, types: dict):
    inputs = [*n.node.input, *[""] * 8]
    ignored = [f"{what} (input {i})" for i, what in ((4, "sequence_lens"), (7, "peephole weights P"))
               if inputs[i] and (i != 7 or n.node.op_type == "LSTM")]
    if ignored:
        name = f" '{n.node.name}'" if n.node.name else ""
        raise CompileError(f"{n.node.op_type}{name} gives {' and '.join(ignored)}, which "
                           "torch-mlir's conversion ignores (its results would be wrong)")
    activations = next((list(a.strings) for a in n.node.attribute if a.name == "activations"), [])
    wrong = sorted({a.decode() for a in activations} - _RECURRENT_ACTIVATIONS)
    if wrong:
        name = f" '{n.node.name}'" if n.node.name else ""
        raise CompileError(f"{n.node.op_type}{name} uses the activation {', '.join(wrong)}, which "
                           "torch-mlir's conversion computes wrongly (pyree takes Sigmoid, Tanh "
                           "and Relu there)")
    direction = next((a.s for a in n.node.attribute if a.name == "direction"), b"forward")
    if direction == b"bidirectional" and n.node.op_type in ("GRU", "RNN"):
        return _two_directions(n, [*n.inputs, *[""] * 6])
    return None


# Activations of LSTM, GRU and RNN that torch-mlir's conversion computes as onnxruntime does
# (HardSigmoid came out as large as 1e12 in a GRU; the others are unchecked).
_RECURRENT_ACTIVATIONS = {"Sigmoid", "Tanh", "Relu"}


def _two_directions(n: Nodes, inputs: list[str]):
    """A bidirectional GRU or RNN as two forward ones (torch-mlir converts only LSTM's both
    ways): each direction's slice of W, R, B and initial_h; the second over the sequence
    reversed (a Gather of the static time steps backwards), its Y reversed back; the outputs
    concatenated along the direction axis."""
    import numpy as np
    import onnx

    attributes = {a.name: a for a in n.node.attribute}
    batch_first = attributes["layout"].i == 1 if "layout" in attributes else False
    time = 1 if batch_first else 0
    shape = n.shapes.get(inputs[0])
    if shape is None or shape[time] is None:
        return None  # a run-time sequence length: left to torch-mlir, which refuses it by name
    backwards = n.constant("backwards", np.arange(shape[time])[::-1].copy(), np.int64)
    outputs = [*n.outputs, "", ""][:2]
    halves = []
    for d in (0, 1):
        at = {k: n.constant(f"{k}{d}", [v], np.int64) for k, v in (("start", d), ("end", d + 1),
                                                                   ("axis", 0))}
        given = []
        for i, name in enumerate(inputs[:6]):
            if not name or i == 4:  # absent, or sequence_lens (refused above)
                given.append("")
            elif i == 0:
                given.append(name if d == 0 else n.op("Gather", [name, backwards], "x_back",
                                                      axis=time))
            elif i == 5 and batch_first:  # initial_h is [batch, num_directions, hidden]
                given.append(n.op("Slice", [name, at["start"], at["end"],
                                            n.constant(f"h_axis{d}", [1], np.int64)], f"h{d}"))
            else:
                given.append(n.op("Slice", [name, at["start"], at["end"], at["axis"]],
                                  f"in{i}_{d}"))
        while given and not given[-1]:
            given.pop()
        kept = [a for k, a in attributes.items() if k not in ("direction", "activations",
                                                              "activation_alpha", "activation_beta")]
        half = {k: list(attributes[k].strings if k == "activations" else attributes[k].floats)
                for k in ("activations", "activation_alpha", "activation_beta") if k in attributes}
        per_direction = {k: v[len(v) // 2 * d:len(v) // 2 * (d + 1)] for k, v in half.items()}
        y, y_h = f"y{d}", f"y_h{d}"
        node = onnx.helper.make_node(n.node.op_type, [n.name(x) for x in given],
                                     [n.name(y), n.name(y_h)], direction="forward",
                                     **per_direction)
        node.attribute.extend(kept)
        n.nodes.append(node)
        if d == 1:
            y = n.op("Gather", [y, backwards], "y_back", axis=time)
        halves.append((y, y_h))
    if outputs[0]:
        n.op("Concat", [halves[0][0], halves[1][0]], outputs[0], axis=2 if batch_first else 1)
    if outputs[1]:
        n.op("Concat", [halves[0][1], halves[1][1]], outputs[1], axis=1 if batch_first else 0)
    return n.nodes


def _grid_sample(n: Nodes, types: dict):
    import numpy as np
    import onnx

    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in n.node.attribute}
    x, grid = n.inputs[:2]
    shape, elem = n.shapes.get(x), types.get(grid)
    mode = attributes.get("mode", b"bilinear")
    if (attributes.get("padding_mode", b"zeros") != b"zeros" or shape is None or len(shape) != 4
            or elem not in _FLOATS or mode not in (b"nearest", b"linear", b"bilinear")):
        return None
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    n.constant("sizes", np.array(shape[:1:-1], dtype), dtype)  # the grid's axis runs over X's
    n.constant("one", 1, dtype)                                # dims reversed
    n.constant("two", 2, dtype)
    n.constant("zero", 0, dtype)
    corners = attributes.get("align_corners", 0)
    # the pixel coordinates, as ONNX's reference computes them
    n.op("Add", [grid, "one"], "g1")
    if corners:  # (g + 1) / 2 * (size - 1)
        n.op("Sub", ["sizes", "one"], "span")
        n.op("Mul", ["g1", "span"], "g1span")
        n.op("Div", ["g1span", "two"], "pixel")
    else:  # ((g + 1) * size - 1) / 2
        n.op("Mul", ["g1", "sizes"], "g1size")
        n.op("Sub", ["g1size", "one"], "twice_pixel")
        n.op("Div", ["twice_pixel", "two"], "pixel")
    sampled = grid
    if mode == b"nearest":  # rounded half to even, and the grid moved to that pixel's centre
        n.op("Round", ["pixel"], "nearest")
        n.op("Mul", ["nearest", "two"], "twice")
        if corners:
            n.op("Div", ["twice", "span"], "g1_new")  # (a size of 1 gives 0/0: kept below)
            n.op("Sub", ["g1_new", "one"], "moved")
            n.op("Greater", ["span", "zero"], "wide")  # a 1-wide dim reads pixel 0 either way
            sampled = n.op("Where", ["wide", "moved", grid], "rounded_grid")
        else:
            n.op("Add", ["twice", "one"], "odd")
            n.op("Div", ["odd", "sizes"], "g1_new")
            sampled = n.op("Sub", ["g1_new", "one"], "rounded_grid")
        n.op("Less", ["nearest", "zero"], "below")  # outside: no pixel at all
        n.op("Sub", ["sizes", "one"], "last")
        n.op("Greater", ["nearest", "last"], "above")
    else:  # outside where neither neighbour is inside
        n.op("Neg", ["one"], "minus_one")
        n.op("Greater", ["pixel", "minus_one"], "past_low")
        n.op("Not", ["past_low"], "below")
        n.op("Less", ["pixel", "sizes"], "short_of_high")
        n.op("Not", ["short_of_high"], "above")
    n.op("Or", ["below", "above"], "out")
    n.constant("x_axis", np.array([0], np.int64), np.int64)
    n.constant("y_axis", np.array([1], np.int64), np.int64)
    n.op("Gather", ["out", "x_axis"], "out_x", axis=3)
    n.op("Gather", ["out", "y_axis"], "out_y", axis=3)
    n.op("Or", ["out_x", "out_y"], "outside")  # N, H, W, 1
    n.op("Transpose", ["outside"], "outside_nchw", perm=[0, 3, 1, 2])
    n.nodes.append(onnx.helper.make_node("GridSample", [x, n.name(sampled)], [n.name("raw")],
                                         **attributes))
    n.op("Where", ["outside_nchw", "zero", "raw"], n.outputs[0])
    return n.nodes


def _lp_normalization(n: Nodes, types: dict):
    import numpy as np
    import onnx

    attributes = {a.name: a.i for a in n.node.attribute}
    elem = types.get(n.node.input[0])
    if elem not in _FLOATS or attributes.get("p", 2) not in (1, 2):
        return None
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    (x,), (y,), axis = n.inputs, n.outputs, attributes.get("axis", -1)
    reduce = "ReduceL2" if attributes.get("p", 2) == 2 else "ReduceL1"
    if n.opset >= 18:  # axes became an input
        n.constant("axes", np.array([axis], np.int64), np.int64)
        n.op(reduce, [x, "axes"], "norm", keepdims=1)
    else:
        n.op(reduce, [x], "norm", axes=[axis], keepdims=1)
    n.constant("zero", 0, dtype)
    n.constant("one", 1, dtype)
    n.op("Equal", ["norm", "zero"], "empty")
    n.op("Where", ["empty", "one", "norm"], "divisor")
    n.op("Div", [x, "divisor"], y)
    return n.nodes


def _reverse_sequence(n: Nodes, types: dict):
    import numpy as np

    attributes = {a.name: a.i for a in n.node.attribute}
    (x, lengths), (y,) = n.inputs, n.outputs
    shape, time = n.shapes.get(x), attributes.get("time_axis", 0)
    if shape is None or types.get(lengths) != 7:  # TensorProto.INT64
        return None
    layout = (shape[time], 1) if time == 0 else (1, shape[time])  # (time, batch) or (batch, time)
    steps = n.constant("steps", np.arange(shape[time]).reshape(layout), np.int64)
    width = n.constant("width", [1, -1] if time == 0 else [-1, 1], np.int64)
    given = n.op("Reshape", [lengths, width], "given")
    most = n.constant("most", shape[time], np.int64)  # a length past the end reverses it all
    per_batch = n.op("Where", [n.op("Greater", [given, most], "past"), most, given], "lengths")
    last = n.op("Sub", [per_batch, n.constant("one", 1, np.int64)], "last")
    reversed_ = n.op("Sub", [last, steps], "reversed")
    source = n.op("Where", [n.op("Greater", [per_batch, steps], "inside"), reversed_, steps],
                  "source")
    ones = [1] * (len(shape) - 2)  # source is (time, batch) or (batch, time): the first 2 dims
    source = n.op("Reshape", [source, n.constant("rank", [*shape[:2], *ones], np.int64)],
                  "source_everywhere")
    # the flat offset of every element with its time coordinate replaced by ``source``
    stride = int(np.prod(shape[time + 1:]))
    offsets = np.arange(int(np.prod(shape))).reshape(shape)
    offsets -= np.indices(shape)[time] * stride
    moved = n.op("Mul", [source, n.constant("stride", stride, np.int64)], "moved")
    index = n.op("Add", [n.constant("offsets", offsets, np.int64), moved], "index")
    flat = n.op("Reshape", [x, n.constant("flat_shape", [-1], np.int64)], "flat")
    n.op("Gather", [flat, index], y, axis=0)
    return n.nodes


def _matmul_of_a_vector(n: Nodes, types: dict):
    import numpy as np

    (a, b), (y,) = n.inputs, n.outputs
    shape_a, shape_b = n.shapes.get(a), n.shapes.get(b)
    if shape_a is None or shape_b is None or sorted((len(shape_a), len(shape_b)))[:1] != [1] \
            or max(len(shape_a), len(shape_b)) < 3:
        return None
    if len(shape_a) == 1:  # numpy.matmul: a row, dropped again
        a = n.op("Reshape", [a, n.constant("row", [1, shape_a[0]], np.int64)], "a_row")
        result = (*shape_b[:-2], shape_b[-1])
    else:  # a column, dropped again
        b = n.op("Reshape", [b, n.constant("column", [shape_b[0], 1], np.int64)], "b_column")
        result = shape_a[:-1]
    product = n.op("MatMul", [a, b], "product")
    n.op("Reshape", [product, n.constant("result", list(result), np.int64)], y)
    return n.nodes


def _dequantize(n: Nodes, types: dict):
    import numpy as np
    import onnx

    T = onnx.TensorProto
    attributes = {a.name: a.i for a in n.node.attribute}
    x, scale, zero = [*n.inputs, ""][:3]
    shape, out = n.shapes.get(x), types.get(scale)
    if (attributes.get("block_size", 0) or shape is None or out not in _FLOATS
            or types.get(x) not in _QUANTIZED):
        return None
    per_axis = n.shapes.get(scale) not in ((), (1,))
    along = [1] * len(shape)
    if per_axis:
        along[attributes.get("axis", 1) % len(shape)] = -1
        n.constant("along", np.array(along, np.int64), np.int64)

    def operand(value: str, name: str) -> str:
        n.op("Cast", [value], name + "_f32", to=T.FLOAT)
        return n.op("Reshape", [name + "_f32", "along"], name) if per_axis else name + "_f32"

    centred = n.op("Cast", [x], "x_f32", to=T.FLOAT)
    if zero:
        centred = n.op("Sub", [centred, operand(zero, "zero")], "centred")
    if out == T.FLOAT:
        n.op("Mul", [centred, operand(scale, "scale")], n.outputs[0])
    else:
        n.op("Mul", [centred, operand(scale, "scale")], "scaled")
        n.op("Cast", ["scaled"], n.outputs[0], to=out)
    return n.nodes


_QUANTIZED = {2, 3, 4, 5, 6}  # TensorProto.UINT8, INT8, UINT16, INT16, INT32


def _det(n: Nodes, types: dict):
    import numpy as np
    import onnx

    shape, elem = n.shapes.get(n.node.input[0]), types.get(n.node.input[0])
    if shape is None or elem not in _FLOATS:
        name = f" '{n.node.name}'" if n.node.name else ""
        raise CompileError(f"Det{name}: pyree computes determinants of static size only "
                           "(torch-mlir's own eliminates without pivoting)")
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    size, batch = shape[-1], int(np.prod(shape[:-2], dtype=np.int64))
    i64 = np.int64
    rows = np.arange(size, dtype=i64).reshape(1, size, 1)
    n.constant("square", np.array([batch, size, size], i64), i64)
    n.constant("rows", rows, i64)
    n.constant("one", np.ones((1, 1, 1), dtype), dtype)
    n.constant("zero", 0, dtype)
    n.constant("axes_12", np.array([1, 2], i64), i64)
    n.constant("axis_1", np.array([1], i64), i64)
    n.constant("axis_2", np.array([2], i64), i64)
    a = n.op("Reshape", [n.inputs[0], "square"], "a0")
    det, sign = "one", "one"
    for k in range(size):
        for name, value in ((f"k{k}", [k]), (f"kk{k}", [k, k]), (f"k1_{k}", [k + 1]),
                            (f"kk1_{k}", [k + 1, k + 1]), (f"end{k}", [size, k + 1])):
            n.constant(name, np.array(value, i64), i64)
        n.op("Slice", [a, f"kk{k}", f"end{k}", "axes_12"], f"col{k}")  # rows k.., column k
        n.op("Abs", [f"col{k}"], f"mag{k}")
        n.op("ArgMax", [f"mag{k}"], f"at{k}", axis=1, keepdims=1)
        n.op("Add", [f"at{k}", f"k{k}"], f"p{k}")  # B, 1, 1
        n.constant(f"is_k{k}", rows == k, np.bool_)
        n.op("Equal", ["rows", f"p{k}"], f"is_p{k}")
        n.op("Where", [f"is_p{k}", f"k{k}", "rows"], f"moved{k}")
        n.op("Where", [f"is_k{k}", f"p{k}", f"moved{k}"], f"order{k}")  # rows k and p swapped
        n.op("Expand", [f"order{k}", "square"], f"index{k}")
        a = n.op("GatherElements", [a, f"index{k}"], f"a{k}_swapped", axis=1)
        n.op("Equal", [f"p{k}", f"k{k}"], f"kept{k}")
        n.op("Neg", [sign], f"flipped{k}")
        sign = n.op("Where", [f"kept{k}", sign, f"flipped{k}"], f"sign{k}")
        n.op("Slice", [a, f"kk{k}", f"kk1_{k}", "axes_12"], f"pivot{k}")
        det = n.op("Mul", [det, f"pivot{k}"], f"det{k}")
        if k == size - 1:
            break
        n.op("Equal", [f"pivot{k}", "zero"], f"singular{k}")
        n.op("Where", [f"singular{k}", "one", f"pivot{k}"], f"divisor{k}")
        n.op("Slice", [a, f"k{k}", f"k1_{k}", "axis_1"], f"row{k}")  # B, 1, N
        n.op("Slice", [a, f"k{k}", f"k1_{k}", "axis_2"], f"column{k}")  # B, N, 1
        n.constant(f"below{k}", (rows > k).astype(dtype), dtype)
        n.op("Div", [f"column{k}", f"divisor{k}"], f"ratio{k}")
        n.op("Mul", [f"ratio{k}", f"below{k}"], f"factor{k}")
        n.op("Mul", [f"factor{k}", f"row{k}"], f"taken{k}")
        a = n.op("Sub", [a, f"taken{k}"], f"a{k + 1}")
    n.op("Mul", [det, sign], "signed")
    n.constant("result_shape", np.array(shape[:-2], i64), i64)
    n.op("Reshape", ["signed", "result_shape"], n.outputs[0])
    return n.nodes


_FLOATS = {1, 10, 11, 16}  # TensorProto.FLOAT, FLOAT16, DOUBLE, BFLOAT16

def _last_index(n: Nodes, types: dict):
    import numpy as np

    attributes = {a.name: a.i for a in n.node.attribute}
    (x,), (y,) = n.inputs, n.outputs
    rank = len(n.dims[x]) if x in n.dims else None
    if not attributes.get("select_last_index", 0) or n.shapes.get(x) is not None or rank is None:
        return None  # static: torch-mlir's flip maps back right
    axis = attributes.get("axis", 0) % max(rank, 1)
    size = n.op("Gather", [n.op("Shape", [x], "shape"), n.constant("axis", axis, np.int64)], "size")
    one = n.constant("one", 1, np.int64)
    last = n.op("Sub", [size, one], "last")
    steps = n.op("Range", [n.constant("zero", 0, np.int64), size, one], "steps")
    flipped = n.op("Gather", [x, n.op("Sub", [last, steps], "reversed")], "flipped", axis=axis)
    first = n.op(n.node.op_type, [flipped], "first", axis=axis,
                 keepdims=attributes.get("keepdims", 1))
    n.op("Sub", [last, first], y)
    return n.nodes


def _instance_normalization(n: Nodes, types: dict):
    import numpy as np
    import onnx

    (x, scale, bias), (y,) = n.inputs, n.outputs
    dims, elem = n.dims.get(x), types.get(x)
    if dims is None or len(dims) < 3 or elem not in _FLOATS or None not in dims[2:]:
        return None  # spatial dims known: torch-mlir counts them right
    epsilon = next((a.f for a in n.node.attribute if a.name == "epsilon"), 1e-5)
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    axes = list(range(2, len(dims)))

    def mean(value: str, output: str) -> str:
        if n.opset >= 18:  # axes became an input
            return n.op("ReduceMean", [value, n.constant(output + "_axes", np.array(axes, np.int64),
                                                         np.int64)], output, keepdims=1)
        return n.op("ReduceMean", [value], output, axes=axes, keepdims=1)

    centered = n.op("Sub", [x, mean(x, "mean")], "centered")
    variance = mean(n.op("Mul", [centered, centered], "squares"), "variance")
    shifted = n.op("Add", [variance, n.constant("epsilon", epsilon, dtype)], "shifted")
    normalized = n.op("Div", [centered, n.op("Sqrt", [shifted], "deviation")], "normalized")
    per_channel = n.constant("per_channel", [-1] + [1] * len(axes), np.int64)
    scaled = n.op("Mul", [normalized, n.op("Reshape", [scale, per_channel], "scale")], "scaled")
    n.op("Add", [scaled, n.op("Reshape", [bias, per_channel], "bias")], y)
    return n.nodes


def _max_pool(n: Nodes, types: dict):
    """MaxPool of unsigned integers in the signed order (``_unsigned_order``); with an
    Indices output, the local indices plus each plane's offset."""
    import numpy as np
    import onnx

    node = n.node
    if len(node.output) < 2 or not node.output[1]:
        return _unsigned_order(n, types)
    where = f"MaxPool '{node.name or node.output[0]}'"
    if any(a.name == "storage_order" and a.i == 1 for a in node.attribute):
        raise CompileError(f"{where}: column-major Indices (storage_order=1) are not supported")
    shape = n.shapes.get(node.input[0])
    if shape is None:
        raise CompileError(f"{where}: Indices over an input whose shape is known only at run "
                           "time are not supported (ONNX counts them over the whole tensor)")
    planes = np.arange(shape[0] * shape[1], dtype=np.int64) * int(np.prod(shape[2:]))
    n.constant("offsets", planes.reshape(shape[:2] + (1,) * (len(shape) - 2)), np.int64)
    if _unsigned_order(n, types, ["local"]) is None:
        n.nodes.append(onnx.helper.make_node("MaxPool", [n.name(x) for x in n.inputs],
                                             [n.name(n.outputs[0]), n.name("local")],
                                             name=node.name))
        n.nodes[-1].attribute.extend(node.attribute)
    n.op("Add", ["local", "offsets"], n.outputs[1])
    return n.nodes


def _wrap_pad(n: Nodes, types: dict):
    """Pad of mode wrap as one Gather a padded axis."""
    import numpy as np
    import onnx

    node = n.node
    if not any(a.name == "mode" and a.s == b"wrap" for a in node.attribute):
        return None
    where = f"Pad '{node.name or node.output[0]}' (mode wrap)"
    shape = n.shapes.get(node.input[0])
    known = [node.input[k] in n.constants for k in (1, 3) if len(node.input) > k and node.input[k]]
    if shape is None or not all(known):
        raise CompileError(f"{where}: pads or axes given at run time, or an input shape known "
                           "only at run time, are not supported")
    pads = onnx.numpy_helper.to_array(n.constants[node.input[1]]).astype(np.int64)
    rank = len(shape)
    axes = (onnx.numpy_helper.to_array(n.constants[node.input[3]]).astype(np.int64) % rank
            if len(node.input) > 3 and node.input[3] else np.arange(rank))
    value = n.inputs[0]
    for k, axis in enumerate(axes):
        before, after, size = int(pads[k]), int(pads[k + len(axes)]), shape[axis]
        if before == 0 and after == 0:
            continue
        if size == 0 or before < 0 or after < 0:
            raise CompileError(f"{where}: a negative pad, or an axis of length 0, is not "
                               "supported (ONNX's reference refuses them too)")
        n.constant(f"positions{k}", np.arange(-before, size + after) % size, np.int64)
        value = n.op("Gather", [value, f"positions{k}"], f"padded{k}", axis=int(axis))
    n.op("Identity", [value], n.outputs[0])
    return n.nodes


def _attributes(node) -> dict:
    import onnx
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _gemm_alpha(n: Nodes, types: dict):
    """Gemm without C as Gemm with alpha 1 times alpha (torch-mlir dropped alpha there)."""
    import onnx

    attributes = _attributes(n.node)
    alpha, elem = attributes.pop("alpha", 1.0), types.get(n.inputs[0])
    if (len(n.inputs) > 2 and n.inputs[2]) or alpha == 1.0 or elem not in _FLOATS:
        return None
    attributes.pop("beta", None)
    n.op("Gemm", n.inputs[:2], "product", **attributes)
    n.constant("alpha", alpha, onnx.helper.tensor_dtype_to_np_dtype(elem))
    n.op("Mul", ["product", "alpha"], n.outputs[0])
    return n.nodes


def _average_pool_ceil(n: Nodes, types: dict):
    """AveragePool with ceil_mode and count_include_pad: the explicit pads made zeros of the
    input, pooled with count_include_pad 0, so that a last window running past them divides
    by what it covers (torch-mlir divided it by the whole kernel: [1, 2, 3] by 2 gave [1.5,
    1.5], not [1.5, 3])."""
    import numpy as np

    attributes = _attributes(n.node)
    if not attributes.get("ceil_mode") or not attributes.get("count_include_pad") \
            or attributes.get("auto_pad", b"NOTSET") != b"NOTSET":
        return None
    pads = attributes.pop("pads", None)
    x = n.inputs[0]
    if pads and any(pads):
        half = len(pads) // 2
        full = [0, 0, *pads[:half], 0, 0, *pads[half:]]  # Pad's: batch and channel too
        if n.opset < 11:
            x = n.op("Pad", [x], "padded", pads=full)
        else:
            n.constant("pads", np.array(full, np.int64), np.int64)
            x = n.op("Pad", [x, "pads"], "padded")
    attributes["count_include_pad"] = 0
    n.op("AveragePool", [x], n.outputs[0], **attributes)
    return n.nodes


def _flattened_axis(n: Nodes, types: dict):
    """Softmax and Hardmax before opset 13 act on the input flattened to 2-D at ``axis``
    (the dims from it on are one row); torch-mlir applied the later per-axis meaning (Hardmax
    of [[[1, 5], [3, 2]]] at axis 1 picked per column) or refused Softmax. Rebuilt as Flatten,
    the op along the rows (Softmax as the exp of LogSoftmax, which torch-mlir converts there),
    and Reshape back."""
    if n.opset >= 13:
        return None
    x, (y,) = n.inputs[0], n.outputs
    n.op("Flatten", [x], "rows", axis=_attributes(n.node).get("axis", 1))
    n.op("Shape", [x], "shape")
    if n.node.op_type == "Hardmax":
        n.op("Hardmax", ["rows"], "picked", axis=1)
    else:  # (torch-mlir converts no Softmax, ReduceMax or ReduceSum before opset 13)
        n.op("LogSoftmax", ["rows"], "log", axis=1)
        n.op("Exp", ["log"], "picked")
    n.op("Reshape", ["picked", "shape"], y)
    return n.nodes


def _reverse_slice_bounds(n: Nodes, types: dict):
    """Slice with a negative step whose constant start lies past the dim (tf2onnx's reverse
    of a whole axis, start INT64_MAX): torch-mlir clamps it for a positive step only, and the
    slice read past the end. The constant starts and ends clamped as ONNX defines them, an end
    before the first element as INT64_MIN (which torch-mlir reads right)."""
    import numpy as np
    import onnx

    if n.opset < 10 or len(n.inputs) < 3:
        return None
    names = [*n.inputs[1:5], "", ""][:4]
    if not all(x in n.constants for x in names[:2]) or any(x and x not in n.constants
                                                            for x in names[2:]):
        return None
    starts, ends = (onnx.numpy_helper.to_array(n.constants[x]).astype(np.int64) for x in names[:2])
    rank = len(n.dims.get(n.inputs[0], ()))
    axes = (onnx.numpy_helper.to_array(n.constants[names[2]]) if names[2]
            else np.arange(len(starts)))
    steps = (onnx.numpy_helper.to_array(n.constants[names[3]]) if names[3]
             else np.ones(len(starts), np.int64))
    dims = n.dims.get(n.inputs[0])
    if dims is None or not any(steps < 0):
        return None
    new_starts, new_ends = starts.copy(), ends.copy()
    for k, (axis, step) in enumerate(zip(axes, steps)):
        dim = dims[axis % rank]
        if step > 0:
            continue
        if dim is None:
            return None
        start, end = int(starts[k]), int(ends[k])
        start, end = start + dim if start < 0 else start, end + dim if end < 0 else end
        new_starts[k] = min(max(start, 0), dim - 1)
        end = min(max(end, -1), dim - 1)
        new_ends[k] = np.iinfo(np.int64).min if end == -1 else end
    if np.array_equal(new_starts, starts) and np.array_equal(new_ends, ends):
        return None
    n.constant("starts", new_starts, np.int64)
    n.constant("ends", new_ends, np.int64)
    n.op("Slice", [n.inputs[0], "starts", "ends", *n.inputs[3:]], n.outputs[0])
    return n.nodes


def _split_attribute(n: Nodes, types: dict):
    """Split with its sizes as the ``split`` attribute (before opset 13): torch-mlir split
    equally, refusing [3, 1] of 4; one Gather of each part's places (torch-mlir converts no
    Slice before opset 13)."""
    import numpy as np

    attributes = _attributes(n.node)
    sizes, axis = attributes.get("split"), attributes.get("axis", 0)
    if n.opset >= 13 or not sizes:
        return None
    start = 0
    for k, (size, out) in enumerate(zip(sizes, n.outputs)):
        n.constant(f"at{k}", np.arange(start, start + size, dtype=np.int64), np.int64)
        n.op("Gather", [n.inputs[0], f"at{k}"], out, axis=axis)
        start += size
    return n.nodes


# Each reduction's elementwise part, which ONNX's reference (and onnxruntime) still apply to a
# reduction over no axes: np.sum(np.abs(x), axis=()) is |x|.
_OVER_NO_AXES = {"ReduceL1": ["Abs"], "ReduceL2": ["Square", "Sqrt"], "ReduceLogSum": ["Log"],
                 "ReduceSumSquare": ["Square"], "ReduceLogSumExp": ["AddZero"],  # log(1) + x
                 "ReduceMax": [], "ReduceMin": [], "ReduceMean": [], "ReduceProd": [],
                 "ReduceSum": []}


def _reduce_over_no_axes(n: Nodes, types: dict):
    """A reduction with ``noop_with_empty_axes`` and no axes (none given, or a constant empty
    list) reduces nothing: its elementwise part, as ONNX's reference computes it (torch-mlir's
    import aborted the process on it)."""
    import onnx

    axes = n.inputs[1] if len(n.inputs) > 1 else ""
    if not _attributes(n.node).get("noop_with_empty_axes") or (
            axes and (axes not in n.constants or onnx.numpy_helper.to_array(n.constants[axes]).size)):
        return None
    x, steps = n.inputs[0], _OVER_NO_AXES[n.node.op_type]
    if "AddZero" in steps and types.get(x) is None:
        return None
    if not steps:
        n.op("Identity", [x], n.outputs[0])
    for k, step in enumerate(steps):
        last = k == len(steps) - 1
        out = n.outputs[0] if last else f"step{k}"
        if step == "AddZero":  # -0.0 becomes +0.0, as log(exp(x - x)) + x does
            n.constant("zero", 0, onnx.helper.tensor_dtype_to_np_dtype(types[n.inputs[0]]))
        x = n.op("Mul", [x, x], out) if step == "Square" else n.op(
            "Add", [x, "zero"], out) if step == "AddZero" else n.op(step, [x], out)
    return n.nodes


def _tile_to_nothing(n: Nodes, types: dict):
    """Tile with a constant repeat of 0 has no elements: ConstantOfShape of the input's shape
    times the repeats (torch-mlir's conversion divided by zero: SIGFPE)."""
    import numpy as np
    import onnx

    repeats = n.inputs[1]
    if repeats not in n.constants or types.get(n.inputs[0]) is None or \
            onnx.numpy_helper.to_array(n.constants[repeats]).all():
        return None
    n.op("Shape", [n.inputs[0]], "shape")
    n.op("Mul", ["shape", repeats], "tiled")
    zero = np.zeros(1, onnx.helper.tensor_dtype_to_np_dtype(types[n.inputs[0]]))
    n.op("ConstantOfShape", ["tiled"], n.outputs[0], value=onnx.numpy_helper.from_array(zero))
    return n.nodes


_RULES = {"Cast": _cast_to_uint8, "MaxPool": _max_pool, "Pad": _wrap_pad,
          "Div": _unsigned_division, "Mod": _mod, "Neg": _integer_negation,
          "Selu": _selu_defaults, "GlobalMaxPool": _unsigned_order,
          "ArgMax": _last_index, "ArgMin": _last_index,
          "InstanceNormalization": _instance_normalization,
          "QLinearMatMul": _qlinear_matmul, "QLinearConv": _qlinear_conv,
          "MatMulInteger": _matmul_integer, "Einsum": _einsum_output, "Resize": _narrow_resize,
          "LSTM": _recurrent, "GRU": _recurrent,
          "RNN": _recurrent, "GridSample": _grid_sample, "Det": _det,
          "LpNormalization": _lp_normalization, "DequantizeLinear": _dequantize,
          "ReverseSequence": _reverse_sequence, "MatMul": _matmul_of_a_vector,
          "TopK": _unsigned_order, "Clip": _clip, "Max": _keeps_nan, "Min": _keeps_nan,
          "Sign": _keeps_nan, "Equal": _keeps_nan, "Gemm": _gemm_alpha,
          "AveragePool": _average_pool_ceil, "Softmax": _flattened_axis,
          "Hardmax": _flattened_axis, "Slice": _reverse_slice_bounds,
          "Split": _split_attribute, "Tile": _tile_to_nothing,
          "Loop": control_flow.loop, "Scan": control_flow.scan,
          **dict.fromkeys(_OVER_NO_AXES, _reduce_over_no_axes)}
