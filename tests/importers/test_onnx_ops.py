"""ONNX ops that torch-mlir alone refuses, converts wrongly for pyree, or crashes on, imported
through pyree's own rewrites (importers/onnx_rewrites.py) and checked against onnxruntime:
ops replaced by their ONNX function bodies (Attention, RotaryEmbedding, the loss functions),
shape arithmetic computed at import (a Split whose sizes are computed), and unsigned model
inputs, which the runtime takes for the signless arguments they become."""

from __future__ import annotations

import numpy as np
import pytest
import tooling
from compiled import compiled
from pyree.compiler import CompileOptions, compile_str, import_onnx

onnx = tooling.require_module("onnx")
tooling.require_module("torch_mlir")
onnxruntime = tooling.require_module("onnxruntime")
TensorProto, helper = onnx.TensorProto, onnx.helper


def model(nodes, inputs, outputs, opset: int = 23):
    """A one-graph model; ``inputs`` and ``outputs`` are (name, element type, shape)."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def pyree_and_onnxruntime(proto, *args):
    """The model's results from pyree (llvm-cpu, local-task) and from onnxruntime."""
    import pyree.runtime as rt

    vmfb = compiled(import_onnx(proto), CompileOptions(target_backends=["llvm-cpu"]))
    got = rt.load_module(vmfb, device="local-task")["g"](*args)
    got = [r.to_host() for r in (got if isinstance(got, tuple) else (got,))]
    session = onnxruntime.InferenceSession(proto.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    want = session.run(None, {i.name: a for i, a in zip(proto.graph.input, args)})
    return got, want


def test_attention_by_its_function_body():
    """Attention (opset 23), which torch-mlir does not convert: grouped-query heads, a boolean
    mask, causal, softcap; a row fully masked by the mask."""
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 4, 5, 8), np.float32)
    k = rng.standard_normal((2, 2, 7, 8), np.float32)
    v = rng.standard_normal((2, 2, 7, 6), np.float32)
    mask = rng.random((5, 7)) > 0.3
    mask[:, 0] = True
    node = helper.make_node("Attention", ["q", "k", "v", "mask"], ["y"], softcap=3.0, scale=0.4)
    proto = model([node], [("q", TensorProto.FLOAT, q.shape), ("k", TensorProto.FLOAT, k.shape),
                           ("v", TensorProto.FLOAT, v.shape), ("mask", TensorProto.BOOL, mask.shape)],
                  [("y", TensorProto.FLOAT, (2, 4, 5, 6))])
    (got,), (want,) = pyree_and_onnxruntime(proto, q, k, v, mask)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_by_its_function_body(interleaved):
    """RotaryEmbedding (opset 23): torch-mlir converts it to an op it cannot lower, and its
    function body computes the Split sizes from shapes (crashing torch-mlir, unless computed at
    import). Half the head is rotated (rotary_embedding_dim), the rest passes through."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4, 10), np.float32)  # batch, heads, sequence, head size
    cos = rng.standard_normal((9, 3), np.float32)
    sin = rng.standard_normal((9, 3), np.float32)
    positions = rng.integers(0, 9, (2, 4), dtype=np.int64)
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "positions"], ["y"],
                            interleaved=interleaved, rotary_embedding_dim=6)
    proto = model([node], [("x", TensorProto.FLOAT, x.shape), ("cos", TensorProto.FLOAT, cos.shape),
                           ("sin", TensorProto.FLOAT, sin.shape),
                           ("positions", TensorProto.INT64, positions.shape)],
                  [("y", TensorProto.FLOAT, x.shape)])
    (got,), (want,) = pyree_and_onnxruntime(proto, x, cos, sin, positions)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_loss_functions_by_their_function_bodies():
    """SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss with class weights and an ignored
    class, over a spatial dimension: forms torch-mlir's aten.nll_loss_forward cannot lower."""
    rng = np.random.default_rng(5)
    scores = rng.standard_normal((3, 5, 4), np.float32)
    labels = rng.integers(0, 5, (3, 4), dtype=np.int64)
    labels[1, 2] = 2  # the ignored class, at least once
    weights = rng.random(5, np.float32) + 0.5
    nodes = [helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t", "w"], ["sce", "log_prob"],
                              reduction="mean", ignore_index=2),
             helper.make_node("NegativeLogLikelihoodLoss", ["log_prob", "t", "w"], ["nll"],
                              reduction="none", ignore_index=2)]
    proto = model(nodes, [("x", TensorProto.FLOAT, scores.shape), ("t", TensorProto.INT64, labels.shape),
                          ("w", TensorProto.FLOAT, weights.shape)],
                  [("sce", TensorProto.FLOAT, ()), ("log_prob", TensorProto.FLOAT, scores.shape),
                   ("nll", TensorProto.FLOAT, labels.shape)])
    got, want = pyree_and_onnxruntime(proto, scores, labels, weights)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert got[2][1, 2] == 0


