"""ONNX Loop with a condition that can turn false and Scan with reversed directions or other
axes, which torch-mlir alone converted to wrong answers (the condition dropped, the directions
ignored), imported through pyree's rewrite (importers/onnx_rewrites/control_flow.py) and
checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
import tooling
from pyree.compiler import CompileOptions, compile_str, import_onnx
from pyree.compiler.errors import CompileError

onnx = tooling.require_module("onnx")
tooling.require_module("torch_mlir")
onnxruntime = tooling.require_module("onnxruntime")
TensorProto, helper = onnx.TensorProto, onnx.helper
N, V = helper.make_node, helper.make_tensor_value_info
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def model(nodes, inputs, outputs, initializers=(), opset: int = 18):
    """A one-graph model; ``inputs`` and ``outputs`` are (name, element type, shape)."""
    graph = helper.make_graph(nodes, "g", [V(*i) for i in inputs], [V(*o) for o in outputs],
                              initializer=[onnx.numpy_helper.from_array(np.asarray(v), name)
                                           for name, v in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def pyree_and_onnxruntime(proto, *args):
    """The model's results from pyree (llvm-cpu, local-task) and from onnxruntime."""
    import pyree.runtime as rt

    vmfb = compile_str(import_onnx(proto), CompileOptions(target_backends=["llvm-cpu"]))
    got = rt.load_module(vmfb, device="local-task")["g"](*args)
    got = [r.to_host() for r in (got if isinstance(got, tuple) else (got,))]
    session = onnxruntime.InferenceSession(proto.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    want = session.run(None, {i.name: a for i, a in zip(proto.graph.input, args)})
    return got, want


def _sum_body(shape):
    """v += i and n += 1 each trip; continue while sum(v) < lim."""
    return helper.make_graph([
        N("Cast", ["i"], ["fi"], to=F), N("Add", ["v_in", "fi"], ["v_out"]),
        N("Add", ["n_in", "one"], ["n_out"]),
        N("ReduceSum", ["v_out"], ["s"], keepdims=0), N("Less", ["s", "lim"], ["cond_out"])],
        "body", [V("i", I64, []), V("cond_in", B, []), V("v_in", F, shape), V("n_in", I64, [])],
        [V("cond_out", B, []), V("v_out", F, shape), V("n_out", I64, [])])


def _run_sum_loop(x, trips, lim, cond=True, cond_input=False, trips_input=False):
    inits = [("lim", np.array(lim, np.float32)), ("one", np.array(1, np.int64)),
             ("n0", np.array(0, np.int64))]
    inputs, args = [("x", F, x.shape)], [x]
    for name, value, is_input, elem in (("M", np.array(trips, np.int64), trips_input, I64),
                                        ("c", np.array(cond), cond_input, B)):
        if is_input:
            inputs.append((name, elem, []))
            args.append(value)
        else:
            inits.append((name, value))
    loop = N("Loop", ["M", "c", "x", "n0"], ["vf", "nf"], body=_sum_body(list(x.shape)))
    proto = model([loop], inputs, [("vf", F, x.shape), ("nf", I64, [])], inits)
    got, want = pyree_and_onnxruntime(proto, *args)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    assert int(got[1]) == int(want[1])
    return int(want[1])


@pytest.mark.parametrize("lim,trips_run", [(100.0, None), (500.0, None), (1e9, 13), (-1e9, 1)])
def test_loop_stops_where_its_condition_turns_false(lim, trips_run):
    """A condition the body computes: stops early (twice), never (all 13 trips), after the
    first trip (the condition false at trip 0's end)."""
    x = np.random.default_rng(1).standard_normal((2, 3, 5)).astype(np.float32)
    n = _run_sum_loop(x, 13, lim)
    if trips_run is not None:
        assert n == trips_run
    else:
        assert 1 < n < 13


def test_loop_trip_count_as_an_input():
    x = np.arange(7, dtype=np.float32).reshape(7, 1) / 10
    assert 1 < _run_sum_loop(x, 50, 30.0, trips_input=True) < 50


@pytest.mark.parametrize("cond_input", [False, True])
def test_loop_initial_condition_false_runs_no_trip(cond_input):
    x = np.random.default_rng(2).standard_normal((3, 1, 2)).astype(np.float32)
    assert _run_sum_loop(x, 5, 1e9, cond=False, cond_input=cond_input) == 0


@pytest.mark.parametrize("cond", [False, True])
def test_loop_condition_passed_through(cond):
    """The body passes its condition through an Identity: a for loop when it starts true, no
    trip when it starts false (a graph input)."""
    x = np.random.default_rng(3).standard_normal((1, 3)).astype(np.float32)
    body = helper.make_graph([N("Add", ["v_in", "v_in"], ["v_out"]),
                              N("Identity", ["cond_in"], ["cond_out"])], "b",
                             [V("i", I64, []), V("cond_in", B, []), V("v_in", F, [1, 3])],
                             [V("cond_out", B, []), V("v_out", F, [1, 3])])
    proto = model([N("Loop", ["M", "c", "x"], ["y"], body=body)],
                  [("x", F, [1, 3]), ("c", B, [])], [("y", F, [1, 3])],
                  [("M", np.array(3, np.int64))])
    (got,), (want,) = pyree_and_onnxruntime(proto, x, np.array(cond))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got, x * (8 if cond else 1), rtol=1e-6)


