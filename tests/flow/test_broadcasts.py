"""Arithmetic a broadcast repeats, computed once per value on CPU targets (flow/broadcasts.py):
the kernels each target forms, and their numbers against numpy and PyTorch."""

from __future__ import annotations

import re

import numpy as np
import pyree.runtime as rt
import pytest
import torch
import torch.nn.functional as F
from pyree.compiler import compile_str, import_torch

C, H, W = 11, 61, 67  # channels the broadcast repeats, and the points it repeats (enough work)


T3, T2 = f"tensor<{C}x{H}x{W}xf32>", f"tensor<{H}x{W}xf32>"
M3, M2 = "affine_map<(c, h, w) -> (c, h, w)>", "affine_map<(c, h, w) -> (h, w)>"
PAR = '["parallel", "parallel", "parallel"]'
# %b: x [H, W] copied across C channels, as torch-mlir broadcasts an operand before computing
BROADCAST_X = f"""  %e = tensor.empty() : {T3}
  %b = linalg.generic {{indexing_maps = [{M2}, {M3}], iterator_types = {PAR}}}
      ins(%x : {T2}) outs(%e : {T3}) {{
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }} -> {T3}"""


def program(body: str) -> str:
    """x [H, W] broadcast across C channels, ``body`` (MLIR ops on %a: f32 -> %r) at every
    channel, times the image: the arithmetic reads nothing that depends on the channel."""
    t3, m3 = T3, M3
    return f"""func.func @main(%x: {T2}, %image: {t3}) -> {t3} {{
{BROADCAST_X}
  %y = linalg.generic {{indexing_maps = [{m3}, {m3}], iterator_types = {PAR}}}
      ins(%b : {t3}) outs(%e : {t3}) {{
  ^bb0(%a: f32, %o: f32):
{body}
    linalg.yield %r : f32
  }} -> {t3}
  %z = linalg.generic {{indexing_maps = [{m3}, {m3}, {m3}], iterator_types = {PAR}}}
      ins(%y, %image : {t3}, {t3}) outs(%e : {t3}) {{
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.mulf %p, %q : f32
    linalg.yield %s : f32
  }} -> {t3}
  return %z : {t3}
}}"""


COSTLY = """    %s1 = math.sin %a : f32
    %s2 = math.exp %s1 : f32
    %s3 = arith.divf %s2, %a : f32
    %r = math.tanh %s3 : f32"""
CHEAP = """    %r = arith.addf %a, %a : f32"""


def costly_reference(x):
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        return np.tanh(np.exp(np.sin(x64)) / x64)


def kernel_loops(text: str, target: str) -> list[str]:
    sources = compile_str(text, target_backends=[target],
                          extra_args=["--compile-to=executable-sources"]).decode()
    return re.findall(r"^kernel @\S+ loops\(([^)]*)\)", sources, re.M)


def test_cpu_computes_costly_broadcast_arithmetic_once_per_value():
    """On llvm-cpu the costly chain runs over [H, W] in a kernel of its own and the product
    reads it at every channel; a GPU target keeps one kernel (recomputing costs less than a
    launch there), and a cheap chain stays one kernel everywhere."""
    text = program(COSTLY)
    assert kernel_loops(text, "llvm-cpu") == [f"{H}, {W}", f"{C}, {H}, {W}"]
    assert kernel_loops(text, "vulkan-spirv") == [f"{C}, {H}, {W}"]
    assert kernel_loops(program(CHEAP), "llvm-cpu") == [f"{C}, {H}, {W}"]


