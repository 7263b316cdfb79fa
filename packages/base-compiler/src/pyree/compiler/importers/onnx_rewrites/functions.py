"""Ops replaced by their ONNX function bodies, primitive ONNX ops that torch-mlir converts.

``import_here`` expands the ops torch-mlir leaves unconverted (Attention, LinearAttention, ...)
where the op's schema has a function at the model's opset (``has_function``), so that the ops
it converts keep its conversions; EXPANDED lists the ops expanded even though torch-mlir
converts them, each with the reason. The expansion is ONNX's own inliner, here, rather than
torch-mlir's importer, whose expansions land in private functions that ``fold`` cannot reach.
"""

from __future__ import annotations

from pyree.compiler.errors import CompileError

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
    # torch-mlir's conversion crops at offsets it computes at run time (a dynamic
    # tensor.extract_slice), even from a constant shape; its body's arithmetic folds here
    "CenterCropPad",
}


def expand_functions(proto, op_types=frozenset(), depth: int = 4):
    """``proto`` with every default-domain node of ``op_types`` and EXPANDED that has a function
    body at the model's opset replaced by it (context-dependent ones too, specialised to the
    node's types), shapes inferred again; again where a body holds such a node
    (SoftmaxCrossEntropyLoss's holds a NegativeLogLikelihoodLoss), ``depth`` times at most."""
    import onnx
    import onnx.inliner

    wanted = set(op_types) | EXPANDED
    for _ in range(depth):
        present = sorted(op for op in {n.op_type for n in proto.graph.node
                                       if n.domain in ("", "ai.onnx")}
                         if op in wanted and has_function(proto, op))
        if not present:
            break
        try:
            proto = onnx.inliner.inline_selected_functions(proto, [("", op) for op in present],
                                                           inline_schema_functions=True)
        except RuntimeError as err:  # ONNX's inliner asserts (an omitted optional input, e.g.)
            raise CompileError(f"cannot replace {', '.join(present)} by its ONNX function body, "
                               f"which torch-mlir would need: {str(err).strip()}") from None
        proto = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    return proto


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
