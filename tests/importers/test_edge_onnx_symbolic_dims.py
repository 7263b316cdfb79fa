"""ONNX models with symbolic dims (``dim_param``) at the edges torch-mlir's conversion gets
wrong or pyree's size arithmetic did not take, checked against onnxruntime at several sizes
of one compiled module: ArgMax/ArgMin with ``select_last_index`` along a symbolic dim, and a
Slice whose end is a huge "to the end" constant, and the reshapes of Tile, DepthToSpace and
GroupNormalization over symbolic dims."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tooling
from pyree.compiler import CompileError, CompileOptions, compile_str, import_onnx

onnx = tooling.require_module("onnx")
tooling.require_module("torch_mlir")
onnxruntime = tooling.require_module("onnxruntime")
TensorProto, helper = onnx.TensorProto, onnx.helper


def _model(nodes, inputs, outputs, initializers=(), opset: int = 17):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs],
                              list(initializers))
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = 8
    return proto


@functools.cache
def _compiled(proto_bytes: bytes):
    import pyree.runtime as rt

    proto = onnx.load_from_string(proto_bytes)
    vmfb = compile_str(import_onnx(proto), CompileOptions(target_backends=["llvm-cpu"]))
    return rt.load_module(vmfb, device="local-task")["g"], onnxruntime.InferenceSession(
        proto_bytes, providers=["CPUExecutionProvider"])


def _check(proto, *args, atol: float = 0.0):
    fn, session = _compiled(proto.SerializeToString())
    got = fn(*args)
    got = [r.to_host() for r in (got if isinstance(got, tuple) else (got,))]
    want = session.run(None, {i.name: a for i, a in zip(proto.graph.input, args)})
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=0 if atol == 0 else 1e-5, atol=atol)


@pytest.mark.parametrize("op, axis, keepdims", [("ArgMax", 1, 0), ("ArgMin", 0, 1),
                                                ("ArgMax", -1, 1)])
@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (5, 17), (4, 2)])
def test_last_index_of_the_extreme_along_a_symbolic_dim(op, axis, keepdims, shape):
    """torch-mlir mapped the flipped input's index back with the static dim, -1 here: ``i + 2``,
    past the end for every row. Ties are many (values 0..2) so the last index matters."""
    out = [None] if keepdims == 0 else [None, None]
    proto = _model([helper.make_node(op, ["a"], ["y"], axis=axis, keepdims=keepdims,
                                     select_last_index=1)],
                   [("a", TensorProto.FLOAT, ["N", "L"])], [("y", TensorProto.INT64, out)])
    a = np.random.default_rng(sum(shape)).integers(0, 3, shape).astype(np.float32)
    _check(proto, a)


@pytest.mark.parametrize("end", [2**62, 2**63 - 1])
@pytest.mark.parametrize("shape", [(2, 3), (1, 5), (3, 1), (5, 17)])
def test_slice_to_a_huge_end_of_a_symbolic_dim(end, shape):
    """``min(dim, 2**62)`` was kept as a size, whose program held a constant past 2^53: the
    module compiled, then failed to load ("module file is invalid")."""
    proto = _model([helper.make_node("Slice", ["a", "s", "e", "ax"], ["y"])],
                   [("a", TensorProto.FLOAT, ["N", "L"])], [("y", TensorProto.FLOAT, [None, None])],
                   [helper.make_tensor("s", TensorProto.INT64, [1], [-3]),
                    helper.make_tensor("e", TensorProto.INT64, [1], [end]),
                    helper.make_tensor("ax", TensorProto.INT64, [1], [1])])
    _check(proto, np.random.default_rng(shape[1]).standard_normal(shape).astype(np.float32))


def test_a_size_constant_past_the_module_limit_is_a_compile_error():
    mlir = """
