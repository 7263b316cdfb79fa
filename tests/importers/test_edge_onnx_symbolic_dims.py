"""ONNX models with symbolic dims (``dim_param``) at the edges torch-mlir's conversion gets
wrong, checked against onnxruntime at several sizes of one compiled module: ArgMax/ArgMin
with ``select_last_index`` along a symbolic dim."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tooling
from pyree.compiler import CompileOptions, compile_str, import_onnx

onnx = tooling.require_module("onnx")
tooling.require_module("torch_mlir")
onnxruntime = tooling.require_module("onnxruntime")
TensorProto, helper = onnx.TensorProto, onnx.helper


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs],
                              list(initializers))
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    return proto


@functools.cache
def _compiled(proto_bytes: bytes):
    import pyree.runtime as rt

    proto = onnx.load_from_string(proto_bytes)
    vmfb = compile_str(import_onnx(proto), CompileOptions(target_backends=["llvm-cpu"]))
    return rt.load_module(vmfb, device="local-task")["g"], onnxruntime.InferenceSession(
        proto_bytes, providers=["CPUExecutionProvider"])


def _check(proto, *args):
    fn, session = _compiled(proto.SerializeToString())
    got = fn(*args)
    got = [r.to_host() for r in (got if isinstance(got, tuple) else (got,))]
    want = session.run(None, {i.name: a for i, a in zip(proto.graph.input, args)})
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)


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