def test_split_sizes_computed_from_shapes():
    """Shape -> Sub -> Concat -> Split, sizes [6, 0] and [3, 3]: constants once computed at
    import (torch-mlir gave the Split results of unknown rank and crashed)."""
    x = np.random.default_rng(6).standard_normal((2, 6), np.float32)
    nodes = [helper.make_node("Shape", ["x"], ["n"], start=1, end=2),
             helper.make_node("Sub", ["n", "n"], ["zero"]),
             helper.make_node("Concat", ["n", "zero"], ["sizes"], axis=0),
             helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1),
             helper.make_node("Div", ["n", "two"], ["half"]),
             helper.make_node("Concat", ["half", "half"], ["halves"], axis=0),
             helper.make_node("Split", ["a", "halves"], ["c", "d"], axis=1),
             helper.make_node("Concat", ["d", "b", "c"], ["y"], axis=1)]
    two = helper.make_tensor("two", TensorProto.INT64, [1], [2])
    proto = model(nodes, [("x", TensorProto.FLOAT, x.shape)], [("y", TensorProto.FLOAT, x.shape)],
                  opset=18)
    proto.graph.initializer.append(two)
    (got,), (want,) = pyree_and_onnxruntime(proto, x)
    np.testing.assert_array_equal(want, np.concatenate([x[:, 3:], x[:, :3]], axis=1))
    np.testing.assert_array_equal(got, want)


def test_unsigned_inputs_and_results():
    """uint64 and uint8 inputs and results, values past the signed range: the module's
    signature keeps them unsigned (importers/unsigned.py; they had come back signless, 255 as
    -1), so the runtime returns the graph's types; Div and Max need the unsigned reading."""
    rng = np.random.default_rng(8)
    a = rng.integers(2**63, 2**64 - 1, (3, 4), dtype=np.uint64, endpoint=True)
    b = rng.integers(1, 2**33, (3, 4), dtype=np.uint64)
    c = rng.integers(0, 256, (3, 4), dtype=np.uint8)
    d = rng.integers(1, 256, (3, 4), dtype=np.uint8)
    nodes = [helper.make_node("Div", ["a", "b"], ["q"]), helper.make_node("Div", ["c", "d"], ["r"]),
             helper.make_node("Max", ["c", "d"], ["m"])]
    proto = model(nodes, [("a", TensorProto.UINT64, a.shape), ("b", TensorProto.UINT64, b.shape),
                          ("c", TensorProto.UINT8, c.shape), ("d", TensorProto.UINT8, d.shape)],
                  [("q", TensorProto.UINT64, a.shape), ("r", TensorProto.UINT8, c.shape),
                   ("m", TensorProto.UINT8, c.shape)], opset=18)
    got, want = pyree_and_onnxruntime(proto, a, b, c, d)
    np.testing.assert_array_equal(want[0], a // b)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_gelu_tanh_by_its_function_body():
    """Gelu (opset 20) by ONNX's function body: torch-mlir's own lowering of the tanh form
    took sqrt(2/pi) as 0.797724, a relative error of 1e-3 at x = -2.55."""
    x = np.linspace(-3, 3, 601, dtype=np.float32)
    proto = model([helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")],
                  [("x", TensorProto.FLOAT, x.shape)], [("y", TensorProto.FLOAT, x.shape)],
                  opset=20)
    (got,), _ = pyree_and_onnxruntime(proto, x)
    xd = x.astype(np.float64)
    want = 0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * (xd + 0.044715 * xd**3)))
    np.testing.assert_allclose(got, want, rtol=5e-5, atol=1e-7)