def test_sibling_broadcast_kernels_become_one():
    """Two costly chains of the same broadcast value, each kept for the product that reads it at
    every channel: one kernel over [H, W] computes both (of two dtypes)."""
    t3, m3, par = T3, M3, PAR
    text = f"""func.func @main(%x: {T2}, %image: {t3}) -> {t3} {{
{BROADCAST_X}
  %y = linalg.generic {{indexing_maps = [{m3}, {m3}], iterator_types = {par}}}
      ins(%b : {t3}) outs(%e : {t3}) {{
  ^bb0(%a: f32, %o: f32):
{COSTLY}
    linalg.yield %r : f32
  }} -> {t3}
  %ei = tensor.empty() : tensor<{C}x{H}x{W}xi32>
  %n = linalg.generic {{indexing_maps = [{m3}, {m3}], iterator_types = {par}}}
      ins(%b : {t3}) outs(%ei : tensor<{C}x{H}x{W}xi32>) {{
  ^bb0(%a: f32, %o: i32):
    %s1 = math.cos %a : f32
    %s2 = math.exp %s1 : f32
    %s3 = arith.mulf %s2, %a : f32
    %s4 = math.floor %s3 : f32
    %i = arith.fptosi %s4 : f32 to i32
    linalg.yield %i : i32
  }} -> tensor<{C}x{H}x{W}xi32>
  %z = linalg.generic {{indexing_maps = [{m3}, {m3}, {m3}, {m3}], iterator_types = {par}}}
      ins(%y, %n, %image : {t3}, tensor<{C}x{H}x{W}xi32>, {t3}) outs(%e : {t3}) {{
  ^bb0(%p: f32, %k: i32, %q: f32, %o: f32):
    %f = arith.sitofp %k : i32 to f32
    %s = arith.mulf %p, %q : f32
    %t = arith.addf %s, %f : f32
    linalg.yield %t : f32
  }} -> {t3}
  return %z : {t3}
}}"""
    assert kernel_loops(text, "llvm-cpu") == [f"{H}, {W}", f"{C}, {H}, {W}"]
    rng = np.random.default_rng(6)
    x = rng.standard_normal((H, W)).astype(np.float32)
    image = rng.standard_normal((C, H, W)).astype(np.float32)
    module = rt.load_module(compile_str(text, target_backends=["llvm-cpu"]), device="local-task")
    got = module.main(x, image).to_host()
    x64 = x.astype(np.float64)
    v = np.exp(np.cos(x64)) * x64
    want = costly_reference(x)[None] * image + np.floor(v)[None]
    clear = np.broadcast_to(np.abs(v - np.round(v)) > 1e-4, want.shape)  # floor's ties aside
    assert clear.mean() > 0.99
    np.testing.assert_allclose(got[clear], want[clear], rtol=2e-6, atol=2e-5)


def test_narrowed_broadcast_matches_numpy_with_special_values():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((H, W)).astype(np.float32)
    x[0, :5] = [0.0, -0.0, np.nan, np.inf, -np.inf]
    image = rng.standard_normal((C, H, W)).astype(np.float32)
    image[2, 0, 0] = np.inf
    module = rt.load_module(compile_str(program(COSTLY), target_backends=["llvm-cpu"]),
                            device="local-task")
    got = module.main(x, image).to_host()
    with np.errstate(all="ignore"):
        want = (costly_reference(x)[None] * image.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    assert np.array_equal(np.isnan(got), np.isnan(want))


def test_a_broadcast_value_returned_stays_whole():
    """The broadcast value is also a result: the op that writes it keeps its loops."""
    t3 = T3
    text = f"""func.func @main(%x: {T2}) -> {t3} {{
  %e = tensor.empty() : {t3}
  %y = linalg.generic {{indexing_maps = [{M2}, {M3}], iterator_types = {PAR}}}
      ins(%x : {T2}) outs(%e : {t3}) {{
  ^bb0(%a: f32, %o: f32):
{COSTLY}
    linalg.yield %r : f32
  }} -> {t3}
  return %y : {t3}
}}"""
    x = np.random.default_rng(4).standard_normal((H, W)).astype(np.float32)
    module = rt.load_module(compile_str(text, target_backends=["llvm-cpu"]), device="local-task")
    got = module.main(x).to_host()
    assert got.shape == (C, H, W)
    np.testing.assert_allclose(got, np.broadcast_to(costly_reference(x), (C, H, W)), rtol=2e-6,
                               atol=1e-6)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_against_pytorch(mode, align_corners):
    """torch's grid_sample, whose coordinates and weights torch-mlir computes at every channel,
    at odd sizes with coordinates past the edges: PyTorch's values, and on the CPU the
    per-pixel arithmetic in kernels without the channel loop."""
    torch.manual_seed(5)
    x = torch.randn(2, 5, 19, 17)
    grid = torch.rand(2, 61, 67, 2) * 2.6 - 1.3

    class Sample(torch.nn.Module):
        def forward(self, x, grid):
            return F.grid_sample(x, grid, mode=mode, align_corners=align_corners)
    f = Sample()
    text = import_torch(f, x, grid)
    loops = kernel_loops(text, "llvm-cpu")
    assert any("5" not in ls.split(", ") for ls in loops[:-1]) and len(loops) <= 5, loops
    module = rt.load_module(compile_str(text, target_backends=["llvm-cpu"]), device="local-task")
    got = module.main(x.numpy(), grid.numpy()).to_host()
    np.testing.assert_allclose(got, f(x, grid).numpy(), rtol=1e-5, atol=1e-5)
