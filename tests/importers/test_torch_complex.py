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


def test_the_complex_body_ops_match_numpy():
    """Every complex op a linalg body may hold (MLIR written by hand: torch-mlir itself lowers
    only create, re, im and mul), against numpy's complex64: abs scaled (3e30 + 4e30i is 5e30,
    not inf; inf beside NaN is inf), exp, conj, neg, add, sub, mul."""
    a = np.array([3e30, 0.0, -0.0, np.inf, np.nan, 1.5, -2.25, 0.5, 3.0], np.float32)
    b = np.array([4e30, -0.0, 2.0, np.nan, 1.0, -0.5, 0.75, np.inf, -1e-20], np.float32)
    text = """
    #map = affine_map<(d0) -> (d0)>
    func.func @main(%a: tensor<9xf32>, %b: tensor<9xf32>) -> (tensor<9xf32>, tensor<9xf32>, tensor<9xf32>) {
      %e = tensor.empty() : tensor<9xf32>
      %r:3 = linalg.generic {indexing_maps = [#map, #map, #map, #map, #map],
                             iterator_types = ["parallel"]}
          ins(%a, %b : tensor<9xf32>, tensor<9xf32>) outs(%e, %e, %e : tensor<9xf32>, tensor<9xf32>, tensor<9xf32>) {
      ^bb0(%x: f32, %y: f32, %o: f32, %p: f32, %q: f32):
        %z = complex.create %x, %y : complex<f32>
        %m = complex.abs %z : complex<f32>
        %c = complex.conj %z : complex<f32>
        %n = complex.neg %z : complex<f32>
        %s = complex.add %c, %n : complex<f32>
        %t = complex.sub %s, %z : complex<f32>
        %u = complex.mul %t, %z : complex<f32>
        %w = complex.exp %z : complex<f32>
        %re = complex.re %u : complex<f32>
        %im = complex.im %w : complex<f32>
        linalg.yield %m, %re, %im : f32, f32, f32
      } -> (tensor<9xf32>, tensor<9xf32>, tensor<9xf32>)
      return %r#0, %r#1, %r#2 : tensor<9xf32>, tensor<9xf32>, tensor<9xf32>
    }"""
    got = [np.asarray(r.to_host()) for r in rt.load_module(compile_str(text),
                                                           device="local-task")["main"](a, b)]
    z = np.empty(a.shape, np.complex128)
    z.real, z.imag = a, b  # (a + 1j * b would make inf + NaN j all NaN)
    with np.errstate(all="ignore"):
        t = np.conj(z) + -z - z
        u = np.real(t) * np.real(z) - np.imag(t) * np.imag(z)  # the product's real part, as written
        want = [np.abs(z), u, np.exp(np.real(z)) * np.sin(np.imag(z))]
    finite = np.isfinite(a) & np.isfinite(b) & (np.abs(a) < 1e10)
    np.testing.assert_allclose(got[0], want[0].astype(np.float32), rtol=1e-6)  # every lane
    np.testing.assert_allclose(got[1][finite], want[1][finite].astype(np.float32), rtol=1e-5)
    np.testing.assert_allclose(got[2][finite], want[2][finite].astype(np.float32), rtol=1e-5,
                               atol=1e-30)


def test_a_select_of_complex_values_is_refused_by_name():
    text = """
    #map = affine_map<(d0) -> (d0)>
    func.func @main(%a: tensor<4xf32>, %k: i1) -> tensor<4xf32> {
      %e = tensor.empty() : tensor<4xf32>
      %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
          ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
      ^bb0(%x: f32, %o: f32):
        %c = complex.create %x, %x : complex<f32>
        %d = complex.create %x, %o : complex<f32>
        %s = arith.select %k, %c, %d : complex<f32>
        %p = complex.re %s : complex<f32>
        linalg.yield %p : f32
      } -> tensor<4xf32>
      return %r : tensor<4xf32>
    }"""
    with pytest.raises(CompileError, match=r"<string>:10:\d+: .*'arith.select' of a complex value"):
        compile_str(text)


def test_an_empty_complex_tensor_reads_as_zeros():
    """A complex tensor.empty read by a body, as pyree reads any empty: zeros (it had reached
    the kernel as an unmaterialised empty)."""
    text = """
    #map = affine_map<(d0) -> (d0)>
    func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
      %e = tensor.empty() : tensor<4xcomplex<f32>>
      %r = tensor.empty() : tensor<4xf32>
      %o = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
          ins(%a, %e : tensor<4xf32>, tensor<4xcomplex<f32>>) outs(%r : tensor<4xf32>) {
      ^bb0(%x: f32, %z: complex<f32>, %o: f32):
        %p = complex.im %z : complex<f32>
        %s = arith.addf %x, %p : f32
        linalg.yield %s : f32
      } -> tensor<4xf32>
      return %o : tensor<4xf32>
    }"""
    a = np.random.default_rng(0).standard_normal(4).astype(np.float32)
    got = rt.load_module(compile_str(text), device="local-task")["main"](a)
    np.testing.assert_array_equal(np.asarray(got.to_host()), a)