@pytest.mark.parametrize("elem, dtype", [(TensorProto.UINT8, np.uint8), (TensorProto.INT8, np.int8)])
def test_qlinear_matmul_with_zero_points_as_inputs(elem, dtype):
    """QLinearMatMul whose zero points are graph inputs (torch-mlir dropped them), results
    past 127 (a Cast to uint8 went through fptosi to i8), as onnxruntime computes it."""
    rng = np.random.default_rng(9)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (2, 3, 5), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, (2, 5, 4), dtype=dtype, endpoint=True)
    zeros = [np.array([z], dtype) for z in rng.integers(info.min, info.max, 3, endpoint=True)]
    scales = [np.array([s], np.float32) for s in (0.021, 0.013, 0.11)]
    names = ["a", "a_scale", "a_zero", "b", "b_scale", "b_zero", "y_scale", "y_zero"]
    values = [a, scales[0], zeros[0], b, scales[1], zeros[1], scales[2], zeros[2]]
    proto = model([helper.make_node("QLinearMatMul", names, ["y"])],
                  [(name, onnx.helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                   for name, v in zip(names, values)], [("y", elem, (2, 3, 4))], opset=21)
    (got,), (want,) = pyree_and_onnxruntime(proto, *values)
    assert len(np.unique(want)) > 8  # not all clamped
    np.testing.assert_array_equal(got.view(dtype), want)


@pytest.mark.parametrize("strides, pads", [([1, 1], [0, 0, 0, 0]), ([2, 1], [1, 2, 0, 1])])
def test_qlinear_conv_with_per_channel_scales_and_a_bias(strides, pads):
    """Per-channel weight scales and an int32 bias (onnxruntime's quantizer writes them; the
    bias had been added unscaled, so every output saturated), against onnxruntime (weights
    within [-64, 63], where its u8s8 kernel is exact)."""
    rng = np.random.default_rng(23)
    x = rng.integers(0, 256, (2, 3, 7, 6), dtype=np.uint8)
    w = rng.integers(-64, 64, (5, 3, 3, 2), dtype=np.int8)
    values = {"x_scale": np.array(0.02, np.float32), "x_zero": np.array(128, np.uint8),
              "w": w, "w_scale": np.array([0.01, 0.02, 0.005, 0.013, 0.007], np.float32),
              "w_zero": np.zeros(5, np.int8), "y_scale": np.array(0.05, np.float32),
              "y_zero": np.array(100, np.uint8),
              "bias": np.array([100, -200, 3000, -7, 0], np.int32)}
    node = helper.make_node("QLinearConv", ["x", *values], ["y"], strides=strides, pads=pads)
    proto = model([node], [("x", TensorProto.UINT8, x.shape)],
                  [("y", TensorProto.UINT8, None)], opset=18)
    proto.graph.initializer.extend(onnx.numpy_helper.from_array(v, k) for k, v in values.items())
    proto = onnx.shape_inference.infer_shapes(proto)
    (got,), (want,) = pyree_and_onnxruntime(proto, x)
    assert got.dtype == want.dtype == np.uint8
    np.testing.assert_array_equal(got, want)
    assert 0 < np.count_nonzero((want > 0) & (want < 255))  # not all saturated


@pytest.mark.parametrize("a_shape, b_shape, a_zero, b_zero", [
    ((3, 5), (5, 4), None, None), ((4, 5), (5, 3), "row", "scalar"),
    ((5, 5), (5, 3), "row", "column"), ((2, 3, 7), (7, 6), "scalar", "column")])
@pytest.mark.parametrize("b_dtype", [np.uint8, np.int8])
def test_matmul_integer_zero_points(a_shape, b_shape, a_zero, b_zero, b_dtype):
    """MatMulInteger with no, scalar, per-row (a) and per-column (b) zero points, against
    numpy's exact product (a per-row zero point had been subtracted along K; uint8 times
    uint8 did not compile). onnxruntime takes no per-row zero point."""
    import pyree.runtime as rt

    rng = np.random.default_rng(36)
    info = np.iinfo(b_dtype)
    a = rng.integers(0, 256, a_shape, dtype=np.uint8)
    b = rng.integers(info.min, info.max, b_shape, dtype=b_dtype, endpoint=True)
    zeros = {"row": (a_shape[-2],), "column": (b_shape[-1],), "scalar": ()}
    az = None if a_zero is None else rng.integers(0, 256, zeros[a_zero], dtype=np.uint8)
    bz = None if b_zero is None else rng.integers(info.min, info.max, zeros[b_zero], dtype=b_dtype)
    names = ["a", "b"] + (["az", "bz"] if az is not None else [])
    node = helper.make_node("MatMulInteger", names, ["y"])
    want = ((a.astype(np.int64) - (0 if az is None else az.astype(np.int64).reshape(-1, 1)))
            @ (b.astype(np.int64) - (0 if bz is None else bz.astype(np.int64))))
    proto = model([node], [("a", TensorProto.UINT8, a_shape),
                           ("b", helper.np_dtype_to_tensor_dtype(np.dtype(b_dtype)), b_shape)],
                  [("y", TensorProto.INT32, want.shape)], opset=18)
    if az is not None:
        proto.graph.initializer.extend([onnx.numpy_helper.from_array(az, "az"),
                                        onnx.numpy_helper.from_array(bz, "bz")])
    vmfb = compile_str(import_onnx(proto), CompileOptions(target_backends=["llvm-cpu"]))
    got = rt.load_module(vmfb, device="local-task")["g"](a, b).to_host()
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk", [(3, 4), (4, 5)]), ("ji", [(3, 4)]), ("ii", [(5, 5)]), ("bij,bjk", [(2, 3, 4), (2, 4, 7)]),
    ("...ij,j", [(2, 3, 4), (4,)]), ("Ba,aC", [(3, 4), (4, 2)]), ("i,i", [(7,), (7,)])])
def test_einsum_with_an_implicit_output(equation, shapes):
    """No ``->``: the labels used once, alphabetically, after the broadcast dims (torch-mlir
    converted no such equation), against numpy (onnxruntime takes no capitals there)."""
    import pyree.runtime as rt

    rng = np.random.default_rng(8)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    names = [f"x{k}" for k in range(len(args))]
    want = np.einsum(equation, *args)
    proto = model([helper.make_node("Einsum", names, ["y"], equation=equation)],
                  [(x, TensorProto.FLOAT, a.shape) for x, a in zip(names, args)],
                  [("y", TensorProto.FLOAT, want.shape)], opset=18)
    vmfb = compiled(import_onnx(proto), CompileOptions(target_backends=["llvm-cpu"]))
    got = rt.load_module(vmfb, device="local-task")["g"](*args).to_host()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("start, limit, delta", [(5.0, -2.0, -0.7), (-2.0, 5.0, 0.7),
                                                 (0.0, 1.0, 0.1), (3.0, 3.0, 1.0), (0.5, 20.0, 3.0)])
