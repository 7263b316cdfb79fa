"""--iree-input-type=tosa: torch-mlir's TOSA output for PyTorch models, lowered in-process by
MLIR's TOSA passes, compiled, run on local-task and compared with PyTorch; TOSA errors name the
original file:line:col."""

from __future__ import annotations

import builtins
import subprocess
import sys

import numpy as np
import pytest
import tooling
from pyree.compiler import CompileError, CompileOptions, compile_str
from pyree.compiler.input.input_types import detect

torch = tooling.require_module("torch")
fx = tooling.require_module("torch_mlir.fx")
nn = torch.nn

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(37, 64), nn.Linear(64, 10)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


class CNN(nn.Module):
    """conv + relu + maxpool + linear + softmax."""

    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(3, 8, 3, padding=1), nn.Linear(8 * 6 * 5, 6)

    def forward(self, x):
        y = nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        return torch.softmax(self.fc(y.flatten(1)), -1)


MODELS = {"mlp": (MLP, (5, 37)), "cnn": (CNN, (2, 3, 12, 10))}


def tosa_text(name: str) -> tuple[nn.Module, str]:
    factory, shape = MODELS[name]
    torch.manual_seed(0)
    model = factory().eval()
    return model, str(fx.export_and_import(model, torch.randn(shape), output_type="tosa"))


def run(vmfb: bytes, x: np.ndarray) -> np.ndarray:
    import pyree.runtime as rt
    return rt.load_module(vmfb, device="local-task")["main"](x).to_host()


@pytest.mark.parametrize("input_type", ["auto", "tosa"])
@pytest.mark.parametrize("name", MODELS)
def test_torch_mlir_tosa_matches_pytorch(name, input_type):
    model, text = tosa_text(name)
    assert "tosa.conv2d" in text or name == "mlp"
    vmfb = compile_str(text, CompileOptions(target_backends=["llvm-cpu"], input_type=input_type))
    x = torch.randn(MODELS[name][1], generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model(x).numpy()
    got = run(vmfb, x.numpy())
    assert np.linalg.norm(got - ref) <= 1e-5 * np.linalg.norm(ref)


def test_detection():
    _, text = tosa_text("mlp")
    assert detect(text) == "tosa"
    assert detect('%0 = "stablehlo.add"(%a, %b)') == "stablehlo"
    assert detect("  %0 = chlo.erf %a : tensor<2xf32>") == "stablehlo"
    assert detect("%0 = arith.addf %a, %a : f32  // tosa.add in a comment") == "none"


def test_none_refuses_tosa_ops_by_name(tmp_path):
    with pytest.raises(CompileError, match=r"m\.mlir:2:\d+: error: unsupported op 'tosa\.abs'"):
        compile_str(ABS, CompileOptions(input_type="none"), source_name="m.mlir")


ABS = """func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = tosa.abs %a : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


@pytest.mark.parametrize("input_type, hint", [
    ("torch", "import_torch"), ("onnx", "pyree-import-onnx"),
    ("tflite", "known input types: auto, none, stablehlo, tosa, stablehlo_xla")])
def test_other_input_types_are_refused_by_name(input_type, hint):
    with pytest.raises(CompileError, match=hint):
        compile_str(ABS, CompileOptions(input_type=input_type))


def test_an_op_without_lowering_names_its_line(tmp_path):
    source = tmp_path / "custom.mlir"
    source.write_text("""func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %b = tosa.abs %a : (tensor<4xf32>) -> tensor<4xf32>
  %r = tosa.custom %b {domain_name = "x", implementation_attrs = "", operator_name = "mine"} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
""")
    result = subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile", str(source),
                             "-o", str(tmp_path / "m.vmfb"), "--iree-input-type=tosa"],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert f"{source}:3:8: error:" in result.stderr and "tosa.custom" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("text, message", [
    ("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %r = tosa.abs %a : (tensor<4xf32>) -> tensor<4xf32\n}\n",
     r"bad\.mlir:2:\d+: error: .*expected"),
    ("func.func @f(%a: tensor<4xf32>, %b: tensor<3xf32>) -> tensor<4xf32> {\n"
     "  %r = tosa.add %a, %b : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>\n"
     "  return %r : tensor<4xf32>\n}\n", r"bad\.mlir:2:8: error: 'tosa\.add' op"),
])
def test_mlir_parse_and_verify_errors_are_compile_errors(text, message):
    with pytest.raises(CompileError, match=message):
        compile_str(text, CompileOptions(input_type="tosa"), source_name="bad.mlir")


def test_without_torch_mlir_the_extra_is_named(monkeypatch):
    real_import = builtins.__import__

    def no_torch_mlir(name, *args, **kwargs):
        if name.split(".")[0] == "torch_mlir":
            raise ImportError(f"No module named '{name}'", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch_mlir)
    monkeypatch.setattr("importlib.import_module", lambda name: no_torch_mlir(name))
    with pytest.raises(CompileError, match=r"pip install pyree-base-compiler\[tosa\]"):
        compile_str(ABS, CompileOptions(input_type="tosa"))


def test_later_errors_name_the_tosa_line(tmp_path):
    """A kernel of the converted program is named by the TOSA op it came from."""
    source = tmp_path / "f64.mlir"
    source.write_text("""func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  // f64 in the middle: the baseline Vulkan target has no shaderFloat64
  %b = tosa.cast %a : (tensor<4xf32>) -> tensor<4xf64>
  %c = tosa.cast %b : (tensor<4xf64>) -> tensor<4xf32>
  return %c : tensor<4xf32>
}
""")
    with pytest.raises(CompileError, match=rf"\({source}:[34]:8\) uses f64.*"
                                           "--iree-input-demote-f64-to-f32"):
        compile_str(source.read_text(), CompileOptions(target_backends=["vulkan-spirv"],
                                                       demote_f64_to_f32=False),
                    source_name=str(source))
    compile_str(source.read_text(), CompileOptions(target_backends=["vulkan-spirv"]))
