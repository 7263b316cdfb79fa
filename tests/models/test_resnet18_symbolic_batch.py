"""ResNet with a symbolic batch (issue 29 item 4): exported to ONNX with ``dynamic_axes``,
imported with ``pyree-import-onnx`` (its module), compiled once for llvm-cpu, and run on
local-task at batches 1, 2, 3 and 5 against onnxruntime on the same file.

ResNet-18 itself (torchvision, seeded random weights and batchnorm statistics, 64x64 images:
every layer and weight is ResNet-18's, the image size only scales the work; ~1 min on two
cores) is marked slow, so that ``-m "not slow"`` leaves it out of a quick run; README's test
command and CI run it. The quick one is a ResNet of one BasicBlock per stage (torchvision's
ResNet class: stem, max pool, downsampling blocks, average pool, linear) on 32x32 images, which
has every kind of layer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch  # CI installs it: a missing torch fails there, never skips

sys.path.insert(0, str(Path(__file__).resolve().parent))
import definitions  # noqa: E402


def resnet_ish() -> torch.nn.Module:
    torch.manual_seed(0)
    models = definitions._torchvision().models
    net = models.resnet.ResNet(models.resnet.BasicBlock, [1, 1, 1, 1], num_classes=10)
    return definitions._init_batchnorm(net.eval())


@pytest.mark.parametrize("name, image", [
    ("resnet_ish", 32),
    pytest.param("resnet18", 64, marks=pytest.mark.slow),
])
def test_one_module_serves_every_batch(name, image, tmp_path):
    import onnxruntime as ort
    import pyree.runtime as rt
    from pyree.compiler import CompileOptions, compile_file

    model = resnet_ish() if name == "resnet_ish" else definitions.resnet18()
    onnx_path, mlir_path = tmp_path / f"{name}.onnx", tmp_path / f"{name}.mlir"
    torch.onnx.export(model, torch.randn(1, 3, image, image), onnx_path, input_names=["x"],
                      output_names=["y"], opset_version=17, dynamo=False,
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    proc = subprocess.run([sys.executable, "-m", "pyree.compiler.tools.import_onnx", str(onnx_path),
                           "-o", str(mlir_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert f"tensor<?x3x{image}x{image}xf32>" in mlir_path.read_text()
    module = rt.load_module(compile_file(str(mlir_path), CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    for batch in (1, 2, 3, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 3, image, image)).astype(np.float32)
        got = module["main_graph"](x).to_host()
        (want,) = session.run(None, {"x": x})
        assert got.shape == want.shape == (batch, 10 if name == "resnet_ish" else 1000)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        assert (got.argmax(1) == want.argmax(1)).all()
