"""Element types pyree's compiler has no counterpart for (4- and 2-bit integers, 8- and 4-bit
floats, strings, complex numbers), refused by name with the node and value that carry them.
torch-mlir aborts the process on some (a Cast to UINT4: ``LLVM ERROR``), fails with a bare
"failed to legalize" on others, and passes the rest on for the compiler to refuse at a line of
MLIR the user never wrote."""

from __future__ import annotations

from pyree.compiler.errors import CompileError

# The ONNX element types with a pyree element type (what input/types.py reads).
SUPPORTED = frozenset({"FLOAT", "FLOAT16", "BFLOAT16", "DOUBLE", "BOOL", "INT8", "INT16",
                       "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"})


def refuse_missing_types(proto) -> None:
    """CompileError naming the first value of ``proto`` (graph input or output, initializer,
    node output, Cast target) whose element type pyree has no counterpart for."""
    import onnx

    def check(code: int, what: str) -> None:
        if code == onnx.TensorProto.UNDEFINED:
            return
        try:
            name = onnx.TensorProto.DataType.Name(code)
        except ValueError:  # from a newer ONNX than the installed one
            name = f"element type {code}"
        if name not in SUPPORTED:
            raise CompileError(f"the ONNX model uses {name} ({what}), an element type pyree "
                               "has no counterpart for; pyree's are " + ", ".join(
                                   n for n in onnx.TensorProto.DataType.keys() if n in SUPPORTED))

    graph = proto.graph
    types = {v.name: v.type for v in (*graph.input, *graph.value_info, *graph.output)}
    for value in graph.input:
        check(elem_type(value.type), f"graph input '{value.name}'")
    for tensor in graph.initializer:
        check(tensor.data_type, f"initializer '{tensor.name}'")
    for index, node in enumerate(graph.node, start=1):
        where = f"node {index} ({node.op_type}{f' {node.name!r}' if node.name else ''})"
        for name in (*node.input, *node.output):
            if name in types:
                check(elem_type(types[name]), f"{where}, value '{name}'")
        for attribute in node.attribute:
            if attribute.name == "to" and node.op_type == "Cast":
                check(attribute.i, f"{where}, its target type")
            elif attribute.type == onnx.AttributeProto.TENSOR:
                check(attribute.t.data_type, f"{where}, attribute '{attribute.name}'")
    for value in graph.output:
        check(elem_type(value.type), f"graph output '{value.name}'")


def elem_type(type_proto) -> int:
    """The element type of a tensor type, or of the tensors in a sequence or optional."""
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        return type_proto.tensor_type.elem_type
    if kind in ("sequence_type", "optional_type"):
        return elem_type(getattr(type_proto, kind).elem_type)
    return 0


def static_shape(type_proto):
    """The dims of a tensor type when all are known, else None."""
    if type_proto.WhichOneof("value") != "tensor_type" or \
            not type_proto.tensor_type.HasField("shape"):
        return None
    dims = type_proto.tensor_type.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return None
    return tuple(d.dim_value for d in dims)
