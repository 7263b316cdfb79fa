"""ONNX's LSTM, GRU and RNN through pyree against onnxruntime. torch-mlir converts each into an
scf.for over the time steps that slices step ``t`` at a computed offset, which pyree refused
("a size computed from tensor contents") for every recurrent ONNX model; and it does not
convert a bidirectional GRU or RNN at all, which pyree runs as two forward ones
(importers/onnx_rewrites/nodes.py)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tooling
from pyree.compiler import CompileOptions, compile_str, import_onnx

torch = tooling.require_module("torch")
onnx = tooling.require_module("onnx")
tooling.require_module("torch_mlir")
onnxruntime = tooling.require_module("onnxruntime")

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")


def pyree_and_onnxruntime(data: bytes, *args):
    import pyree.runtime as rt

    session = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    feeds = {i.name: a for i, a in zip(session.get_inputs(), args)}
    module = rt.load_module(compile_str(import_onnx(data), CompileOptions(
        target_backends=["llvm-cpu"])), device="local-task")
    got = module[module.function_names[0]](*feeds.values())
    return [np.asarray(g) for g in (got if isinstance(got, tuple) else (got,))], \
        session.run(None, feeds)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_torch_exports_match_onnxruntime(kind, bidirectional):
    torch.manual_seed(0)
    layers, directions = 2, 1 + bidirectional
    m = getattr(torch.nn, kind)(6, 5, num_layers=layers, batch_first=True,
                                bidirectional=bidirectional).eval()
    x, h0 = torch.randn(3, 9, 6), torch.randn(layers * directions, 3, 5)
    state = (h0, torch.randn_like(h0)) if kind == "LSTM" else h0
    f = io.BytesIO()
    torch.onnx.export(m, (x, state), f, opset_version=17, dynamo=False)
    got, want = pyree_and_onnxruntime(f.getvalue(), x.numpy(), *(
        [s.numpy() for s in state] if kind == "LSTM" else [h0.numpy()]))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _bidirectional(kind: str, batch_first: bool, activations: list[str] | None):
    """A bidirectional ``kind`` node with random weights, as serialized model bytes, and its
    inputs."""
    helper, T = onnx.helper, onnx.TensorProto
    rng = np.random.default_rng(4)
    gates, hidden, inp, batch, seq = (3 if kind == "GRU" else 1), 4, 3, 2, 6
    w = rng.standard_normal((2, gates * hidden, inp)).astype(np.float32)
    r = rng.standard_normal((2, gates * hidden, hidden)).astype(np.float32) * 0.5
    b = rng.standard_normal((2, 2 * gates * hidden)).astype(np.float32)
    x_shape, h_shape = ((batch, seq, inp), (batch, 2, hidden)) if batch_first else \
        ((seq, batch, inp), (2, batch, hidden))
    y_shape = (batch, seq, 2, hidden) if batch_first else (seq, 2, batch, hidden)
    extra = {"activations": activations} if activations else {}
    node = helper.make_node(kind, ["x", "w", "r", "b", "", "h0"], ["y", "y_h"],
                            hidden_size=hidden, direction="bidirectional",
                            layout=int(batch_first), **extra)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("x", T.FLOAT, x_shape),
         helper.make_tensor_value_info("h0", T.FLOAT, h_shape)],
        [helper.make_tensor_value_info("y", T.FLOAT, y_shape),
         helper.make_tensor_value_info("y_h", T.FLOAT, h_shape)],
        [onnx.numpy_helper.from_array(a, n) for a, n in ((w, "w"), (r, "r"), (b, "b"))])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]).SerializeToString()
    return data, (rng.standard_normal(x_shape).astype(np.float32),
                  rng.standard_normal(h_shape).astype(np.float32))


@pytest.mark.parametrize("kind, activations", [
    ("GRU", ["Sigmoid", "Tanh", "Sigmoid", "Relu"]), ("RNN", ["Tanh", "Relu"])])
def test_each_direction_takes_its_own_activations(kind, activations):
    data, args = _bidirectional(kind, False, activations)
    got, want = pyree_and_onnxruntime(data, *args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_an_activation_torch_mlir_gets_wrong_is_refused_by_name():
    from pyree.compiler import CompileError

    data, _ = _bidirectional("GRU", False, ["Sigmoid", "Tanh", "HardSigmoid", "Relu"])
    with pytest.raises(CompileError, match="GRU uses the activation HardSigmoid"):
        import_onnx(data)


@pytest.mark.parametrize("kind", ["GRU", "RNN"])
def test_a_bidirectional_node_batch_first(kind):
    """layout = 1, which PyTorch's exporter never writes and onnxruntime refuses: against
    ONNX's reference implementation."""
    import pyree.runtime as rt
    from onnx.reference import ReferenceEvaluator

    data, (x, h0) = _bidirectional(kind, True, None)
    want = ReferenceEvaluator(data).run(None, {"x": x, "h0": h0})
    module = rt.load_module(compile_str(import_onnx(data), CompileOptions(
        target_backends=["llvm-cpu"])), device="local-task")
    got = [np.asarray(g) for g in module["g"](x, h0)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
