"""Arg-max/min folds split into plain parallel folds (flow/arg_folds.py): the answer is
PyTorch's and numpy's, at odd shapes with ties, NaN, +-inf and -0, on every target that runs in
CI; torch-mlir's linalg (``m = maximumf(m, x); i = x > m_old ? j : i``) differs only for a row
holding NaN, where the fold names the first NaN as PyTorch does."""

from __future__ import annotations

import dataclasses
import os

import ml_dtypes
import numpy as np
import pyree.runtime as rt
import pytest
import torch  # CI installs it: a missing torch fails there, never skips
from pyree.compiler import CompileOptions, compile_str, import_torch

BACKENDS = [
    pytest.param(("llvm-cpu", "local-task"), id="llvm-cpu"),
    pytest.param(("vulkan-spirv", "vulkan"), id="vulkan", marks=pytest.mark.vulkan),
]
SHAPES = [(1, 50257), (3, 1000), (7, 1), (5, 13), (2, 4099)]


class ArgFolds(torch.nn.Module):
    def forward(self, x):
        return x.argmax(-1, keepdim=True), x.argmin(-1), x.argmax(0), x.max(-1)[0]


def reference(x: np.ndarray, axis: int, larger: bool) -> np.ndarray:
    """numpy's (and PyTorch's) answer: the first extreme, NaN counting as the extreme either
    way; torch-mlir's loop as written would leave a NaN row's index at the extreme before it."""
    return (np.argmax if larger else np.argmin)(x, axis)


def special(rng, shape, dtype) -> np.ndarray:
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    if flat.size > 40:
        flat[[3, 17]] = flat.max() + 1          # a tie for the maximum: the first one wins
        flat[[5, 29]] = flat.min() - 1          # and for the minimum
        flat[11], flat[23], flat[31] = np.inf, -np.inf, -0.0
    return x


@pytest.fixture(scope="module", params=BACKENDS)
def compiled(request):
    target, device = request.param
    options = CompileOptions(target_backends=[target], vulkan_target=os.environ.get(
        "PYREE_VULKAN_TARGET", "cpu-lavapipe-linux"))
    modules = {}
    for shape in SHAPES:
        mlir = import_torch(ArgFolds(), torch.zeros(shape))
        modules[shape] = rt.load_module(compile_str(mlir, options), device=device)
    return modules


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_argmax_and_argmin_equal_pytorchs_without_nan(compiled, shape):
    x = special(np.random.default_rng(sum(shape)), shape, np.float32)
    got = compiled[shape]["main"](x)
    with torch.no_grad():
        want = ArgFolds()(torch.from_numpy(x))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.to_host(), w.numpy())