def test_range_of_float_constants(start, limit, delta):
    """A float Range of constants has ONNX's length, ``ceil((limit - start) / delta)`` in f32
    (11 for 5, -2, -0.7, where torch-mlir's f64 length 10 did not compile), and its values,
    against ONNX's reference (onnxruntime accumulates the steps instead)."""
    import pyree.runtime as rt
    from onnx.reference import ReferenceEvaluator

    f = TensorProto.FLOAT
    proto = model([helper.make_node("Range", ["s", "l", "d"], ["r"]),
                   helper.make_node("Mul", ["r", "x"], ["y"])], [("x", f, ())],
                  [("y", f, ("n",))], opset=18)
    proto.graph.initializer.extend(onnx.numpy_helper.from_array(np.array(v, np.float32), name)
                                   for name, v in (("s", start), ("l", limit), ("d", delta)))
    x = np.array(1.5, np.float32)
    want = ReferenceEvaluator(proto).run(None, {"x": x})[0]
    vmfb = compile_str(import_onnx(proto), CompileOptions(target_backends=["llvm-cpu"]))
    got = rt.load_module(vmfb, device="local-task")["g"](x).to_host()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype, mode", [(np.float16, "linear"), (np.float16, "cubic"),
                                         (np.uint8, "linear"), (np.int8, "linear")])
