"""On an NVIDIA GPU, through the HIP-on-CUDA shim: the dynamic-shape cases of
tests/e2e/test_dynamic_shapes.py run by pyree's rocm driver, each module compiled for cuda and
relabelled as rocm (relabel.py), so that the rocm driver evaluates each dispatch's grid and
passes its push constants as kernel parameters, at sizes 0, 1, primes and large. The cases are
the e2e file's own, collected here with this file's ``load``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyree.runtime as rt
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e.test_dynamic_shapes import (  # noqa: E402, F401 - collected here with this file's load
    exp_add_rowsum,
    test_a_size_computed_by_subtraction,
    test_arguments_that_disagree_on_a_shared_dim,
    test_expand_and_collapse_of_a_dynamic_dim,
    test_layernorm_with_a_dynamic_batch,
    test_matmul_with_every_dim_dynamic,
    test_one_module_serves_every_size,
    test_sizes_in_any_order_and_again,
    test_torch_export_with_a_dynamic_batch,
)
from pyree.compiler import CompileOptions, compile_str  # noqa: E402
from relabel import relabel  # noqa: E402

pytestmark = pytest.mark.cuda
CUDA = CompileOptions(target_backends=["cuda"], cuda_target="sm_90")


@pytest.fixture(scope="module")
def load(hip_env):
    """MLIR text -> the module compiled for cuda, relabelled, loaded on the rocm driver of this
    process, which opens the shim that conftest found."""
    os.environ["PYREE_HIP_LIBRARY"] = hip_env["PYREE_HIP_LIBRARY"]
    return lambda mlir: rt.load_module(relabel(compile_str(mlir, CUDA)), device="rocm")