def test_loop_without_trip_count_is_refused():
    """torch-mlir converts no Loop without M (a while loop): a CompileError, not an answer."""
    loop = N("Loop", ["", "c", "x", "n0"], ["vf", "nf"], body=_sum_body([1, 3]))
    proto = model([loop], [("x", F, [1, 3])], [("vf", F, [1, 3]), ("nf", I64, [])],
                  [("lim", np.array(5.0, np.float32)), ("one", np.array(1, np.int64)),
                   ("n0", np.array(0, np.int64)), ("c", np.array(True))])
    with pytest.raises(CompileError):
        compile_str(import_onnx(proto), CompileOptions(target_backends=["llvm-cpu"]))


@pytest.mark.parametrize("trips", [10, 2**62])
def test_loop_refusals(trips):
    """A condition that can turn false with scan outputs (they cannot be cut where ONNX
    stops), or with a trip count too large to run every trip of: refused by name."""
    body = helper.make_graph([N("Add", ["v_in", "v_in"], ["v_out"]),
                              N("ReduceSum", ["v_out"], ["s"], keepdims=0),
                              N("Less", ["s", "lim"], ["cond_out"]),
                              N("Identity", ["v_out"], ["scan"])], "b",
                             [V("i", I64, []), V("cond_in", B, []), V("v_in", F, [1, 3])],
                             [V("cond_out", B, []), V("v_out", F, [1, 3]), V("scan", F, [1, 3])])
    outputs = [("y", F, [1, 3]), ("ys", F, [trips, 1, 3])]
    if trips > 10:  # no scan output: only the trip count refused
        del body.output[-1]
        outputs.pop()
    proto = model([N("Loop", ["M", "c", "x"], [o[0] for o in outputs], body=body)],
                  [("x", F, [1, 3])], outputs,
                  [("M", np.array(trips, np.int64)), ("c", np.array(True)),
                   ("lim", np.array(5.0, np.float32))])
    with pytest.raises(CompileError, match="Loop"):
        import_onnx(proto)


def _scan(x_shapes, out_shape, **attributes):
    """A Scan of s += sum of the inputs' elements, y = s * the first input's."""
    m = len(x_shapes)
    elem = [list(s) for s in attributes.pop("elems")]
    adds = [N("Add", ["s_in", "x0"], ["t0"])]
    for j in range(1, m):
        adds.append(N("Add", [f"t{j - 1}", f"x{j}"], [f"t{j}"]))
    nodes = [*adds, N("Identity", [f"t{m - 1}"], ["s_out"]), N("Mul", ["s_out", "x0"], ["y"])]
    body = helper.make_graph(nodes, "b", [V("s_in", F, elem[0])] +
                             [V(f"x{j}", F, elem[j]) for j in range(m)],
                             [V("s_out", F, elem[0]), V("y", F, elem[0])])
    proto = model([N("Scan", ["init", *[f"in{j}" for j in range(m)]], ["final", "ys"],
                     num_scan_inputs=m, body=body, **attributes)],
                  [("init", F, elem[0])] + [(f"in{j}", F, s) for j, s in enumerate(x_shapes)],
                  [("final", F, elem[0]), ("ys", F, out_shape)])
    rng = np.random.default_rng(len(x_shapes))
    args = [rng.standard_normal(elem[0]).astype(np.float32)] + \
           [rng.standard_normal(s).astype(np.float32) for s in x_shapes]
    got, want = pyree_and_onnxruntime(proto, *args)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("directions", [dict(scan_input_directions=[1]),
                                        dict(scan_output_directions=[1]),
                                        dict(scan_input_directions=[1], scan_output_directions=[1])])
def test_scan_reversed(directions):
    _scan([(5, 3, 7)], (5, 3, 7), elems=[(3, 7)], **directions)


def test_scan_two_inputs_of_different_directions():
    _scan([(6, 1, 3), (6, 1, 3)], (6, 1, 3), elems=[(1, 3), (1, 3)],
          scan_input_directions=[0, 1], scan_output_directions=[1])


def test_scan_other_axes():
    """A scan input along axis 1 (negative: -2) reversed, the other along 0; the output
    stacked along axis 2 and reversed."""
    _scan([(2, 5, 3), (5, 2, 3)], (2, 3, 5), elems=[(2, 3), (2, 3)],
          scan_input_axes=[-2, 0], scan_input_directions=[1, 0],
          scan_output_axes=[2], scan_output_directions=[1])