def test_resize_of_narrow_types(dtype, mode):
    """Resize of f16 (linear, cubic) and of 8-bit integers (linear), up and down at odd sizes:
    torch-mlir's conversion gave invalid IR; against onnxruntime (f32 inside, integers
    truncated)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 2, 7, 9)) * (60 if np.dtype(dtype).kind in "iu" else 1)
    x = np.abs(x).astype(dtype) if dtype == np.uint8 else x.astype(dtype)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    sizes = helper.make_tensor("sizes", TensorProto.INT64, [4], [1, 2, 10, 5])
    proto = model([helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode)],
                  [("x", elem, x.shape)], [("y", elem, (1, 2, 10, 5))], opset=18)
    proto.graph.initializer.append(sizes)
    (got,), (want,) = pyree_and_onnxruntime(proto, x)
    assert got.dtype == want.dtype
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3,
                                   atol=1e-3)
    else:
        np.testing.assert_array_equal(got, want)


def test_cast_of_floats_to_uint8():
    x = np.array([0, 1.5, 127, 128, 200.7, 255, 254.2, 3], np.float32)
    proto = model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.UINT8)],
                  [("x", TensorProto.FLOAT, x.shape)], [("y", TensorProto.UINT8, x.shape)])
    (got,), (want,) = pyree_and_onnxruntime(proto, x)
    np.testing.assert_array_equal(got.view(np.uint8), want)
    assert want.tolist() == [0, 1, 127, 128, 200, 255, 254, 3]


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_ties_and_outside(mode, align_corners):
    """GridSample with zeros padding: nearest ties round half to even (torch-mlir took the upper
    pixel), and coordinates past the edges read zero (torch-mlir read a clamped pixel)."""
    rng = np.random.default_rng(10)
    x = rng.standard_normal((2, 3, 5, 4), np.float32)
    sizes = np.array([4, 5], np.float32)  # the grid's last axis: width, then height
    pixels = rng.integers(-3, 9, (2, 6, 7, 2)).astype(np.float32) / 2  # ties, and outside
    if align_corners:
        grid = pixels / (sizes - 1) * 2 - 1
    else:
        grid = (pixels * 2 + 1) / sizes - 1
    grid = grid.astype(np.float32)
    proto = model([helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode,
                                    align_corners=align_corners)],
                  [("x", TensorProto.FLOAT, x.shape), ("grid", TensorProto.FLOAT, grid.shape)],
                  [("y", TensorProto.FLOAT, (2, 3, 6, 7))], opset=20)
    (got,), (want,) = pyree_and_onnxruntime(proto, x, grid)
    assert (want == 0).mean() > 0.1  # some samples fall outside
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(2, 3, 4, 4), (2, 2)])
def test_det_with_pivoting(shape):
    """Det with partial pivoting: torch-mlir's own did not pivot (NaN where the first pivot is
    zero); a singular matrix gives 0. A single 2x2 matrix's pivot search once stopped the
    compile (its row index was read while gathers were folded)."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal(shape, np.float32)
    if len(shape) == 2:
        x[0, 0] = 0  # a zero first pivot
    else:
        x[0, 0] = [[0, 1, 2, 3], [2, 3, 1, 0], [1, 0, 0, 2], [3, 1, 2, 2]]  # a zero first pivot
        x[0, 1, 3] = x[0, 1, 0] + x[0, 1, 1]  # singular
    proto = model([helper.make_node("Det", ["x"], ["y"])], [("x", TensorProto.FLOAT, x.shape)],
                  [("y", TensorProto.FLOAT, shape[:-2])], opset=22)
    (got,), (want,) = pyree_and_onnxruntime(proto, x)
    np.testing.assert_allclose(got, np.linalg.det(x.astype(np.float64)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("p, opset", [(2, 22), (1, 17)])
def test_lp_normalization_of_zero_slices(p, opset):
    """An all-zero slice normalizes to zeros, as in onnxruntime (torch-mlir divided 0 by 0)."""
    x = np.random.default_rng(11).standard_normal((3, 4, 5), np.float32)
    x[1, :, 2] = 0
    proto = model([helper.make_node("LpNormalization", ["x"], ["y"], axis=1, p=p)],
                  [("x", TensorProto.FLOAT, x.shape)], [("y", TensorProto.FLOAT, x.shape)],
                  opset=opset)
    (got,), (want,) = pyree_and_onnxruntime(proto, x)
    assert np.all(want[1, :, 2] == 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_reductions_with_axes_as_constant_inputs():
    """Reduce* of opset 18, axes an initializer, a Constant, and computed from a shape (folded
    at import); negative axes, keepdims both ways."""
    x = np.random.default_rng(13).standard_normal((3, 4, 5), np.float32)
    nodes = [helper.make_node("ReduceL2", ["x", "axes_init"], ["l2"], keepdims=0),
             helper.make_node("Constant", [], ["axes_const"],
                              value=helper.make_tensor("c", TensorProto.INT64, [2], [0, -1])),
             helper.make_node("ReduceMax", ["x", "axes_const"], ["max"], keepdims=1),
             helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Size", ["shape"], ["rank"]),
             helper.make_node("Sub", ["rank", "one"], ["last"]),
             helper.make_node("Unsqueeze", ["last", "zero"], ["axes_computed"]),
             helper.make_node("ReduceLogSumExp", ["x", "axes_computed"], ["lse"], keepdims=0)]
    proto = model(nodes, [("x", TensorProto.FLOAT, x.shape)],
                  [("l2", TensorProto.FLOAT, (3, 5)), ("max", TensorProto.FLOAT, (1, 4, 1)),
                   ("lse", TensorProto.FLOAT, (3, 4))], opset=18)
    proto.graph.initializer.extend([
        helper.make_tensor("axes_init", TensorProto.INT64, [1], [-2]),
        helper.make_tensor("one", TensorProto.INT64, [], [1]),
        helper.make_tensor("zero", TensorProto.INT64, [1], [0])])
    got, want = pyree_and_onnxruntime(proto, x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("elem, dtype", [(TensorProto.UINT8, np.uint8), (TensorProto.INT8, np.int8)])
def test_dequantize_per_axis(elem, dtype):
    """DequantizeLinear along axis 1, zero points past 127 (torch-mlir read uint8 196 as -60)."""
    rng = np.random.default_rng(14)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (2, 4, 3), dtype=dtype, endpoint=True)
    zero = np.array([info.max - 3, info.min + 5, 0, info.max], dtype)
    scale = np.array([0.5, 2.0, 0.01, 3.0], np.float32)
    proto = model([helper.make_node("DequantizeLinear", ["x", "scale", "zero"], ["y"], axis=1)],
                  [("x", elem, x.shape), ("scale", TensorProto.FLOAT, scale.shape),
                   ("zero", elem, zero.shape)], [("y", TensorProto.FLOAT, x.shape)], opset=21)
    (got,), (want,) = pyree_and_onnxruntime(proto, x, scale, zero)
    np.testing.assert_allclose(want, (x.astype(np.float64) - zero[:, None]) * scale[:, None])
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("time_axis, shape", [(0, (5, 3, 2)), (1, (3, 5))])
def test_reverse_sequence_with_lengths_as_inputs(time_axis, shape):
    """torch-mlir sliced by the run-time lengths (a dynamic slice); rebuilt as a gather. Lengths
    of 0, 1, some and all steps; one past the end reverses them all, as ONNX's reference does."""
    import pyree.runtime as rt
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(10)
    x = rng.standard_normal(shape).astype(np.float32)
    steps = shape[time_axis]
    lengths = np.array([0, steps, 2] if time_axis == 0 else [1, 3, steps], np.int64)
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], time_axis=time_axis,
                            batch_axis=1 - time_axis)
    proto = model([node], [("x", TensorProto.FLOAT, shape), ("lens", TensorProto.INT64, (3,))],
                  [("y", TensorProto.FLOAT, shape)], opset=10)
    (got,), (want,) = pyree_and_onnxruntime(proto, x, lengths)
    reference = np.moveaxis(x, time_axis, 0).copy()
    for b, n in enumerate(lengths):
        reference[:n, b] = reference[:n, b][::-1]
    np.testing.assert_array_equal(got, np.moveaxis(reference, 0, time_axis))
    np.testing.assert_array_equal(got, want)
    function = rt.load_module(compile_str(import_onnx(proto)), device="local-task")["g"]
    past = lengths + np.array([0, 2, 0])
    (want,) = ReferenceEvaluator(proto).run(None, {"x": x, "lens": past})
    np.testing.assert_array_equal(function(x, past).to_host(), want)


@pytest.mark.parametrize("shape_a, shape_b", [((5,), (2, 5, 3)), ((2, 1, 3, 5), (5,))])
def test_matmul_of_a_vector_and_a_stack(shape_a, shape_b):
    """torch-mlir could not lower these aten.matmul forms; numpy.matmul's row/column rule."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal(shape_a).astype(np.float32)
    b = rng.standard_normal(shape_b).astype(np.float32)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    proto = model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                  [("a", TensorProto.FLOAT, shape_a), ("b", TensorProto.FLOAT, shape_b)],
                  [("y", TensorProto.FLOAT, want.shape)], opset=13)
    (got,), (runtime,) = pyree_and_onnxruntime(proto, a, b)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, runtime, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_orders_of_unsigned_integers(dtype):
    """TopK, Clip, MaxPool and GlobalMaxPool of unsigned values with the top bit
    set (torch-mlir ordered them as signed: TopK picked 127 over 200, Clip's bound 128 read as
    -128, MaxPool kept 130 over 200), against ONNX's reference (onnxruntime has no uint16-64
    TopK)."""
    from onnx.reference import ReferenceEvaluator

    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    rng = np.random.default_rng(15)
    top = np.iinfo(dtype).max
    x = rng.integers(0, top, (3, 7), dtype=dtype, endpoint=True)
    x[0, :4] = [top, top // 2, top // 2 + 1, 0]
    low, high = np.array(top // 2 + 1, dtype), np.array(top - 3, dtype)
    k = np.array([3], np.int64)
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1),
             helper.make_node("Clip", ["x", "low", "high"], ["c"]),
             helper.make_node("Reshape", ["x", "planes"], ["x4"]),
             helper.make_node("MaxPool", ["x4"], ["p"], kernel_shape=[2, 1], strides=[2, 1]),
             helper.make_node("GlobalMaxPool", ["x4"], ["g"])]
    planes = helper.make_tensor("planes", TensorProto.INT64, [4], [1, 3, 7, 1])
    proto = model(nodes, [("x", elem, x.shape), ("k", TensorProto.INT64, k.shape),
                          ("low", elem, ()), ("high", elem, ())],
                  [("v", elem, (3, 3)), ("i", TensorProto.INT64, (3, 3)), ("c", elem, x.shape),
                   ("p", elem, (1, 3, 3, 1)), ("g", elem, (1, 3, 1, 1))], opset=18)
    proto.graph.initializer.append(planes)
    import pyree.runtime as rt
    vmfb = compile_str(import_onnx(proto), CompileOptions(target_backends=["llvm-cpu"]))
    got = rt.load_module(vmfb, device="local-task")["g"](x, k, low, high)
    want = ReferenceEvaluator(proto).run(None, {"x": x, "k": k, "low": low, "high": high})
    for g, w in zip(got, want):
        g = g.to_host()
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    assert want[0][0, 0] == top  # the top bit's values are among those compared


def test_integer_negation_selu_defaults_and_float_fmod():
    """Neg of int32/int64 past 2^24 (torch-mlir went through f32: -16777217 came out
    -16777216), Selu without attributes (torch-mlir's defaults had 6 digits), and Mod with
    fmod=1 of floats (C's fmod: exact past 2^24 quotients, ``fmod(3, inf)`` 3, -0.0 kept),
    against onnxruntime."""
    ints = np.array([16777217, -16777217, 2**31 - 1, -2**31 + 1, 123456789, 0], np.int32)
    longs = np.array([2**53 + 1, -(2**40) - 1, 2**62 + 3, -7], np.int64)
    x = np.array([2.0, -3.0, 10.0, -1e-5, 0.0, -0.0, np.nan, -np.inf], np.float32)
    a = np.array([3.0, -2.5, 1e10, 16777216.0, 7.5, -0.0, 0.0, np.inf, np.nan, -7.0, 5.0, -1e-30],
                 np.float32)
    b = np.array([np.inf, -np.inf, 3.0, 10.0, -2.0, 1.0, 0.0, 2.0, 1.0, 0.7, np.nan, 3.0],
                 np.float32)
    nodes = [helper.make_node("Neg", ["ints"], ["n32"]), helper.make_node("Neg", ["longs"], ["n64"]),
             helper.make_node("Selu", ["x"], ["selu"]),
             helper.make_node("Mod", ["a", "b"], ["fmod"], fmod=1)]
    f, i32, i64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
    proto = model(nodes, [("ints", i32, ints.shape), ("longs", i64, longs.shape),
                          ("x", f, x.shape), ("a", f, a.shape), ("b", f, b.shape)],
                  [("n32", i32, ints.shape), ("n64", i64, longs.shape), ("selu", f, x.shape),
                   ("fmod", f, a.shape)], opset=18)
    got, want = pyree_and_onnxruntime(proto, ints, longs, x, a, b)
    np.testing.assert_array_equal(got[0], -ints)
    np.testing.assert_array_equal(got[1], -longs)
    np.testing.assert_allclose(got[2], want[2], rtol=2e-7, atol=0)
    np.testing.assert_array_equal(got[3], np.fmod(a, b))
    np.testing.assert_array_equal(np.signbit(got[3]), np.signbit(np.fmod(a, b)))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype


def test_nan_through_max_min_clip_sign_and_equal_to_itself():
    """A NaN input gives NaN through Max, Min (either operand), Clip and Sign, and Equal of a
    value with itself is false at NaN, as onnxruntime gives (torch-mlir's compares had lost the
    NaN, and it folded Equal(x, x) to true)."""
    nan, inf = np.nan, np.inf
    x = np.array([[1.0, nan, 3.0, -inf, 0.25], [2.0, 2.0, -0.0, 0.0, 7.0],
                  [nan, nan, 1.0, inf, -3.0]], np.float32)
    y = x[::-1].copy()
    low, high = np.array(-1.0, np.float32), np.array(2.0, np.float32)
    nodes = [helper.make_node("Max", ["x", "y"], ["max"]), helper.make_node("Min", ["y", "x"], ["min"]),
             helper.make_node("Clip", ["x", "low", "high"], ["clip"]),
             helper.make_node("Sign", ["x"], ["sign"]), helper.make_node("Equal", ["x", "x"], ["same"])]
    f = TensorProto.FLOAT
    proto = model(nodes, [("x", f, x.shape), ("y", f, y.shape), ("low", f, ()), ("high", f, ())],
                  [("max", f, x.shape), ("min", f, x.shape), ("clip", f, x.shape),
                   ("sign", f, x.shape), ("same", TensorProto.BOOL, x.shape)], opset=18)
    got, want = pyree_and_onnxruntime(proto, x, y, low, high)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("shape, kernel, strides", [((2, 3, 5, 7), [2, 2], [2, 2]),
                                                    ((3, 2, 11), [3], [2]),
                                                    ((1, 2, 4, 4, 3), [2, 2, 2], [1, 2, 1])])
def test_max_pool_indices_over_the_whole_tensor(shape, kernel, strides):
    """ONNX counts MaxPool's Indices over the whole tensor (torch-mlir gave each plane's own);
    1-D, 2-D and 3-D pools, batches and channels past one, against onnxruntime."""
    x = np.random.default_rng(12).standard_normal(shape).astype(np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=kernel, strides=strides)
    out = onnx.shape_inference.infer_shapes(model([node], [("x", TensorProto.FLOAT, shape)],
                                                  [("y", TensorProto.FLOAT, None),
                                                   ("i", TensorProto.INT64, None)]))
    (y, i), (want_y, want_i) = pyree_and_onnxruntime(out, x)
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(i, want_i)
    np.testing.assert_array_equal(x.reshape(-1)[i], y)


def test_max_pool_indices_of_a_run_time_batch_are_refused():
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2], strides=[2])
    proto = model([node], [("x", TensorProto.FLOAT, ("n", 2, 6))],
                  [("y", TensorProto.FLOAT, ("n", 2, 3)), ("i", TensorProto.INT64, ("n", 2, 3))])
    with pytest.raises(Exception, match="Indices over an input whose shape is known only at run"):
        compile_str(import_onnx(proto), CompileOptions(target_backends=["llvm-cpu"]))


@pytest.mark.parametrize("pads, axes", [([0, 0, 2, 3, 0, 0, 1, 4], None),
                                        ([9, 0, 0, 1], [2, 3]),
                                        ([1, 12], [-1])])
def test_pad_of_mode_wrap(pads, axes):
    """torch-mlir's import of a wrap Pad never returned; a Gather per axis, pads past the
    dim's length too, against ONNX's reference."""
    from onnx.reference import ReferenceEvaluator

    x = np.arange(70, dtype=np.float32).reshape(1, 2, 5, 7)
    inits = [onnx.numpy_helper.from_array(np.array(pads, np.int64), "p")]
    inputs = ["x", "p"]
    if axes is not None:
        inits.append(onnx.numpy_helper.from_array(np.array(axes, np.int64), "a"))
        inputs += ["", "a"]
    graph = helper.make_graph([helper.make_node("Pad", inputs, ["y"], mode="wrap")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=inits)
    proto = onnx.shape_inference.infer_shapes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]))
    (want,) = ReferenceEvaluator(proto).run(None, {"x": x})
    import pyree.runtime as rt
    got = rt.load_module(compile_str(import_onnx(proto), CompileOptions(
        target_backends=["llvm-cpu"])), device="local-task")["g"](x).to_host()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("trans_a,trans_b,elem,dtype", [(0, 0, TensorProto.FLOAT, np.float32),
                                                       (1, 1, TensorProto.DOUBLE, np.float64)])
def test_gemm_without_c_scales_by_alpha(trans_a, trans_b, elem, dtype):
    """Gemm with no C: torch-mlir dropped alpha (A @ B for 0.5 * A @ B)."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((7, 5) if trans_a else (5, 7)).astype(dtype)
    b = rng.standard_normal((3, 7) if trans_b else (7, 3)).astype(dtype)
    node = helper.make_node("Gemm", ["a", "b"], ["y"], alpha=-0.37, beta=2.0, transA=trans_a,
                            transB=trans_b)
    proto = model([node], [("a", elem, a.shape), ("b", elem, b.shape)], [("y", elem, (5, 3))],
                  opset=18)
    (got,), (want,) = pyree_and_onnxruntime(proto, a, b)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("size,kernel,stride,pads,opset", [
    (3, 2, 2, [0, 0], 19), (6, 3, 2, [1, 1], 19), (13, 4, 3, [2, 1], 10), (7, 3, 2, [0, 1], 11)])
def test_average_pool_ceil_windows_divide_by_what_they_cover(size, kernel, stride, pads, opset):
    """ceil_mode with count_include_pad: the last window, running past the input and its pads,
    divides by the input and pad elements it covers (torch-mlir: by the whole kernel). (Each
    last window starts inside the input: one starting in the padding is dropped by onnxruntime
    and PyTorch, kept by ONNX's shape formula.)"""
    x = np.random.default_rng(size).standard_normal((2, 3, size, size)).astype(np.float32)
    out = -(-(size + sum(pads) - kernel) // stride) + 1
    assert (out - 1) * stride - pads[0] < size
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[kernel, kernel],
                            strides=[stride, stride], pads=[pads[0], pads[0], pads[1], pads[1]],
                            ceil_mode=1, count_include_pad=1)
    proto = model([node], [("x", TensorProto.FLOAT, x.shape)],
                  [("y", TensorProto.FLOAT, (2, 3, out, out))], opset=opset)
    (got,), (want,) = pyree_and_onnxruntime(proto, x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", ["Softmax", "Hardmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [1, -2, 0])
def test_softmax_family_before_opset_13_flattens_at_axis(op, axis):
    """Before opset 13 these act on the input flattened to 2-D at ``axis`` (torch-mlir gave
    Hardmax the later per-axis meaning and refused Softmax); with a -inf row and ties."""
    x = np.random.default_rng(2).standard_normal((2, 3, 5)).astype(np.float32)
    x[1, :, :] = -np.inf
    x[0, 1, 2] = x[0, 2, 4] = 9.0  # a tie across the flattened row
    node = helper.make_node(op, ["x"], ["y"], axis=axis)
    proto = model([node], [("x", TensorProto.FLOAT, x.shape)],
                  [("y", TensorProto.FLOAT, x.shape)], opset=11)
    (got,), (want,) = pyree_and_onnxruntime(proto, x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, equal_nan=True)


IMAX, IMIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([IMAX], [IMIN], [1], [-1]), ([10], [-10], [1], [-1]), ([-1], [IMIN], [-1], [-2]),
    ([100, 1], [2, IMAX], [1, 0], [-3, 2]), ([6], [-100], [1], [-1]),
    ([4, IMAX], [IMIN, 0], [0, 1], [-1, -2])])
