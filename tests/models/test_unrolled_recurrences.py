"""Recurrent layers as torch.export writes them, unrolled over time: every step's kernels read that
step's rows of a larger tensor, and read through a view of those rows (flow/slabs.py) the steps
share their kernels, so the number of distinct kernels does not grow with the sequence length
(where a step's rows start at a multiple of 64 bytes, as they do for the widths models use; odd
widths keep a kernel per step). Checked on local-task against PyTorch in float64 at odd lengths
and widths."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tooling
from pyree.compiler import CompileOptions, compile_str, import_torch

torch = tooling.require_module("torch")
tooling.require_module("torch_mlir")

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")


class Recurrence(torch.nn.Module):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return self.layer(x)[0]


LAYERS = {  # name -> (layer, input width)
    "lstm_2_layers": (lambda: torch.nn.LSTM(12, 16, num_layers=2, batch_first=True), 12),
    "gru_bidirectional": (lambda: torch.nn.GRU(12, 16, batch_first=True, bidirectional=True), 12),
    "lstm_odd_widths": (lambda: torch.nn.LSTM(11, 13, batch_first=True), 11),
}


BACKENDS = [  # the views of a step's rows sit at offsets Vulkan's descriptors must accept
    pytest.param(("llvm-cpu", "local-task"), id="llvm-cpu"),
    pytest.param(("vulkan-spirv", "vulkan"), id="vulkan", marks=pytest.mark.vulkan),
]


def compiled(name: str, steps: int, backend):
    import pyree.runtime as rt

    torch.manual_seed(0)
    make, width = LAYERS[name]
    model = Recurrence(make().eval())
    target, device = backend
    options = CompileOptions(target_backends=[target], vulkan_target=os.environ.get(
        "PYREE_VULKAN_TARGET", "cpu-lavapipe-linux"))
    vmfb = compile_str(import_torch(model, torch.randn(3, steps, width)), options)
    return model, vmfb, rt.load_module(vmfb, device=device)["main"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", LAYERS)
def test_steps_share_kernels_and_match_pytorch(name, backend):
    import pyree.runtime as rt

    kernels = {}
    for steps in (5, 9):
        model, vmfb, fn = compiled(name, steps, backend)
        kernels[steps] = len(rt.read_module(vmfb).tree.kernels)
        x = torch.randn(3, steps, LAYERS[name][1])
        x[0, 1, 2] = float("inf")  # saturates its gates: no NaN unless PyTorch makes one
        got = np.asarray(fn(x.numpy()).to_host(), np.float64)
        with torch.no_grad():
            want = model.double()(x.double()).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)
    assert (kernels[9] == kernels[5]) == (name != "lstm_odd_widths"), kernels
