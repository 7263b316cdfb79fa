"""pyree-import-onnx / pyree.compiler.import_onnx: ONNX files (exported here with
torch.onnx.export) -> MLIR -> .vmfb, through the CLIs and the Python API, compared with
onnxruntime; and the errors a user meets (bad file, unsupported op, missing extra)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tooling
from pyree.compiler import CompileError, CompileOptions, compile_str, import_onnx

# The [onnx] extra, onnxruntime (the reference) and torch (to export the models): a test skips
# without them on a developer's machine and fails in CI.
onnx = tooling.require_module("onnx")
tooling.require_module("torch_mlir")
onnxruntime = tooling.require_module("onnxruntime")
torch = tooling.require_module("torch")
TensorProto, helper = onnx.TensorProto, onnx.helper
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
import definitions  # noqa: E402

# torch.export / torch.onnx.export (TorchScript) deprecation notices, not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")


class ConvNet(torch.nn.Module):
    """Conv, ReLU, flatten, Gemm: weights large enough to be inline hex constants."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return torch.softmax(self.fc(torch.relu(self.conv(x)).flatten(1)), dim=-1)


MODELS = {"mlp": (definitions.mlp, (5, 37)), "convnet": (ConvNet, (2, 3, 16, 16))}


def export(name: str, folder: Path) -> tuple[Path, np.ndarray]:
    factory, shape = MODELS[name]
    path = folder / f"{name}.onnx"
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    torch.onnx.export(factory().eval(), (x,), str(path), dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"])
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    return path, x


def onnxruntime_result(path: Path, x: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def relative_error(got, ref) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    assert got.shape == ref.shape and np.all(np.isfinite(got))
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def tool(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("name", MODELS)
def test_clis_end_to_end(name, tmp_path):
    """pyree-import-onnx -> pyree-compile -> pyree-run-module, as a user types them."""
    path, x = export(name, tmp_path)
    mlir, vmfb, x_npy, y_npy = (tmp_path / f for f in ("m.mlir", "m.vmfb", "x.npy", "y.npy"))
    proc = tool("pyree.compiler.tools.import_onnx", str(path), "-o", str(mlir))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "func.func @main_graph(" in mlir.read_text()  # named after the graph, as in IREE
    proc = tool("pyree.compiler.tools.compile", str(mlir), "-o", str(vmfb),
                "--iree-hal-target-backends=llvm-cpu")
    assert proc.returncode == 0, proc.stderr
    np.save(x_npy, x)
    proc = tool("pyree.runtime.tools.run_module", "--device=local-task", f"--module={vmfb}",
                "--function=main_graph", f"--input=@{x_npy}", f"--output=@{y_npy}")
    assert proc.returncode == 0, proc.stderr
    assert relative_error(np.load(y_npy), onnxruntime_result(path, x)) <= 1e-4


@pytest.mark.parametrize("name", MODELS)
def test_python_api(name, tmp_path):
    import pyree.runtime as rt
    path, x = export(name, tmp_path)
    # a file (a str or a Path), a ModelProto and its serialized bytes
    for model in (path, str(path), onnx.load(path), path.read_bytes()):
        vmfb = compile_str(import_onnx(model), CompileOptions(target_backends=["llvm-cpu"]))
        got = rt.load_module(vmfb, device="local-task")["main_graph"](x).to_host()
        assert relative_error(got, onnxruntime_result(path, x)) <= 1e-4


def test_external_data_and_data_dir(tmp_path):
    """Weights in a separate file (models over 2 GB must), found next to the model or in
    --data-dir, as with iree-import-onnx."""
    path, x = export("mlp", tmp_path)
    weights, elsewhere = tmp_path / "weights", tmp_path / "elsewhere"
    weights.mkdir(), elsewhere.mkdir()
    onnx.save(onnx.load(path), weights / "m.onnx", save_as_external_data=True,
              all_tensors_to_one_file=True, location="m.bin", size_threshold=0)
    (elsewhere / "m.onnx").write_bytes((weights / "m.onnx").read_bytes())
    assert "func.func @main_graph(" in import_onnx(weights / "m.onnx")
    mlir = tmp_path / "m.mlir"
    proc = tool("pyree.compiler.tools.import_onnx", str(elsewhere / "m.onnx"), "-o", str(mlir),
                f"--data-dir={weights}")
    assert proc.returncode == 0, proc.stderr
    vmfb = compile_str(mlir.read_text(), CompileOptions(target_backends=["llvm-cpu"]))
    import pyree.runtime as rt
    got = rt.load_module(vmfb, device="local-task")["main_graph"](x).to_host()
    assert relative_error(got, onnxruntime_result(path, x)) <= 1e-4
    missing = tool("pyree.compiler.tools.import_onnx", str(elsewhere / "m.onnx"))
    _assert_one_paragraph(missing, "is not a valid ONNX model")


def test_opset_upgrade(tmp_path):
    path, _ = export("mlp", tmp_path)
    assert "func.func @main_graph(" in import_onnx(path, opset_version=18, data_prop=False)


def _model(op: str, domain: str = "") -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], domain=domain)], "g", [x], [y])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets)


