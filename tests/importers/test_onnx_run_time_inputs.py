"""import_onnx on Reduce*/CumSum axes, Split sizes, CenterCropPad shapes and align_corners Resize
scales given as graph inputs
(importers/onnx_rewrites/run_time_inputs.py): each set of values the declared shapes allow is
computed right (numpy, ONNX's reference), any other is refused by the call (CheckError), and a
model whose shapes do not narrow them down is refused by name at import."""

from __future__ import annotations

import numpy as np
import pytest
import tooling
from pyree.compiler import CompileError, compile_str, import_onnx
from pyree.runtime import CheckError, load_module

onnx = tooling.require_module("onnx")
tooling.require_module("torch_mlir")
TensorProto, helper = onnx.TensorProto, onnx.helper
ReferenceEvaluator = tooling.require_module("onnx.reference").ReferenceEvaluator
rng = np.random.default_rng(29)


def _model(node, inputs, output, opset: int = 18):
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*output)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _compiled(model):
    return load_module(compile_str(import_onnx(model)))["g"]


def test_reduction_with_axes_the_output_shape_pins():
    """(3, 4, 5) -> (3, 5): only axis 1; given as 1 or -2, anything else refused."""
    node = helper.make_node("ReduceLogSumExp", ["x", "axes"], ["y"], keepdims=0)
    f = _compiled(_model(node, [("x", TensorProto.FLOAT, [3, 4, 5]),
                                ("axes", TensorProto.INT64, [1])], ("y", TensorProto.FLOAT, [3, 5])))
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    want = np.log(np.exp(x.astype(np.float64)).sum(axis=1))
    for axes in ([1], [-2]):
        np.testing.assert_allclose(f(x, np.array(axes)).to_host(), want, rtol=1e-5)
    for axes in ([0], [2], [3], [-3]):
        with pytest.raises(CheckError, match="ReduceLogSumExp node 0: the axes given at run time "
                                             r"are not \[1\]"):
            f(x, np.array(axes))


def test_reduction_with_axes_the_shapes_leave_open():
    """(3, 4, 4) -> (3, 4) is axis 1 or 2: both compiled, the one given picked; (2, 2, 2) kept
    with two axes of three is any pair."""
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    f = _compiled(_model(node, [("x", TensorProto.FLOAT, [3, 4, 4]),
                                ("axes", TensorProto.INT64, [1])], ("y", TensorProto.FLOAT, [3, 4])))
    x = rng.standard_normal((3, 4, 4)).astype(np.float32)
    for axes, axis in (([1], 1), ([2], 2), ([-1], 2), ([-2], 1)):
        np.testing.assert_allclose(f(x, np.array(axes)).to_host(), x.sum(axis=axis), rtol=1e-5)
    with pytest.raises(CheckError, match=r"not \[1\] or \[2\]"):
        f(x, np.array([0]))
    node = helper.make_node("ReduceMax", ["x", "axes"], ["y"], keepdims=1)
    f = _compiled(_model(node, [("x", TensorProto.FLOAT, [2, 2, 2]),
                                ("axes", TensorProto.INT64, [2])],
                         ("y", TensorProto.FLOAT, [1, 1, 2])))
    x = rng.standard_normal((2, 2, 2)).astype(np.float32)
    np.testing.assert_array_equal(f(x, np.array([1, 0])).to_host(),
                                  x.max(axis=(0, 1), keepdims=True))
    with pytest.raises(CheckError):
        f(x, np.array([0, 2]))
    with pytest.raises(CheckError):
        f(x, np.array([0, 0]))


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 1)])
def test_cumsum_with_a_run_time_axis(exclusive, reverse):
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    model = _model(node, [("x", TensorProto.FLOAT, [3, 5]), ("axis", TensorProto.INT32, [])],
                   ("y", TensorProto.FLOAT, [3, 5]), opset=14)
    f = _compiled(model)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    reference = ReferenceEvaluator(model)
    for axis in (0, 1, -1, -2):
        want = reference.run(None, {"x": x, "axis": np.array(axis, np.int32)})[0]
        np.testing.assert_allclose(f(x, np.array(axis, np.int32)).to_host(), want, rtol=1e-5,
                                   atol=1e-6)
    with pytest.raises(CheckError, match=r"CumSum node 0: the axes given at run time are not "
                                         r"\[0\] or \[1\]"):
        f(x, np.array(2, np.int32))


def test_axes_the_shapes_do_not_narrow_are_refused_by_name():
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)
    model = _model(node, [("x", TensorProto.FLOAT, [3, 4]), ("axes", TensorProto.INT64, [1])],
                   ("y", TensorProto.FLOAT, ["n", "m"]))
    with pytest.raises(CompileError, match="ReduceSum node 0: its axes are a run-time input, "
                                           "and the model's shapes leave 0 choices"):
        import_onnx(model)


def test_align_corners_resize_with_run_time_scales():
    """ONNX divides by the unrounded length: whole lengths computed, others refused."""
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear",
                            coordinate_transformation_mode="align_corners")
    model = _model(node, [("x", TensorProto.FLOAT, [1, 1, 3, 4]),
                          ("scales", TensorProto.FLOAT, [4])],
                   ("y", TensorProto.FLOAT, [1, 1, 6, 2]), opset=19)
    f = _compiled(model)
    x = rng.standard_normal((1, 1, 3, 4)).astype(np.float32)
    scales = np.array([1, 1, 2, 0.5], np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x, "scales": scales})[0]
    np.testing.assert_allclose(f(x, scales).to_host(), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(CheckError, match=r"Resize node 0: align_corners with scales that do "
                                         r"not give the output shape \[1, 1, 6, 2\]"):
        f(x, np.array([1, 1, 2.1, 0.6], np.float32))


def test_split_sizes_and_center_crop_shape_given_at_run_time():
    """Their values are the declared output lengths: those computed, any other refused."""
    node = helper.make_node("Split", ["x", "split"], ["a", "b"], axis=1)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 7]),
                      helper.make_tensor_value_info("split", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 4])])
    f = _compiled(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    x = rng.standard_normal((2, 7)).astype(np.float32)
    a, b = f(x, np.array([3, 4]))
    np.testing.assert_array_equal(a.to_host(), x[:, :3])
    np.testing.assert_array_equal(b.to_host(), x[:, 3:])
    with pytest.raises(CheckError, match=r"Split node 0: input 'split' given at run time is "
                                         r"not \[3, 4\]"):
        f(x, np.array([4, 3]))
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"], axes=[-3, -2])
    model = _model(node, [("x", TensorProto.FLOAT, [9, 4, 3]), ("shape", TensorProto.INT64, [2])],
                   ("y", TensorProto.FLOAT, [6, 7, 3]))
    f = _compiled(model)
    x = rng.standard_normal((9, 4, 3)).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x, "shape": np.array([6, 7])})[0]
    np.testing.assert_array_equal(f(x, np.array([6, 7])).to_host(), want)
    with pytest.raises(CheckError, match=r"input 'shape' given at run time is not \[6, 7\]"):
        f(x, np.array([6, 6]))
