"""The Triton Python-backend recipe (docs/examples/triton/model.py + config.pbtxt) run without a
Triton server: its config file parsed into the JSON Triton hands ``initialize``, its module
compiled from tests/data/mlp.mlir, and ``pb_utils`` replaced by fake_pb_utils, whose tensors
cross only through DLPack."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import fake_pb_utils
import numpy as np
import pyree.compiler as pc
import pytest

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "docs" / "examples" / "triton"
MLP = ROOT / "tests" / "data" / "mlp.mlir"


def parse_pbtxt(text: str) -> dict:
    """Protobuf text format (the subset model configs use) as Triton's JSON model_config:
    repeated fields as lists, int64 dims as strings, parameters as a name -> value map."""
    tokens = re.findall(r'"[^"]*"|[{}\[\]:,]|[^\s{}\[\]:,"]+', re.sub(r"#.*", "", text))
    position = 0

    def value():
        nonlocal position
        token = tokens[position]
        position += 1
        if token == "{":
            return message("}")
        if token == "[":
            items = []
            while tokens[position] != "]":
                items.append(value())
                position += tokens[position] == ","
            position += 1
            return items
        if token.startswith('"'):
            return token[1:-1]
        return int(token) if re.fullmatch(r"-?\d+", token) else token

    def message(end):
        nonlocal position
        fields: dict = {}
        while position < len(tokens) and tokens[position] != end:
            name = tokens[position]
            position += 1 + (tokens[position + 1] == ":")
            v = value()
            if name in fields:
                fields[name] = (fields[name] if isinstance(fields[name], list) else [fields[name]]) + [v]
            else:
                fields[name] = v
            position += position < len(tokens) and tokens[position] == ","
        position += 1
        return fields

    config = message(None)
    for entry in config["input"] + config["output"]:
        entry["dims"] = [str(d) for d in entry["dims"]]
    parameters = config.get("parameters", [])
    config["parameters"] = {p["key"]: p["value"] for p in
                            (parameters if isinstance(parameters, list) else [parameters])}
    return config


@pytest.fixture
def pb_utils(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", fake_pb_utils)
    return fake_pb_utils


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    """models/pyree_mlp/ as the recipe lays it out, the module compiled for the CPU."""
    model = tmp_path_factory.mktemp("models") / "pyree_mlp"
    (model / "1").mkdir(parents=True)
    (model / "1" / "mlp.vmfb").write_bytes(pc.compile_str(MLP.read_text(), pc.CompileOptions(
        target_backends=["llvm-cpu"], llvmcpu_target_cpu="generic")))
    return model


def load_recipe(pb_utils, repository, config: dict):
    spec = importlib.util.spec_from_file_location("pyree_triton_model", RECIPE / "model.py")
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    model = recipe.TritonPythonModel()
    # A KIND_CPU instance: what Triton passes when instance_group says so.
    model.initialize({"model_config": json.dumps(config), "model_instance_kind": "CPU",
                      "model_instance_device_id": "0", "model_repository": str(repository),
                      "model_version": "1", "model_name": "pyree_mlp"})
    return model


def mlp_reference(x: np.ndarray) -> np.ndarray:
    from pyree.compiler.input import import_mlir
    from pyree.compiler.tensor_program import Constant

    (function,) = import_mlir(MLP.read_text(), str(MLP)).functions
    w = {op.result.name: op.data.astype(np.float64) for op in function.ops
         if isinstance(op, Constant) and op.data is not None}
    with np.errstate(invalid="ignore", over="ignore"):
        return np.maximum(x @ w["w1"] + w["b1"], 0) @ w["w2"] + w["b2"]


def test_recipe_runs_requests_through_dlpack(pb_utils, repository):
    model = load_recipe(pb_utils, repository, parse_pbtxt((RECIPE / "config.pbtxt").read_text()))
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((37, 53)).astype(np.float32) for _ in range(3)]
    xs[1][4, 7], xs[1][9, 0], xs[2][30, 52] = np.nan, np.inf, -np.inf
    inputs = [pb_utils.Tensor("x", x) for x in xs]
    bad = pb_utils.Tensor("x", np.zeros((36, 53), np.float32))
    requests = [pb_utils.InferenceRequest([t]) for t in inputs[:2] + [bad] + inputs[2:]]
    responses = model.execute(requests)
    assert len(responses) == 4
    assert responses[2].has_error()
    assert responses[2].error().message() == "function 'mlp' argument 0: expected 37x53xf32, got 36x53xf32"
    for x, tensor, response in zip(xs, inputs, responses[:2] + responses[3:]):
        assert not response.has_error() and tensor.dlpack_exports >= 1  # read through DLPack
        logits = pb_utils.get_output_tensor_by_name(response, "logits").as_numpy()
        assert logits.dtype == np.float32 and logits.shape == (37, 11)
        np.testing.assert_allclose(logits, mlp_reference(x.astype(np.float64)), rtol=1e-4, atol=1e-5)
    assert np.isnan(responses[1].output_tensors()[0].as_numpy()[4]).all()


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["input"][0].update(dims=["36", "53"]),
     "input 'x' is 36x53xf32, but the function's is 37x53xf32"),
    (lambda c: c["output"][0].update(data_type="TYPE_FP16"),
     "output 'logits' is 37x11xf16, but the function's is 37x11xf32"),
    (lambda c: c.update(max_batch_size=8), "max_batch_size is 8, but pyree functions have static "
                                           "shapes: set it to 0 and give the whole shape in dims"),
    (lambda c: c["input"].append({"name": "y", "data_type": "TYPE_FP32", "dims": ["1"]}),
     "2 inputs, but the function has 1"),
])
def test_recipe_refuses_a_config_that_is_not_the_function(pb_utils, repository, edit, message):
    config = parse_pbtxt((RECIPE / "config.pbtxt").read_text())
    edit(config)
    with pytest.raises(ValueError, match=r"config.pbtxt does not match pyree function 'mlp' "
                                         r"\(37x53xf32 -> 37x11xf32\): .*" + re.escape(message)):
        load_recipe(pb_utils, repository, config)


def test_config_parses_as_triton_reads_it():
    config = parse_pbtxt((RECIPE / "config.pbtxt").read_text())
    assert config["backend"] == "python" and config["max_batch_size"] == 0
    assert config["input"] == [{"name": "x", "data_type": "TYPE_FP32", "dims": ["37", "53"]}]
    assert config["output"] == [{"name": "logits", "data_type": "TYPE_FP32", "dims": ["37", "11"]}]
    assert config["instance_group"] == [{"kind": "KIND_GPU", "count": 1}]
    assert config["parameters"]["module"] == {"string_value": "mlp.vmfb"}
    assert config["parameters"]["function"] == {"string_value": "mlp"}