func.func @f(%a: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %big = arith.constant 4611686018427387904 : index
  %n = tensor.dim %a, %c0 : tensor<?xf32>
  %m = arith.addi %n, %big : index
  %e = tensor.empty(%m) : tensor<?xf32>
  return %e : tensor<?xf32>
}"""
    with pytest.raises(CompileError, match=r"needs the constant 4611686018427387904, outside "):
        compile_str(mlir, CompileOptions(target_backends=["llvm-cpu"]))


_FLOAT = TensorProto.FLOAT


@pytest.mark.parametrize("name, nodes, inputs, initializers, opset, shapes", [
    ("Tile", [helper.make_node("Tile", ["a", "r"], ["y"])], [("a", _FLOAT, ["N", "L"])],
     [helper.make_tensor("r", TensorProto.INT64, [2], [2, 3])], 17, [(2, 4), (1, 1), (5, 18)]),
    ("DepthToSpace", [helper.make_node("DepthToSpace", ["a"], ["y"], blocksize=2)],
     [("a", _FLOAT, ["N", 4, "H", "W"])], [], 17, [(1, 4, 2, 3), (2, 4, 1, 1)]),
    ("GroupNormalization", [helper.make_node("GroupNormalization", ["a", "s", "b"], ["y"],
                                             num_groups=2)],
     [("a", _FLOAT, ["N", 4, "L"])], [helper.make_tensor("s", _FLOAT, [4], [1.0, 2.0, 3.0, 0.5]),
                                      helper.make_tensor("b", _FLOAT, [4], [0.0, 0.1, 0.2, 0.3])],
     21, [(2, 4, 3), (1, 4, 1), (3, 4, 20)]),
])
def test_reshapes_of_symbolic_dims(name, nodes, inputs, initializers, opset, shapes):
    """torch-mlir writes these as tensor.reshape between types with ``?`` dims, which xDSL's
    verifier refused ("source and result tensor should have the same number of elements",
    comparing products of -1s); MLIR compares element counts only of static types."""
    dims = [None if name == "DepthToSpace" or isinstance(d, str) else d for d in inputs[0][2]]
    proto = _model(nodes, inputs, [("y", _FLOAT, dims)], initializers, opset)
    for shape in shapes:
        a = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
        _check(proto, a, atol=1e-5 if name == "GroupNormalization" else 0.0)


@pytest.mark.parametrize("dims, opset", [([2, 3, "L"], 17), (["N", 3, "H", "W"], 18),
                                         (["N", 3, 4], 17)])
def test_instance_normalization_over_symbolic_spatial_dims(dims, opset):
    """torch-mlir divided the sum of squares by the static element count, -1 for a dim_param
    spatial dim: a negated variance and NaN everywhere."""
    proto = _model([helper.make_node("InstanceNormalization", ["a", "s", "b"], ["y"],
                                     epsilon=1e-3)],
                   [("a", _FLOAT, dims)], [("y", _FLOAT, [None if isinstance(d, str) else d
                                                           for d in dims])],
                   [helper.make_tensor("s", _FLOAT, [3], [1.0, 2.0, 0.5]),
                    helper.make_tensor("b", _FLOAT, [3], [0.0, 0.1, -1.0])], opset)
    rng = np.random.default_rng(len(dims))
    for size in (1, 2, 7):
        shape = [size if isinstance(d, str) else d for d in dims]
        # onnxruntime computes the affine part with its own rounding: a few ulps of 1
        _check(proto, rng.standard_normal(shape).astype(np.float32) * 3 + 1, atol=1e-4)


@pytest.mark.parametrize("step, end", [(-1, -2**63), (-2, -2**62), (-1, 0)])
@pytest.mark.parametrize("shape", [(2, 3), (1, 1), (5, 17)])
def test_slice_with_a_negative_step_of_a_symbolic_dim(step, end, shape):
    """torch.flip exported to ONNX is a Slice with step -1. Its element count is
    ``(end - start) floordiv step``: a division of a size by a negative constant was refused,
    and the reversal's ``n - 1`` met in a fused index was a TypeError ("has no value at
    compile time"), not even a CompileError."""
    proto = _model([helper.make_node("Slice", ["a", "s", "e", "ax", "st"], ["y"])],
                   [("a", TensorProto.FLOAT, ["N", "L"])], [("y", TensorProto.FLOAT, [None, None])],
                   [helper.make_tensor("s", TensorProto.INT64, [1], [-1]),
                    helper.make_tensor("e", TensorProto.INT64, [1], [end]),
                    helper.make_tensor("ax", TensorProto.INT64, [1], [1]),
                    helper.make_tensor("st", TensorProto.INT64, [1], [step])])
    _check(proto, np.random.default_rng(shape[1]).standard_normal(shape).astype(np.float32))