@pytest.mark.parametrize("shape", [(3, 1000), (2, 4099), (1, 50257)], ids=lambda s: "x".join(map(str, s)))
def test_nan_and_infinite_rows_give_pytorchs_index(compiled, shape):
    x = special(np.random.default_rng(7), shape, np.float32)
    x[0, shape[1] // 2] = np.nan                 # a NaN after the maximum of row 0
    if shape[0] > 1:
        x[1, :] = -np.inf                        # nothing ever beats the start: index 0
    if shape[0] > 2:
        x[2, 0] = np.nan                         # a NaN first
    got = compiled[shape]["main"](x)
    np.testing.assert_array_equal(got[0].to_host()[:, 0], reference(x, 1, True))
    np.testing.assert_array_equal(got[1].to_host(), reference(x, 1, False))
    np.testing.assert_array_equal(got[2].to_host(), reference(x, 0, True))
    want_max = np.where(np.isnan(x).any(1), np.nan, np.max(np.where(np.isnan(x), -np.inf, x), 1))
    np.testing.assert_array_equal(got[3].to_host(), want_max.astype(np.float32))


HALF_SHAPES = [(3, 1000), (1, 50257), (5, 13), (2, 65537)]  # 65537: past the packed key's reach


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_16_bit_rows_fold_one_packed_key(backend, dtype):
    """argmax/argmin of f16 and bf16 rows (a vocabulary's logits) fold one i32 key instead of
    the value and then its first place: numpy's and PyTorch's answer with ties (the first wins,
    -0 ties +0), +-inf, a NaN in a row and a row of -inf. A row longer than the key's 65536 places keeps the two folds."""
    target, device = backend

    class Index(torch.nn.Module):
        def forward(self, x):
            return x.argmax(-1), x.argmin(-1), x.argmax(0)
    options = CompileOptions(target_backends=[target], vulkan_target=os.environ.get(
        "PYREE_VULKAN_TARGET", "cpu-lavapipe-linux"))
    for shape in HALF_SHAPES:
        mlir = import_torch(Index(), torch.zeros(shape, dtype=dtype))
        sources = compile_str(mlir, dataclasses.replace(options, compile_to="executable-sources")).decode()
        assert "__key__" in sources and ("__top__" in sources) == (shape[1] > 65536)
        module = rt.load_module(compile_str(mlir, options), device=device)
        x = torch.from_numpy(special(np.random.default_rng(shape[1]), shape, np.float32)).to(dtype)
        if shape[0] > 2:
            x[0, :] = -1
            x[0, 3:7] = torch.tensor([-0.0, 0.0, -0.0, 0.0])  # ties of zeros, led by -0
            x[1, shape[1] // 2] = float("nan")
            x[2, :] = -float("inf")
        with torch.no_grad():
            want = Index()(x)
        host = x.view(torch.int16).numpy().view(np.float16 if dtype == torch.float16 else ml_dtypes.bfloat16)
        got = [g.to_host() for g in module["main"](host)]
        xs = x.float().numpy()
        for g, w, axis, larger in zip(got, want, (1, 1, 0), (True, False, True)):
            np.testing.assert_array_equal(g, w.numpy())
            np.testing.assert_array_equal(g, reference(xs, axis, larger))
        if shape[0] > 2:
            assert got[0][0] == 3 and got[0][1] == shape[1] // 2  # -0 at 3 ties the +0 after it


@pytest.mark.parametrize("dtype", [np.int32, np.int16, np.int8])  # 16 and 8 bits: the packed key
def test_integer_rows(dtype):
    class IntArgmax(torch.nn.Module):
        def forward(self, x):
            return x.argmax(-1), x.argmin(-1)
    info = np.iinfo(dtype)
    x = np.random.default_rng(3).integers(-5, 5, (5, 301)).astype(dtype)
    x[0, :] = info.min                             # the fold's identity everywhere: index 0
    x[1, [9, 40]], x[1, [3, 77]] = info.max, info.min  # ties at the extremes: the first wins
    x[2, :] = info.max
    module = rt.load_module(compile_str(import_torch(IntArgmax(), torch.from_numpy(x)),
                                        CompileOptions(target_backends=["llvm-cpu"])), device="local-task")
    got = module["main"](x)
    with torch.no_grad():
        want = IntArgmax()(torch.from_numpy(x))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.to_host(), w.numpy())


def test_the_vocabulary_argmax_runs_as_parallel_folds():
    """GPT-2's 50257-word row: no kernel folds it one element at a time any more (the split
    folds' partial kernels spread it over the GPU)."""
    mlir = import_torch(ArgFolds(), torch.zeros(1, 50257))
    kernels = compile_str(mlir, CompileOptions(target_backends=["cuda"], compile_to="executable-sources")).decode()
    assert "first_nan" in kernels and "partial_folds" in kernels
    assert "| 50257)" not in kernels  # no kernel walks the whole row


def test_a_fold_whose_index_nothing_reads_stays_one_fold():
    """torch's softmax and ``max(dim)[0]`` take the values of ``max.dim`` alone: the index is
    dropped, the value stays one plain fold, and the softmax one row kernel."""
    class Values(torch.nn.Module):
        def forward(self, x):
            return x.max(-1)[0] * 2, torch.softmax(x, -1)
    mlir = import_torch(Values(), torch.zeros(3, 1000))
    kernels = compile_str(mlir, CompileOptions(target_backends=["llvm-cpu"],
                                               compile_to="executable-sources")).decode()
    assert "first_nan" not in kernels and "row b" in kernels
    x = special(np.random.default_rng(2), (3, 1000), np.float32)
    x[1, 7] = np.nan
    module = rt.load_module(compile_str(mlir, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    with torch.no_grad():
        want = Values()(torch.from_numpy(x))
    for got, w in zip(module["main"](x), want):
        np.testing.assert_allclose(got.to_host(), w.numpy(), rtol=1e-6, atol=1e-7)
