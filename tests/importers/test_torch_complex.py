"""Complex values inside a PyTorch model (torch-mlir's linalg bodies of the ``complex``
dialect): LLaMA's rotary embedding as Meta's reference code writes it (``view_as_complex``, a
``torch.polar`` buffer, ``view_as_real``) and as a product with ``torch.complex(cos, sin)``,
against PyTorch on local-task and lavapipe, special values included; a complex op pyree does
not compute is refused by name, at its line."""

from __future__ import annotations

import warnings

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, CompileOptions, compile_str
from tooling import require_module

torch = require_module("torch")
require_module("torch_mlir")


def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    return torch.polar(torch.ones(end, dim // 2), torch.outer(torch.arange(end).float(), freqs))


class MetaRotary(torch.nn.Module):
    """llama/model.py's apply_rotary_emb over a complex64 buffer."""

    def __init__(self, dim: int, end: int):
        super().__init__()
        self.register_buffer("freqs_cis", precompute_freqs_cis(dim, end))

    def forward(self, xq):
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        freqs = self.freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
        return torch.view_as_real(xq_ * freqs).flatten(3).type_as(xq)


class ProductRotary(torch.nn.Module):
    def forward(self, x, cos, sin):
        xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * torch.complex(cos, sin)).flatten(-2)


def special(shape) -> torch.Tensor:
    x = torch.randn(shape)
    flat = x.view(-1)
    flat[::7], flat[3::11], flat[5::13], flat[2::17] = float("nan"), float("inf"), -0.0, -3e30
    return x


def run(module, inputs, device="local-task"):
    from pyree.compiler import import_torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = import_torch(module, *inputs)
    options = CompileOptions(target_backends=["llvm-cpu" if device == "local-task" else "vulkan-spirv"],
                             vulkan_target="cpu-lavapipe-linux")
    out = rt.load_module(compile_str(text, options), device=device)["main"](*[t.numpy() for t in inputs])
    with torch.no_grad():
        want = module(*inputs).numpy()
    return np.asarray(out.to_host()), want


DEVICES = ["local-task", pytest.param("vulkan", marks=pytest.mark.vulkan)]


@pytest.mark.parametrize("device", DEVICES)
def test_metas_rotary_matches_pytorch(device):
    got, want = run(MetaRotary(64, 37), [special((2, 37, 3, 64))], device)
    np.testing.assert_array_equal(got, want)  # one product per part: PyTorch's, bit for bit


@pytest.mark.parametrize("device", DEVICES)
def test_a_product_with_torch_complex_matches_pytorch(device):
    got, want = run(ProductRotary(), [special((1, 5, 33, 18)), torch.randn(33, 9),
                                      torch.randn(33, 9)], device)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


def test_a_complex_op_pyree_does_not_compute_is_refused_by_name():
    text = """
    #map = affine_map<(d0) -> (d0)>
    func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
      %e = tensor.empty() : tensor<4xcomplex<f32>>
      %z = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
          ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xcomplex<f32>>) {
      ^bb0(%x: f32, %y: f32, %o: complex<f32>):
        %c = complex.create %x, %y : complex<f32>
        %d = complex.div %c, %c : complex<f32>
        linalg.yield %d : complex<f32>
      } -> tensor<4xcomplex<f32>>
      %r = tensor.empty() : tensor<4xf32>
      %re = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
          ins(%z : tensor<4xcomplex<f32>>) outs(%r : tensor<4xf32>) {
      ^bb0(%w: complex<f32>, %o: f32):
        %p = complex.re %w : complex<f32>
        linalg.yield %p : f32
      } -> tensor<4xf32>
      return %re : tensor<4xf32>
    }"""
    with pytest.raises(CompileError, match=r"<string>:9:\d+: .*unsupported op 'complex.div'"):
        compile_str(text)
