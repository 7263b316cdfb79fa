"""A small f16 CNN (convolutions, batchnorm, depthwise convolution, pooling, a global average over
a 20x20 map and a softmax over 1000 classes) on local-task, as accurate as PyTorch's f16 on the
same weights and input: both against the float64 model, pyree's relative error at most 1.5x
PyTorch's. pyree computes f16 arithmetic and accumulates f16 reductions in f32, rounding once
(flow/narrow_floats.py); compiled as the imported linalg says (an f16 accumulator for the mean,
every f16 op rounded), its error was several times PyTorch's. bench/models/f16_accuracy.py
measures the same on torchvision's EfficientNet-B0, RegNet-Y 400MF, MobileNet v2 and ResNet-18."""

from __future__ import annotations

import sys
from pathlib import Path

import torch  # CI installs it: a missing torch fails there, never skips

sys.path.insert(0, str(Path(__file__).resolve().parent))
import definitions  # noqa: E402
from test_models import relative_error  # noqa: E402

LIMIT = 1.5


class Classifier(torch.nn.Module):
    """SmallCNN's features, a 1000-class head and a softmax."""

    def __init__(self):
        super().__init__()
        self.cnn = definitions.small_cnn()
        self.head = torch.nn.Linear(12, 1000)

    def forward(self, x):
        y = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(self.cnn.features(x), 1), 1)
        return torch.softmax(self.head(y) * 4, -1)


def test_small_f16_cnn_is_as_accurate_as_pytorch_f16():
    import pyree.runtime as rt
    from pyree.compiler import CompileOptions, compile_str, import_torch
    torch.manual_seed(0)
    model = Classifier().eval()
    x = torch.randn((1, 3, 160, 160), generator=torch.Generator().manual_seed(1)).half()
    with torch.no_grad():
        reference = model.double()(x.double()).numpy()
        theirs = relative_error(model.half()(x).numpy(), reference)
    mlir = import_torch(model, x)
    module = rt.load_module(compile_str(mlir, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    ours = relative_error(module["main"](x.numpy()).to_host(), reference)
    assert ours <= LIMIT * theirs, f"f16 relative error {ours:.2e}, PyTorch's {theirs:.2e}"
