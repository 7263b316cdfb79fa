"""What pyree does to an ONNX model around torch-mlir's conversion, as IREE layers its own
conversions over torch-mlir's. Each exists because torch-mlir alone refuses, or crashes on,
models that ONNX's own node tests contain:

- ``refuse_missing_types``: element types pyree's compiler has no counterpart for (4- and 2-bit
  integers, 8- and 4-bit floats, strings, complex numbers) are refused by name, with the node
  and value that carry them. torch-mlir aborts the process on some (a Cast to UINT4: ``LLVM
  ERROR``), fails with a bare "failed to legalize" on others, and passes the rest on for the
  compiler to refuse at a line of MLIR the user never wrote.
- ``fold_shape_arithmetic``: the integer arithmetic that exporters and ONNX's function bodies
  write on shapes (Shape, Gather, Concat, Sub... feeding a Split, Reshape, Expand or Slice) is
  computed here, with ONNX's reference implementation, where its inputs are known: the model's
  shapes are static, so these values are constants. torch-mlir leaves them as run-time values:
  a Split whose sizes are computed gets results of unknown rank, on which its conversion
  segfaults (RotaryEmbedding's function body), and an Expand or Reshape whose shape is computed
  becomes dynamic shapes and run-time assertions that a static model never needs.
- ``unsigned_division``: torch-mlir lowers Div and Mod of unsigned integers to signed
  division (``arith.divsi``), a wrong answer for every value with its top bit set (200 / 3 of
  uint8 gave 0). They are rebuilt from ops it lowers correctly: halve the dividend (now below
  the sign bit), divide, double, and correct by one.
- ``expand_functions``: an op torch-mlir cannot convert (Attention, LinearAttention, ...) is
  replaced by its ONNX function body, primitive ONNX ops that torch-mlir does convert, where the
  op's schema has one at the model's opset (``has_function``). ``import_here`` expands exactly
  the ops torch-mlir leaves unconverted, so that the ops it converts keep its conversions, and
  it expands them here, with ONNX's own inliner, rather than through torch-mlir's importer,
  whose expansions land in private functions that ``fold_shape_arithmetic`` cannot reach.
  EXPANDED lists the ops expanded even though torch-mlir converts them, because what it
  converts them to goes no further.
"""

from __future__ import annotations

from pyree.compiler.errors import CompileError

# Ops computed here when every input is a known integer or boolean tensor (deterministic, and
# cheap at the sizes of shapes); the largest result kept as a constant, in elements.
FOLDED = frozenset({
    "Abs", "Add", "And", "Cast", "Ceil", "Concat", "ConstantOfShape", "Div", "Equal", "Expand",
    "Flatten", "Floor", "Gather", "GatherElements", "Greater", "GreaterOrEqual", "Identity",
    "Less", "LessOrEqual", "Max", "Min", "Mod", "Mul", "Neg", "Not", "Or", "Range",
    "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSum", "Reshape", "Shape", "Sign", "Size",
    "Slice", "Squeeze", "Sub", "Tile", "Transpose", "Unsqueeze", "Where", "Xor"})
MAX_FOLDED = 4096

# Ops always replaced by their function bodies, and why.
EXPANDED = {
    # torch-mlir converts it to torch.onnx.rotary_embedding, which it cannot lower to linalg,
    # and fails to convert the forms without position_ids
    "RotaryEmbedding",
    # torch-mlir converts them to aten.nll_loss_forward, which it lowers for few of their forms
    "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss",
    # torch-mlir's lowering of its tanh form takes sqrt(2/pi) as 0.797724 (pi as 22/7): a
    # relative error up to 1e-3 (importers/torch.py decomposes aten.gelu for the same reason)
    "Gelu",
}

# The ONNX element types with a pyree element type (what input/types.py reads).
SUPPORTED = frozenset({"FLOAT", "FLOAT16", "BFLOAT16", "DOUBLE", "BOOL", "INT8", "INT16",
                       "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"})


def refuse_missing_types(proto) -> None:
    """CompileError naming the first value of ``proto`` (graph input or output, initializer,
    node output, Cast target) whose element type pyree has no counterpart for."""
    import onnx

    def check(elem_type: int, what: str) -> None:
        if elem_type == onnx.TensorProto.UNDEFINED:
            return
        try:
            name = onnx.TensorProto.DataType.Name(elem_type)
        except ValueError:  # from a newer ONNX than the installed one
            name = f"element type {elem_type}"
        if name not in SUPPORTED:
            raise CompileError(f"the ONNX model uses {name} ({what}), an element type pyree "
                               "has no counterpart for; pyree's are " + ", ".join(
                                   n for n in onnx.TensorProto.DataType.keys() if n in SUPPORTED))

    graph = proto.graph
    types = {v.name: v.type for v in (*graph.input, *graph.value_info, *graph.output)}
    for value in graph.input:
        check(_elem_type(value.type), f"graph input '{value.name}'")
    for tensor in graph.initializer:
        check(tensor.data_type, f"initializer '{tensor.name}'")
    for index, node in enumerate(graph.node, start=1):
        where = f"node {index} ({node.op_type}{f' {node.name!r}' if node.name else ''})"
        for name in (*node.input, *node.output):
            if name in types:
                check(_elem_type(types[name]), f"{where}, value '{name}'")
        for attribute in node.attribute:
            if attribute.name == "to" and node.op_type == "Cast":
                check(attribute.i, f"{where}, its target type")
            elif attribute.type == onnx.AttributeProto.TENSOR:
                check(attribute.t.data_type, f"{where}, attribute '{attribute.name}'")
    for value in graph.output:
        check(_elem_type(value.type), f"graph output '{value.name}'")