def test_slices_of_negative_steps_from_past_the_end(starts, ends, axes, steps):
    """tf2onnx's reverse of a whole axis (start INT64_MAX, step -1) and other starts or ends out
    of range with negative steps, clamped as ONNX defines them (torch-mlir read past the end)."""
    x = np.arange(35, dtype=np.float32).reshape(5, 7)
    inits = [onnx.numpy_helper.from_array(np.array(v, np.int64), name) for name, v in
             (("s", starts), ("e", ends), ("a", axes), ("st", steps))]
    picked = {a % 2: slice(b, e, st) for a, b, e, st in zip(axes, starts, ends, steps)}
    reference = x[tuple(picked.get(d, slice(None)) for d in range(2))]  # python clamps alike
    graph = helper.make_graph([helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                             reference.shape)],
                              initializer=inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    (got,), (want,) = pyree_and_onnxruntime(proto, x)
    np.testing.assert_array_equal(want, reference)
    np.testing.assert_array_equal(got, reference)


@pytest.mark.parametrize("opset,axis,sizes", [(11, -1, [3, 1]), (11, 0, [1, 2, 2]), (7, 1, [1, 1, 2])])
def test_split_by_its_attribute_before_opset_13(opset, axis, sizes):
    """The ``split`` attribute's unequal parts (torch-mlir split equally and refused)."""
    x = np.arange(5 * 4, dtype=np.float32).reshape(5, 4)
    parts = np.split(x, np.cumsum(sizes)[:-1], axis=axis)
    names = [f"y{k}" for k in range(len(sizes))]
    node = helper.make_node("Split", ["x"], names, axis=axis, split=sizes)
    proto = model([node], [("x", TensorProto.FLOAT, x.shape)],
                  [(name, TensorProto.FLOAT, part.shape) for name, part in zip(names, parts)],
                  opset=opset)
    got, want = pyree_and_onnxruntime(proto, x)
    for g, w, part in zip(got, want, parts, strict=True):
        np.testing.assert_array_equal(w, part)
        np.testing.assert_array_equal(g, part)


