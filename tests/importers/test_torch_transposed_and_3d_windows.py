"""Transposed convolutions (decoders of UNets, GANs, segmentation heads) and 3-D convolutions and
pools (video models), imported from PyTorch and run on local-task and Vulkan (lavapipe in CI),
against PyTorch in float64 at odd sizes, strides, paddings and groups. torch-mlir writes a
transposed convolution as a zero-dilated copy of the input (``tensor.insert_slice`` with strides)
convolved with the flipped filter, and a 3-D convolution as ``linalg.conv_3d_ncdhw_fcdhw``."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tooling
from compiled import compiled as compiled_once
from pyree.compiler import CompileOptions, compile_str, import_torch

torch = tooling.require_module("torch")
tooling.require_module("torch_mlir")
F = torch.nn.functional

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")

BACKENDS = [
    pytest.param(("llvm-cpu", "local-task"), id="llvm-cpu"),
    pytest.param(("vulkan-spirv", "vulkan"), id="vulkan", marks=pytest.mark.vulkan),
]


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


CASES = {  # name -> (function, input shapes)
    "conv_transpose2d_s2_p1": (lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1),
                               ((2, 5, 7, 9), (5, 3, 4, 4))),
    "conv_transpose2d_s23_outpad_dil": (
        lambda x, w: F.conv_transpose2d(x, w, stride=(2, 3), padding=(1, 0), output_padding=(1, 2),
                                        dilation=(1, 2)),
        ((1, 4, 6, 5), (4, 3, 3, 3))),
    "conv_transpose2d_groups_bias": (
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, groups=2),
        ((2, 6, 5, 5), (6, 2, 3, 3), (4,))),
    "conv_transpose1d_s3": (lambda x, w: F.conv_transpose1d(x, w, stride=3, padding=2),
                            ((2, 3, 11), (3, 5, 5))),
    "conv_transpose3d_s2": (lambda x, w: F.conv_transpose3d(x, w, stride=2, padding=1),
                            ((1, 3, 3, 4, 5), (3, 2, 3, 3, 3))),
    "conv_transpose2d_s2_k3_outpad": (
        lambda x, w: F.conv_transpose2d(x, w, stride=2, output_padding=1), ((1, 3, 6, 7), (3, 4, 3, 3))),
    "conv_transpose2d_s4_k8_p2": (lambda x, w: F.conv_transpose2d(x, w, stride=4, padding=2),
                                  ((1, 2, 5, 3), (2, 3, 8, 8))),
    "conv_transpose2d_groups_s32": (
        lambda x, w: F.conv_transpose2d(x, w, stride=(3, 2), padding=(2, 1), groups=3),
        ((1, 6, 4, 5), (6, 1, 5, 4))),
    "conv_transpose1d_s3_k2": (lambda x, w: F.conv_transpose1d(x, w, stride=3), ((2, 3, 7), (3, 2, 2))),
    "conv_transpose1d_s2_k1": (lambda x, w: F.conv_transpose1d(x, w, stride=2), ((1, 4, 9), (4, 3, 1))),
    "conv3d_stride_pad": (lambda x, w: F.conv3d(x, w, stride=(1, 2, 2), padding=1),
                          ((2, 3, 5, 9, 8), (4, 3, 3, 3, 3))),
    "conv3d_dilated_bias": (lambda x, w, b: F.conv3d(x, w, b, dilation=(2, 1, 2)),
                            ((1, 2, 7, 6, 9), (5, 2, 2, 3, 2), (5,))),
    "max_pool3d": (lambda x: F.max_pool3d(x, 3, stride=2, padding=1), ((2, 3, 7, 9, 6),)),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, (2, 3, 2)), ((1, 4, 6, 9, 7),)),
}


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    return request.param


def inputs(shapes, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g) for s in shapes]


def compiled(backend, name):
    target, device = backend
    import pyree.runtime as rt
    fn, shapes = CASES[name]
    options = CompileOptions(target_backends=[target], vulkan_target=os.environ.get(
        "PYREE_VULKAN_TARGET", "cpu-lavapipe-linux"))
    mlir = import_torch(Fn(fn), *inputs(shapes, 0))
    # compiled_once: the float64 and the special-values tests run the same module
    return rt.load_module(compiled_once(mlir, options), device=device)["main"]


@pytest.mark.parametrize("name", CASES)
def test_matches_pytorch_in_float64(backend, name):
    fn, shapes = CASES[name]
    xs = inputs(shapes, 1)
    got = np.asarray(compiled(backend, name)(*[x.numpy() for x in xs]).to_host(), np.float64)
    with torch.no_grad():
        want = fn(*[x.double() for x in xs]).numpy()
    assert got.shape == want.shape
    assert np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want)


@pytest.mark.parametrize("name", ["conv_transpose2d_s2_p1", "conv_transpose2d_groups_s32",
                                  "conv_transpose1d_s3_k2", "conv3d_stride_pad", "max_pool3d"])
def test_special_values_land_where_pytorch_puts_them(backend, name):
    """NaN, +-inf and -0 in the image. (Not in the filter: a padded convolution multiplies its
    zero padding by every weight, so an infinite weight makes NaN at the border where
    PyTorch's transposed kernel, which skips those taps, has none. The sub-pixel form no longer
    multiplies the dilation's zeros, but the padding of each phase remains.)"""
    fn, shapes = CASES[name]
    operand = 0
    xs = inputs(shapes, 2)
    flat = xs[operand].view(-1)
    flat[[3, 10, 17]] = torch.tensor([float("nan"), float("inf"), -float("inf")])
    flat[[5, 9]] = -0.0
    got = np.asarray(compiled(backend, name)(*[x.numpy() for x in xs]).to_host())
    with torch.no_grad():
        want = fn(*xs).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True)


