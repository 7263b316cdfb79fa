"""On an NVIDIA GPU, through the HIP-on-CUDA shim: the dynamic-shape cases of
tests/e2e/test_dynamic_shapes.py and its torch models run by pyree's rocm driver, each module
compiled for cuda and relabelled as rocm (relabel.py), so that the rocm driver evaluates each
dispatch's grid and passes its push constants as kernel parameters, at sizes 0, 1, primes and
large. The cases are the e2e file's own, collected here with this file's ``backend``, whose loader they call; the modules
are tests/drivers/cuda/test_cuda_dynamic.py's (PYREE_CUDA_DYNAMIC_MODULE_DIR, or compiled here)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyree.runtime as rt
import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "cuda")]
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
from test_cuda_dynamic import check_torch_case, cuda_module, module_bytes  # noqa: E402

pytestmark = pytest.mark.cuda


def relabelled(data: bytes) -> bytes:
    from relabel import relabel
    return relabel(data)


@pytest.fixture(scope="module")
def shim(hip_env) -> str:
    """The rocm device, on the shim that conftest found (this process opens it)."""
    os.environ["PYREE_HIP_LIBRARY"] = hip_env["PYREE_HIP_LIBRARY"]
    return "rocm"


@pytest.fixture(scope="module")
def backend(shim):
    """(target, device, loader): MLIR text -> its cuda module relabelled for rocm, loaded on
    the shim."""
    def load(mlir: str):
        data = module_bytes("rocm", dynamic_modules.file_name(mlir),
                            lambda: relabelled(cuda_module(mlir)))
        return rt.load_module(data, device=shim)
    return "rocm", shim, load


@pytest.mark.parametrize("name", sorted(dynamic_modules.TORCH_MODELS))
def test_torch_model_with_a_dynamic_batch(name, shim):
    folder = os.environ.get("PYREE_CUDA_DYNAMIC_MODULE_DIR")
    check_torch_case(name, shim, (lambda data: (Path(folder) / "rocm" / f"{name}.vmfb").read_bytes())
                     if folder else relabelled)
