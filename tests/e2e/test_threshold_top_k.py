"""The threshold search's top-k (input/threshold_top_k.py), which GPUs run for many long lines
(a batch of vocabulary rows): forced at small odd shapes so that every path of it runs here, as
the GPU forms run on local-task (a module also for vulkan-spirv walks no line), and on lavapipe;
values, indices and their bits against JAX's ``lax.top_k`` (XLA's total order: NaN, -NaN,
+-inf, -0.0 beside 0.0, ties in index order) and PyTorch's ``topk`` (largest and smallest,
along the first and a middle dim). Also which form the compiler picks where BENCHMARKS.md
measured both."""

from __future__ import annotations

import os
import warnings
from unittest import mock

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.input import threshold_top_k
from sort_cases import data, stable_order
from tooling import require_module

jax = require_module("jax")
jax.config.update("jax_platforms", "cpu")
GPU_FORMS = ["llvm-cpu", "vulkan-spirv"]


def forced(text: str, backends=GPU_FORMS, **options) -> bytes:
    """``text`` compiled with every top-k of it taken by the search."""
    with mock.patch.object(threshold_top_k, "search_cost", lambda *a: -1.0), \
            mock.patch.object(threshold_top_k, "threshold_top_k",
                              wraps=threshold_top_k.threshold_top_k) as search:
        vmfb = compile_str(text, CompileOptions(target_backends=backends, **options))
    assert search.called
    return vmfb


def line_data(shape, dtype, seed: int) -> np.ndarray:
    """Many ties; NaN, -NaN, +-inf, -0.0 and 0.0 along every line (floats)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-40, 40, shape)
    if not np.issubdtype(np.dtype(dtype), np.floating) and not dtype == "bfloat16":
        return x.astype(dtype)
    x = (x / 4).astype(np.float32)
    flat = x.reshape(-1)
    flat[flat == 0] = -0.0
    flat[1::2][flat[1::2] == 0] = 0.0
    flat[7::101], flat[11::103], flat[13::97], flat[17::91] = np.inf, -np.inf, np.nan, -np.nan
    flat[-1] = 99.0
    return x.astype(jax.numpy.bfloat16 if dtype == "bfloat16" else dtype)


BACKENDS = {"local-task": GPU_FORMS, "vulkan": ["vulkan-spirv"], "cuda": ["cuda"]}


def jax_top_k(x: np.ndarray, k: int, device: str = "local-task"):
    f = jax.jit(lambda v: jax.lax.top_k(v, k))
    vmfb = forced(f.lower(x).as_text(), BACKENDS[device], cuda_target="sm_90a",
                  vulkan_target=os.environ.get("PYREE_VULKAN_TARGET", "cpu-lavapipe-linux"))
    got = [np.asarray(r.to_host()) for r in rt.load_module(vmfb, device=device)["main"](x)]
    return got, [np.asarray(w) for w in f(x)]


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


@pytest.mark.parametrize("shape, k", [((5,), 2), ((3, 1001), 7), ((2, 4099), 50), ((1, 70), 70),
                                      ((4, 33), 1), ((2, 3, 257), 31)])
def test_f32_lines_match_jax(shape, k):
    got, want = jax_top_k(line_data(shape, np.float32, shape[-1]), k)
    same_bits(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16", np.int32, np.int8, np.uint8,
                                   np.uint32])
def test_other_key_types_match_jax(dtype):
    """Keys of 16 bits (f16, bf16: four passes), of w + 1 bits (8-bit ints) and of 32 bits,
    with the unsigned order (u32's top bit) kept."""
    x = line_data((3, 2053), dtype, 7)
    if dtype == np.uint32:
        x = x * np.uint32(2**25) + np.uint32(2**31 - 40)
    got, want = jax_top_k(x, 40)
    same_bits(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_a_line_of_one_value_takes_the_first_places():
    """Every key equal: the k-th key is every element's, and the first k places are taken."""
    got, want = jax_top_k(np.full((2, 3001), 1.5, np.float32), 100)
    np.testing.assert_array_equal(got[1], np.tile(np.arange(100), (2, 1)))
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("dim, largest", [(0, True), (1, False)])
def test_torch_topk_along_any_dim_matches_torch(dim, largest):
    torch = require_module("torch")
    require_module("torch_mlir")
    from pyree.compiler import import_torch

    x = data((37, 1031, 3) if dim == 1 else (1031, 5), np.float32, np.random.default_rng(dim + 2))

    class TopK(torch.nn.Module):
        def forward(self, t):
            top = torch.topk(t, 29, dim, largest=largest)
            return top.values, top.indices

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = import_torch(TopK(), torch.from_numpy(x))
    values, indices = (np.asarray(r.to_host()) for r in rt.load_module(
        forced(text), device="local-task")["main"](x))
    order = np.take(stable_order(x, dim, largest), np.arange(29), axis=dim)
    np.testing.assert_array_equal(indices, order)
    same_bits(values, np.take_along_axis(x, order, axis=dim))
    want = torch.topk(torch.from_numpy(x), 29, dim, largest=largest).values.numpy()
    same_bits(np.sort(values, axis=dim), np.sort(want, axis=dim))


SMALL = [((3, 4099), 50, np.float32), ((5, 2053), 40, np.float16)]
LARGE = [((64, 32000), 50, np.float32), ((16, 50257), 8, "bfloat16")]


@pytest.mark.parametrize("device, shape, k, dtype", [
    *(pytest.param("vulkan", *case, marks=pytest.mark.vulkan) for case in SMALL),
    *(pytest.param("cuda", *case, marks=pytest.mark.cuda) for case in SMALL + LARGE)])
def test_lines_match_jax_on_a_gpu(device, shape, k, dtype):
    """On lavapipe (in CI) and on an NVIDIA GPU (tests/drivers/cuda's host)."""
    x = line_data(shape, dtype, 11)
    got, want = jax_top_k(x, k, device=device)
    same_bits(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("shape, k, backend, search", [
    ((64, 32000), 50, "cuda", True), ((8, 50257), 50, "cuda", True),
    ((64, 32000), 50, "vulkan-spirv", True), ((8, 50257), 50, "vulkan-spirv", False),
    ((16, 32000), 8, "cuda", True), ((16, 32000), 8, "vulkan-spirv", False),
    ((1, 131072), 1000, "cuda", False), ((2, 50257), 40, "cuda", False),
    ((256, 1000), 10, "cuda", False), ((3, 8191), 3, "cuda", False)])
def test_the_form_measured_faster_is_chosen(shape, k, backend, search):
    """bench/cuda/top_k_paths.py's runs of both forms on the H200 (BENCHMARKS.md): the search
    for many long lines, the counted plans for few lines or short ones, and on Vulkan (whose
    dispatches cost about four times more) only for the largest batch."""
    text = jax.jit(lambda v: jax.lax.top_k(v, k)).lower(np.zeros(shape, np.float32)).as_text()
    with mock.patch.object(threshold_top_k, "threshold_top_k",
                           wraps=threshold_top_k.threshold_top_k) as taken:
        compile_str(text, CompileOptions(target_backends=[backend], compile_to="input"))
    assert taken.called == search