def _assert_one_paragraph(proc: subprocess.CompletedProcess, fragment: str) -> None:
    assert proc.returncode == 1 and proc.stdout == ""
    assert fragment in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("error: ")


def test_cli_errors(tmp_path):
    _assert_one_paragraph(tool("pyree.compiler.tools.import_onnx", str(tmp_path / "no.onnx")),
                          "cannot read ONNX file")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a protobuf at all")
    _assert_one_paragraph(tool("pyree.compiler.tools.import_onnx", str(garbage)),
                          "is not a valid ONNX model")
    custom = tmp_path / "custom.onnx"
    onnx.save(_model("Frobnicate", "com.example"), custom)
    _assert_one_paragraph(tool("pyree.compiler.tools.import_onnx", str(custom), "-o",
                               str(tmp_path / "out.mlir")),
                          "the ONNX model uses ops that torch-mlir cannot convert: Frobnicate")
    assert not (tmp_path / "out.mlir").exists()
    usage = tool("pyree.compiler.tools.import_onnx")
    assert usage.returncode == 2 and "INPUT" in usage.stderr


def test_bytes_that_are_not_a_model_and_other_objects_are_refused_by_name():
    with pytest.raises(CompileError, match="the bytes given are not an ONNX model"):
        import_onnx(b"\x08\x07garbage that protobuf cannot read\xff\xff")
    with pytest.raises(CompileError, match="takes a path, an onnx.ModelProto or its bytes, not int"):
        import_onnx(42)


def test_invalid_model_proto():
    with pytest.raises(CompileError, match="invalid ONNX model: .*Compress"):
        import_onnx(_model("Compress"))  # Compress needs two inputs


def test_missing_extra_names_the_pip_command(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(CompileError, match=r"pip install pyree-base-compiler\[onnx\]"):
        import_onnx(tmp_path / "m.onnx")


def _split_by_input_sizes() -> onnx.ModelProto:
    """A Split whose sizes are a graph input: torch-mlir gives its results unknown ranks and
    segfaults converting it."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="first"),
             helper.make_node("Split", ["r", "sizes"], ["a", "b"], axis=1, name="split_me"),
             helper.make_node("Concat", ["b", "a"], ["y"], axis=1, name="last")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8]),
                     helper.make_tensor_value_info("sizes", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


CRASH = "the ONNX importer crashed on node 2 of 3 (Split 'split_me') in torch-mlir's " \
        "torch-onnx-to-torch-backend-pipeline (signal 11, SIGSEGV)"


def test_a_crash_inside_torch_mlir_is_an_error_naming_the_node(tmp_path):
    """torch-mlir runs in a worker process: its segfault ends the worker, and the caller (this
    test process, or pyree-import-onnx) says which node it died on and lives on."""
    with pytest.raises(CompileError) as error:
        import_onnx(_split_by_input_sizes())
    assert error.value.message.startswith(CRASH), error.value.message
    path = tmp_path / "split.onnx"
    onnx.save(_split_by_input_sizes(), path)
    _assert_one_paragraph(tool("pyree.compiler.tools.import_onnx", str(path)), CRASH)
    assert "func.func @main_graph(" in import_onnx(export("mlp", tmp_path)[0])  # still working


def test_element_types_pyree_lacks_are_refused_by_name(tmp_path):
    """A Cast to UINT4 aborted the whole process inside torch-mlir (LLVM ERROR); 4-bit,
    2-bit and 8-bit float types are refused by name before torch-mlir sees them."""
    cast = _model("Cast")
    cast.graph.node[0].name = "to_nibbles"
    cast.graph.node[0].attribute.append(helper.make_attribute("to", TensorProto.UINT4))
    cast.graph.output[0].type.tensor_type.elem_type = TensorProto.UINT4
    with pytest.raises(CompileError, match=r"the ONNX model uses UINT4 \(node 1 \(Cast "
                                           r"'to_nibbles'\), value 'y'\), an element type pyree "
                                           r"has no counterpart for; pyree's are FLOAT, UINT8"):
        import_onnx(cast)
    like = helper.make_model(helper.make_graph(
        [helper.make_node("CastLike", ["x", "like"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [5]),
         helper.make_tensor_value_info("like", TensorProto.FLOAT8E4M3FN, [0])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [5])]),
        opset_imports=[helper.make_opsetid("", 21)])
    path = tmp_path / "castlike.onnx"
    onnx.save(like, path)
    _assert_one_paragraph(tool("pyree.compiler.tools.import_onnx", str(path)),
                          "the ONNX model uses FLOAT8E4M3FN (graph input 'like')")
