"""Shape arithmetic computed at import. Exporters and ONNX's function bodies compute shapes with
integer ops (Shape, Gather, Concat, Sub... feeding a Split, Reshape, Expand or Slice); where
their inputs are known, ONNX's reference implementation computes them here: the model's shapes
are static, so these values are constants. torch-mlir leaves them as run-time values: a Split
whose sizes are computed gets results of unknown rank, on which its conversion segfaults
(RotaryEmbedding's function body), and an Expand or Reshape whose shape is computed becomes
dynamic shapes and run-time assertions that a static model never needs."""

from __future__ import annotations

from pyree.compiler.importers.onnx_rewrites.types import elem_type, static_shape

# Ops computed here when every input is a known integer or boolean tensor (deterministic, and
# cheap at the sizes of shapes); the largest result kept as a constant, in elements.
FOLDED = frozenset({
    "Abs", "Add", "And", "Cast", "Ceil", "Concat", "ConstantOfShape", "Div", "Equal", "Expand",
    "Flatten", "Floor", "Gather", "GatherElements", "Greater", "GreaterOrEqual", "Identity",
    "Less", "LessOrEqual", "Max", "Min", "Mod", "Mul", "Neg", "Not", "Or", "Range",
    "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSum", "Reshape", "Shape", "Sign", "Size",
    "Slice", "Squeeze", "Sub", "Tile", "Transpose", "Unsqueeze", "Where", "Xor"})
MAX_FOLDED = 4096


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
    shapes = {v.name: static_shape(v.type) for v in (*graph.input, *graph.value_info)}
    nodes, folded, renamed = [], False, {}
    used = {name for node in graph.node for name in node.input}
    for value in graph.input:  # an integer input with no elements has one value: empty
        shape, elem = shapes[value.name], elem_type(value.type)
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
    if not all(isinstance(v, np.ndarray) and _foldable(np, v, node.op_type) for v in values):
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


def _foldable(np, value, op: str | None = None) -> bool:
    """Integers and booleans; float scalars too, and the float ``Range`` they make (its length
    is ONNX's ``ceil((limit - start) / delta)`` in the inputs' type, where torch-mlir computed
    it in f64: Range(5, -2, -0.7) of f32 has 11 elements, not 10)."""
    if value.size > MAX_FOLDED:
        return False
    return value.dtype.kind in "biu" or (value.dtype.kind == "f" and (value.size == 1
                                                                       or op == "Range"))
