"""Whole models from PyTorch, imported with pyree's torch importer, compiled, and run on the CPU
(local-task) and on Vulkan (Mesa's lavapipe in CI), each compared with PyTorch on one random
input: float64 PyTorch as the reference, fp32 relative error <= 1e-4, f16 <= 1e-2.

MobileNet v2 and ResNet-18 (torchvision, random weights) are marked slow; the deployment guides'
``predict`` command runs through the real CLI.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch  # CI installs it: a missing torch fails there, never skips

sys.path.insert(0, str(Path(__file__).resolve().parent))
import definitions  # noqa: E402

SMALL = ["mlp", "mlp_f16", "small_cnn", "gpt2_block"]
LARGE = ["mobilenet_v2", "resnet18"]


def reference(name: str, x: torch.Tensor) -> np.ndarray:
    """The model in float64 on the CPU: the answer every fp32/f16 build is compared with."""
    model = definitions.MODELS[name][0]().double()
    with torch.no_grad():
        return model(x.double()).numpy()


def relative_error(got, ref) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert np.all(np.isfinite(got)), "non-finite output"
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def limit(name: str) -> float:
    return 1e-2 if definitions.MODELS[name][2] == torch.float16 else 1e-4


def compile_model(name: str, backends: list[str], **options) -> bytes:
    """The model's module, compiled once in this process (the seeded factory gives the same
    weights every time: the causal-mask test runs the gpt2_block module the small-model test
    built)."""
    from compiled import compiled
    from pyree.compiler import CompileOptions, import_torch
    factory, _, _, function = definitions.MODELS[name]
    mlir = import_torch(factory(), definitions.example_input(name), function_name=function)
    return compiled(mlir, CompileOptions(target_backends=backends, **options))


def run(vmfb: bytes, name: str, device: str, x: torch.Tensor) -> np.ndarray:
    import pyree.runtime as rt
    module = rt.load_module(vmfb, device=device)
    return module[definitions.MODELS[name][3]](x.numpy()).to_host()


def check(name: str, backend: str, device: str, **options) -> None:
    vmfb = compile_model(name, [backend], **options)
    for seed in (1, 2):  # fresh data on the second call too: a recorded command buffer replays
        x = definitions.example_input(name, seed)
        err = relative_error(run(vmfb, name, device, x), reference(name, x))
        assert err <= limit(name), f"{name} on {device}: relative error {err:.2e}"


@pytest.mark.parametrize("name", SMALL)
def test_small_model_on_local_task(name):
    check(name, "llvm-cpu", "local-task")


@pytest.mark.vulkan
@pytest.mark.parametrize("name", SMALL)
def test_small_model_on_vulkan(name, vulkan_device):
    # lavapipe's triple: f64 (torch-mlir's layernorm computes its variance in f64), which the
    # default Vulkan 1.2 baseline target leaves out.
    check(name, "vulkan-spirv", vulkan_device, vulkan_target="cpu-swiftshader-unknown")


@pytest.mark.parametrize("device", ["local-task", pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_gpt2_block_at_odd_sizes(device, request):
    """Seq 7, width 36, 3 heads of 12: the q/k/v slices and head transposes become loads of the
    batch matmuls through their folded views (flow/views.py), at sizes nothing was tuned for; the
    block matches float64 PyTorch on two random inputs."""
    from pyree.compiler import CompileOptions, compile_str, import_torch
    model = definitions.gpt2_block(width=36, heads=3, seq=7)
    x = torch.randn(1, 7, 36, generator=torch.Generator().manual_seed(5))
    options = (CompileOptions(target_backends=["llvm-cpu"]) if device == "local-task" else
               CompileOptions(target_backends=["vulkan-spirv"],
                              vulkan_target="cpu-swiftshader-unknown"))
    vmfb = compile_str(import_torch(model, x, function_name="main"), options)
    import pyree.runtime as rt
    module = rt.load_module(vmfb, device=device if device == "local-task"
                            else request.getfixturevalue("vulkan_device"))
    for scale in (1.0, 30.0):
        xs = x * scale
        with torch.no_grad():
            want = model.double()(xs.double()).numpy()
        model.float()
        assert relative_error(module["main"](xs.numpy()).to_host(), want) <= 1e-4


def test_compile_torch_one_call():
    """nn.Module -> .vmfb in one call, as iree-turbine's aot.export + compile."""
    import pyree.runtime as rt
    from pyree.compiler import compile_torch
    model, x = definitions.mlp(), definitions.example_input("mlp", 3)
    vmfb = compile_torch(model, x, target_backends=["llvm-cpu"])
    got = rt.load_module(vmfb, device="local-task")["main"](x.numpy()).to_host()
    assert relative_error(got, reference("mlp", x)) <= 1e-4


def test_gpt2_causal_mask_keeps_minus_inf():
    """The causal mask is a -inf constant (dense<0xFF800000>): read as a number, the masked
    positions would leak into the softmax and the block would be silently wrong."""
    vmfb = compile_model("gpt2_block", ["llvm-cpu"])
    x = definitions.example_input("gpt2_block", 4)
    x[:, 64:] = torch.randn(x[:, 64:].shape) * 100  # future tokens: huge, must not be seen
    got = run(vmfb, "gpt2_block", "local-task", x)
    assert relative_error(got[:, :64], reference("gpt2_block", x)[:, :64]) <= 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("name", LARGE)
def test_large_model_on_local_task(name):
    check(name, "llvm-cpu", "local-task")


@pytest.mark.slow
def test_guide_predict_command(tmp_path):
    """IREE's deployment guides: a MobileNet v2 whose ``predict`` takes one NHWC image, run as
    ``pyree-run-module --device=local-task --module=... --function=predict
    --input="1x224x224x3xf32=0"``, then the same with a random image from a .npy file."""
    module = tmp_path / "mobilenet_local.vmfb"
    module.write_bytes(compile_model("mobilenet_v2_nhwc", ["llvm-cpu"]))
    tool = [sys.executable, "-m", "pyree.runtime.tools.run_module", "--device=local-task",
            f"--module={module}", "--function=predict"]
    proc = subprocess.run([*tool, "--input=1x224x224x3xf32=0"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["EXEC @predict", "result[0]: hal.buffer_view"]
    assert lines[2].startswith("1x1000xf32=")
    x = definitions.example_input("mobilenet_v2_nhwc", 5)
    np.save(tmp_path / "x.npy", x.numpy())
    proc = subprocess.run([*tool, f"--input=@{tmp_path / 'x.npy'}",
                           f"--output=@{tmp_path / 'y.npy'}"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = np.load(tmp_path / "y.npy")
    assert relative_error(got, reference("mobilenet_v2_nhwc", x)) <= 1e-4


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
def test_resnet18_from_onnx(tmp_path):
    """ResNet-18 exported to ONNX by torch, imported with pyree-import-onnx's Python API (the
    ONNX route carries its 47 MB of weights as inline hex), run on local-task: PyTorch's answer."""
    import pyree.runtime as rt
    from pyree.compiler import CompileOptions, compile_str, import_onnx
    path = tmp_path / "resnet18.onnx"
    torch.onnx.export(definitions.resnet18(), (definitions.example_input("resnet18"),), str(path),
                      dynamo=False, opset_version=17, input_names=["x"], output_names=["y"])
    vmfb = compile_str(import_onnx(path), CompileOptions(target_backends=["llvm-cpu"]))
    module = rt.load_module(vmfb, device="local-task")
    x = definitions.example_input("resnet18", 6)
    got = module[module.function_names[0]](x.numpy()).to_host()
    assert relative_error(got, reference("resnet18", x)) <= 1e-4
