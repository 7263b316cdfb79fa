"""On an NVIDIA GPU: the dynamic-shape cases of tests/e2e/test_dynamic_shapes.py (elementwise and
row sums, matmul, reshape, a size computed by subtraction), each module compiled for cuda once
and called at sizes 0, 1, primes and large with NaN/inf/-0 inputs, in the three command-buffer
modes; graph mode records its launches once per size and must stay right when the sizes change
between calls. The cases are the e2e file's own, collected here with this file's ``backend``, whose loader they call. Then
that file's torch models (softmax over a linear layer, a CNN, layernorm) with a dynamic batch,
against PyTorch at batches 1, a prime and large.

Modules come from PYREE_CUDA_DYNAMIC_MODULE_DIR (dynamic_modules.py, on the CPU machine: the GPU
host has no compiler), or are compiled here when that is unset."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pyree.runtime as rt
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dynamic_modules  # noqa: E402
from e2e.test_dynamic_shapes import (  # noqa: E402, F401 - collected here with this file's backend
    exp_add_rowsum,
    test_a_size_computed_by_subtraction,
    test_arguments_that_disagree_on_a_shared_dim,
    test_expand_and_collapse_of_a_dynamic_dim,
    test_matmul_with_a_long_run_time_k,
    test_matmul_with_every_dim_dynamic,
    test_one_module_serves_every_size,
    test_sizes_in_any_order_and_again,
)

pytestmark = pytest.mark.cuda
MODES = ("direct", "stream", "graph")
TARGET = "sm_90"


def module_bytes(driver: str, file: str, compile_here) -> bytes:
    """A prebuilt module of ``driver`` (cuda or rocm) from PYREE_CUDA_DYNAMIC_MODULE_DIR, or
    ``compile_here()`` where that is unset."""
    folder = os.environ.get("PYREE_CUDA_DYNAMIC_MODULE_DIR")
    return (Path(folder) / driver / file).read_bytes() if folder else compile_here()


def torch_case(name: str) -> tuple[bytes, dict]:
    """(cuda module, inputs and PyTorch's outputs) of dynamic_modules.TORCH_MODELS[name]."""
    folder = os.environ.get("PYREE_CUDA_DYNAMIC_MODULE_DIR")
    if folder:
        return (Path(folder) / "cuda" / f"{name}.vmfb").read_bytes(), \
            dict(np.load(Path(folder) / f"{name}.npz"))
    return dynamic_modules.torch_case(name, TARGET)


def cuda_module(mlir: str) -> bytes:
    def compile_here():
        from pyree.compiler import CompileOptions, compile_str
        return compile_str(mlir, CompileOptions(target_backends=["cuda"], cuda_target=TARGET))
    return module_bytes("cuda", dynamic_modules.file_name(mlir), compile_here)


@pytest.fixture(scope="module", params=MODES)
def mode(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def backend(mode):
    """(target, device, loader): MLIR text -> its cuda module, loaded in this mode."""
    device = f"cuda://0?command_buffer={mode}"
    return "cuda", device, lambda mlir: rt.load_module(cuda_module(mlir), device=device)


def check_torch_case(name: str, device: str, module_of=lambda data: data) -> None:
    """Each batch twice, sizes alternating, so graph mode replays each size's own recording."""
    data, arrays = torch_case(name)
    module = rt.load_module(module_of(data), device=device)
    fn = module[module.function_names[0]]
    for _ in range(2):
        for n in dynamic_modules.BATCHES:
            got = fn(arrays[f"x{n}"]).to_host()
            assert got.shape == arrays[f"y{n}"].shape
            np.testing.assert_allclose(got, arrays[f"y{n}"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(dynamic_modules.TORCH_MODELS))
def test_torch_model_with_a_dynamic_batch(name, mode):
    check_torch_case(name, f"cuda://0?command_buffer={mode}")