def _elem_type(type_proto) -> int:
    """The element type of a tensor type, or of the tensors in a sequence or optional."""
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        return type_proto.tensor_type.elem_type
    if kind in ("sequence_type", "optional_type"):
        return _elem_type(getattr(type_proto, kind).elem_type)
    return 0


def expand_functions(proto, op_types):
    """``proto`` with every default-domain node of ``op_types`` replaced by its ONNX function
    body (context-dependent ones too, specialised to the node's types), shapes inferred again."""
    import onnx
    import onnx.inliner

    ids = [("", op) for op in sorted(op_types)]
    model = onnx.inliner.inline_selected_functions(proto, ids, inline_schema_functions=True)
    return onnx.shape_inference.infer_shapes(model, data_prop=True)


def has_function(proto, op_type: str) -> bool:
    """Whether the default-domain op ``op_type`` has an ONNX function body (plain or
    context-dependent) at the model's opset."""
    import onnx

    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        return False
    try:
        schema = onnx.defs.get_schema(op_type, max_inclusive_version=opset, domain="")
    except onnx.defs.SchemaError:
        return False
    return any(v <= opset for v in (*schema.function_opset_versions,
                                    *schema.context_dependent_function_opset_versions))


def fold_shape_arithmetic(proto, rounds: int = 8):
    """``proto`` with each node of FOLDED whose inputs are known replaced by Constant nodes of
    its results, and shapes inferred again, until nothing more folds (a folded Split size gives
    its results static shapes, which a later Shape reads); ``proto`` itself where nothing
    folds. Known: small integer and boolean initializers and Constants, and static shapes."""
    for _ in range(rounds):
        folded = _fold_once(proto)
        if folded is proto:
            break
        proto = folded
    return proto


def _fold_once(proto):
    import numpy as np
    import onnx
    from onnx import numpy_helper

    graph = proto.graph
    overridable = {v.name for v in graph.input}
    known = {t.name: numpy_helper.to_array(t) for t in graph.initializer
             if t.name not in overridable}
    known = {name: value for name, value in known.items() if _foldable(np, value)}
    shapes = {v.name: _static_shape(v.type) for v in (*graph.input, *graph.value_info)}
    nodes, folded, renamed = [], False, {}
    used = {name for node in graph.node for name in node.input}
    for value in graph.input:  # an integer input with no elements has one value: empty
        shape, elem = shapes[value.name], _elem_type(value.type)
        if shape is None or 0 not in shape or value.name not in used or not elem:
            continue
        dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
        if dtype.kind in "biu":
            folded, name = True, f"{value.name}_empty"
            renamed[value.name] = name
            known[name] = np.zeros(shape, dtype)
            nodes.append(onnx.helper.make_node("Constant", [], [name],
                                               value=numpy_helper.from_array(known[name], name)))
    for node in graph.node:
        if renamed:
            node = _renamed(onnx, node, renamed)
        values = _fold(np, onnx, proto, node, known, shapes)
        if values is None:
            nodes.append(node)
            continue
        folded = True
        for name, value in zip(node.output, values):
            known[name] = value
            nodes.append(onnx.helper.make_node("Constant", [], [name],
                                               value=numpy_helper.from_array(value, name)))
    if not folded:
        return proto
    model = type(proto)()
    model.CopyFrom(proto)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    del model.graph.value_info[:]
    return onnx.shape_inference.infer_shapes(model, data_prop=True)


def _renamed(onnx, node, renamed: dict[str, str]):
    """A copy of ``node`` reading ``renamed[x]`` for each input ``x`` it names."""
    if not any(name in renamed for name in node.input):
        return node
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    copy.input[:] = [renamed.get(name, name) for name in node.input]
    return copy


def _fold(np, onnx, proto, node, known, shapes):
    """The values of ``node``'s outputs, if it folds; records a Constant's in ``known``."""
    if node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "Constant":
        attribute = node.attribute[0]
        value = None
        if attribute.name == "value":
            value = onnx.numpy_helper.to_array(attribute.t)
        elif attribute.name in ("value_int", "value_ints"):
            value = np.array(onnx.helper.get_attribute_value(attribute), np.int64)
        if value is not None and _foldable(np, value):
            known[node.output[0]] = value
        return None
    if node.op_type not in FOLDED or any(a.type in (onnx.AttributeProto.GRAPH,
                                                     onnx.AttributeProto.GRAPHS)
                                         for a in node.attribute):
        return None
    if node.op_type in ("Shape", "Size"):
        shape = shapes.get(node.input[0])
        if shape is None:
            return None
        if node.op_type == "Size":
            return [np.array(int(np.prod(shape)), np.int64)]
        attributes = {a.name: a.i for a in node.attribute}
        start, end = attributes.get("start", 0), attributes.get("end", len(shape))
        return [np.array(shape[start:end], np.int64)]
    if not all(name in known for name in node.input if name):
        return None
    try:
        values = _evaluate(onnx, proto, node, known)
    except Exception:  # noqa: BLE001 - left for torch-mlir to convert, or to refuse
        return None
    if not all(isinstance(v, np.ndarray) and _foldable(np, v) for v in values):
        return None
    return values