REDUCTIONS = ["ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
              "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare"]


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("axes", [None, []])
def test_reductions_over_no_axes_with_noop(op, axes):
    """``noop_with_empty_axes`` and no axes (none, or an empty constant): the elementwise part
    of the reduction, as onnxruntime and ONNX's reference compute it (|x| for ReduceL1, x for
    ReduceSum); torch-mlir's import aborted on some (SIGABRT). With NaN, +-inf, -0.0."""
    x = np.random.default_rng(4).standard_normal((3, 5)).astype(np.float32)
    x[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    inits = [] if axes is None else [onnx.numpy_helper.from_array(np.array(axes, np.int64), "a")]
    node = helper.make_node(op, ["x"] if axes is None else ["x", "a"], ["y"], keepdims=1,
                            noop_with_empty_axes=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                          x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)],
                              initializer=inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with np.errstate(invalid="ignore", divide="ignore"):
        (got,), (want,) = pyree_and_onnxruntime(proto, x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, equal_nan=True)
    assert np.array_equal(np.signbit(got[0, 3]), np.signbit(want[0, 3])) or op == "ReduceLogSum"


@pytest.mark.parametrize("repeats, elem, dtype", [([0, 2], TensorProto.FLOAT, np.float32),
                                                  ([3, 0], TensorProto.INT64, np.int64),
                                                  ([0, 0], TensorProto.BOOL, np.bool_)])
def test_tile_with_a_zero_repeat_is_empty(repeats, elem, dtype):
    """A repeat of 0 gives an empty result (torch-mlir's conversion divided by zero: SIGFPE)."""
    x = (np.arange(6).reshape(2, 3) % 2).astype(dtype)
    inits = [onnx.numpy_helper.from_array(np.array(repeats, np.int64), "r")]
    shape = (2 * repeats[0], 3 * repeats[1])
    graph = helper.make_graph([helper.make_node("Tile", ["x", "r"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", elem, x.shape)],
                              [helper.make_tensor_value_info("y", elem, shape)], initializer=inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    (got,), (want,) = pyree_and_onnxruntime(proto, x)
    assert got.shape == want.shape == shape and got.dtype == want.dtype