SUB_PIXEL = {"conv_transpose2d_s2_p1", "conv_transpose2d_groups_bias", "conv_transpose1d_s3",
             "conv_transpose3d_s2", "conv_transpose2d_s2_k3_outpad", "conv_transpose2d_s4_k8_p2",
             "conv_transpose2d_groups_s32"}


@pytest.mark.parametrize("name", [n for n in CASES if n.startswith("conv_transpose")])
def test_transposed_convolutions_run_in_sub_pixel_form(name, monkeypatch):
    """Every stride phase a convolution of its own over the undilated input (input/sub_pixel.py),
    except where a phase has no tap (kernel smaller than the stride) or the filter is dilated:
    those keep the convolution over the dilated image (still matching PyTorch above)."""
    from pyree.compiler.input import sub_pixel

    split, outcomes = sub_pixel.split, []
    monkeypatch.setattr(sub_pixel, "split", lambda *a: outcomes.append(split(*a)) or outcomes[-1])
    fn, shapes = CASES[name]
    compile_str(import_torch(Fn(fn), *inputs(shapes, 0)), CompileOptions(target_backends=["llvm-cpu"]))
    assert [r is not None for r in outcomes] == [name in SUB_PIXEL]


def test_a_decoder_with_constant_filters_matches_pytorch():
    """nn.ConvTranspose2d layers: filters are constants, so their flips and tap slices fold at
    compile time, and the bias becomes each phase's starting value."""
    import pyree.runtime as rt

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.ConvTranspose2d(8, 6, 4, stride=2, padding=1), torch.nn.ReLU(),
                                torch.nn.ConvTranspose2d(6, 3, 3, stride=2, padding=1, output_padding=1))
    x = torch.randn(2, 8, 5, 7)
    module = rt.load_module(compile_str(import_torch(model, x), CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    got = np.asarray(module["main"](x.numpy()).to_host(), np.float64)
    with torch.no_grad():
        want = model.double()(x.double()).numpy()
    assert got.shape == want.shape == (2, 3, 20, 28)
    assert np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want)