def _evaluate(onnx, proto, node, known) -> list:
    """``node`` run by ONNX's reference evaluator at the model's opsets."""
    from onnx.reference import ReferenceEvaluator

    helper, untyped = onnx.helper, onnx.TypeProto()
    inputs = [name for name in node.input if name]
    graph = helper.make_graph([node], "fold", [helper.make_value_info(n, untyped) for n in inputs],
                              [helper.make_value_info(n, untyped) for n in node.output if n])
    model = helper.make_model(graph, opset_imports=proto.opset_import)
    return ReferenceEvaluator(model).run(None, {name: known[name] for name in inputs})


def _foldable(np, value) -> bool:
    return value.dtype.kind in "biu" and value.size <= MAX_FOLDED


def _static_shape(type_proto):
    """The dims of a tensor type when all are known, else None."""
    if type_proto.WhichOneof("value") != "tensor_type" or \
            not type_proto.tensor_type.HasField("shape"):
        return None
    dims = type_proto.tensor_type.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return None
    return tuple(d.dim_value for d in dims)


def unsigned_division(proto):
    """``proto`` with every Div and Mod of unsigned integers rewritten into ops that torch-mlir
    lowers with their unsigned meaning (comparisons, shifts, Where, and a signed division of
    operands below the sign bit); ``proto`` itself where there are none. torch-mlir has no Cast
    to a wider unsigned type and back, so the quotient is built in the operands' own type:
    ``b`` with its top bit set divides ``a`` at most once (``a >= b``); any other ``b`` divides
    ``a >> 1`` exactly as signed division does, and doubling that quotient leaves a remainder
    that ``b`` divides at most once more."""
    import onnx

    graph = proto.graph
    types = {v.name: _elem_type(v.type) for v in (*graph.input, *graph.value_info, *graph.output)}
    types.update((t.name, t.data_type) for t in graph.initializer)
    nodes, rewritten = [], False
    for index, node in enumerate(graph.node):
        elem = types.get(node.input[0]) if node.op_type in ("Div", "Mod") and node.input else None
        if elem not in _UNSIGNED:
            nodes.append(node)
            continue
        rewritten = True
        nodes += _unsigned_quotient(onnx.helper, node, f"{node.name or node.op_type}_{index}_", elem)
    if not rewritten:
        return proto
    model = type(proto)()
    model.CopyFrom(proto)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return onnx.shape_inference.infer_shapes(model, data_prop=True)


def _unsigned_quotient(helper, node, prefix: str, elem: int) -> list:
    """The nodes computing Div or Mod ``node`` of unsigned ``elem`` operands (see above); the
    values they add are named ``prefix`` + a word."""
    import numpy as np
    from onnx.numpy_helper import from_array

    (a, b), (y,), nodes = node.input[:2], node.output, []

    def op(op_type, inputs, output, **attributes):
        nodes.append(helper.make_node(op_type, [x if x in (a, b) else prefix + x for x in inputs],
                                      [output if output == y else prefix + output], **attributes))

    dtype = helper.tensor_dtype_to_np_dtype(elem)
    for name, value in (("0", 0), ("1", 1), ("top", 1 << (8 * dtype.itemsize - 1))):
        # as raw bytes: torch-mlir reads no inline uint16 data
        nodes.append(helper.make_node("Constant", [], [prefix + name], value=from_array(
            np.array(value, dtype), prefix + name)))
    op("GreaterOrEqual", [b, "top"], "big")
    op("GreaterOrEqual", [a, b], "once")
    op("Where", ["once", "1", "0"], "q_big")
    op("BitShift", [a, "1"], "half", direction="RIGHT")
    op("Div", ["half", b], "q_half")
    op("BitShift", ["q_half", "1"], "q_even", direction="LEFT")
    op("Mul", ["q_even", b], "taken")
    op("Sub", [a, "taken"], "left")
    op("GreaterOrEqual", ["left", b], "more")
    op("Where", ["more", "1", "0"], "carry")
    op("Add", ["q_even", "carry"], "q_small")
    op("Where", ["big", "q_big", "q_small"], y if node.op_type == "Div" else "q")
    if node.op_type == "Mod":
        op("Mul", ["q", b], "qb")
        op("Sub", [a, "qb"], y)
    return nodes


_UNSIGNED = {2, 4, 12, 13}  # TensorProto.UINT8, UINT16, UINT32, UINT64
