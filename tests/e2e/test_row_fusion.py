"""Row-wise chains (softmax, log-softmax, layer norm, RMS norm) as PyTorch exports them: a small
elementwise producer read by two consumers (softmax's exp(x - max): by the sum and by the
division) is recomputed in both instead of materialized, and arithmetic that a reduction reads
once per element is fused into it (flow/regions.py). Fewer kernels, the same numbers: compared
with PyTorch in float64 at odd shapes with NaN, +-inf and -0 in the input, on local-task."""

from __future__ import annotations

import numpy as np
import pytest
import torch  # CI installs it: a missing torch fails there, never skips
from pyree.compiler import CompileOptions, compile_str, import_torch
from pyree.compiler.flow.passes import form_dispatch_regions
from pyree.compiler.flow.split_reduction import split_reductions
from pyree.compiler.input import import_mlir
from pyree.compiler.tensor_program import Generic


class Row(torch.nn.Module):
    def __init__(self, kind: str, width: int):
        super().__init__()
        self.kind = kind
        self.norm = torch.nn.LayerNorm(width)
        self.weight = torch.nn.Parameter(torch.rand(width) + 0.5)

    def forward(self, x):
        if self.kind == "softmax":
            return torch.softmax(x, -1)
        if self.kind == "log_softmax":
            return torch.log_softmax(x, -1)
        if self.kind == "layernorm":
            return self.norm(x)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight  # rmsnorm


# kind -> dispatch regions after fusion: one row kernel each (flow/row_fusion.py; before row
# kernels 3, 3, 4, 2, and before copying producers into their users 4, 4, 5, 3)
KERNELS = {"softmax": 1, "log_softmax": 1, "layernorm": 1, "rmsnorm": 1}


def kernels(mlir: str) -> int:
    (function,) = import_mlir(mlir).functions
    return sum(isinstance(op, Generic) for op in split_reductions(form_dispatch_regions(function)).ops)


@pytest.mark.parametrize("shape", [(3, 7, 129), (37, 1001)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kind", sorted(KERNELS))
def test_row_chain_fuses_and_matches_pytorch(kind, shape):
    import pyree.runtime as rt
    torch.manual_seed(0)
    model = Row(kind, shape[-1]).eval()
    x = torch.randn(shape)
    mlir = import_torch(model, x, function_name="main")
    assert kernels(mlir) == KERNELS[kind]
    module = rt.load_module(compile_str(mlir, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    rows = x.reshape(-1, shape[-1])
    rows[1, 3], rows[2, 0], rows[2, 5], rows[0, 2] = float("nan"), float("inf"), -float("inf"), -0.0
    with torch.no_grad():
        expected = model.double()(x.double()).numpy()
    got = module["main"](x.numpy()).to_host()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(expected)],
                                  expected[~finite & ~np.isnan(expected)])
    np.testing.assert_allclose(got[finite], expected[finite], rtol=2e-5, atol=2e-6)
