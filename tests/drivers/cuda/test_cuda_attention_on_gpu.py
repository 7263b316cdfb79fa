"""On an NVIDIA GPU: PyTorch's scaled_dot_product_attention (causal, a boolean mask, none) and a
hand-written softmax attention, imported through torch-mlir and compiled for cuda, where
flow/attention.py makes each one kernel (codegen/cuda/attention.py, or attention_mma.py on tensor
cores for f16 and bf16 prefill); odd query and key lengths (decode's one query among them), head
dims that differ, f32, f16 and bf16, against the same attention in float64. Compiled here, from programs torch-mlir imports, or, on a GPU host without
torch-mlir, read from the folder $PYREE_TEST_ATTENTION_MLIR names: write it on the build machine
with `python3 tests/drivers/cuda/test_cuda_attention_on_gpu.py DIR`."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from tooling import require_module

require_module("torch")
if not os.environ.get("PYREE_TEST_ATTENTION_MLIR"):
    require_module("torch_mlir")

from flow import attention_cases as cases  # noqa: E402

pytestmark = pytest.mark.cuda

TOLERANCE = {"f32": 1e-5, "f16": 3e-3, "bf16": 2.5e-2}
# kind, (b, h, M, d), (b, h, T, d), (b, h, T, e), dtype
CASES = [
    ("sdpa_mask", (1, 3, 1, 64), (1, 3, 333, 64), (1, 3, 333, 64), "f16"),  # a decode step
    ("sdpa_mask", (1, 12, 1, 64), (1, 12, 1000, 64), (1, 12, 1000, 64), "f16"),  # keys split
    ("causal", (2, 3, 77, 40), (2, 3, 77, 40), (2, 3, 77, 40), "f16"),
    ("causal", (1, 2, 130, 64), (1, 2, 130, 64), (1, 2, 130, 64), "bf16"),
    ("sdpa_mask", (1, 2, 17, 24), (1, 2, 257, 24), (1, 2, 257, 72), "bf16"),
    ("sdpa", (1, 4, 200, 128), (1, 4, 203, 128), (1, 4, 203, 128), "f32"),
    ("by_hand", (2, 5, 33, 16), (2, 5, 65, 16), (2, 5, 65, 48), "f32"),
    ("by_hand", (1, 3, 50, 64), (1, 3, 300, 64), (1, 3, 300, 64), "f16"),
    # prefill on tensor cores (attention_mma.py): odd T, rows and keys past tiles of 64
    ("causal", (1, 12, 1000, 64), (1, 12, 1000, 64), (1, 12, 1000, 64), "f16"),
    ("causal", (1, 4, 300, 128), (1, 4, 300, 128), (1, 4, 300, 128), "bf16"),
    ("sdpa_mask", (1, 2, 300, 64), (1, 2, 1000, 64), (1, 2, 1000, 80), "bf16"),  # a row masked whole
    ("by_hand", (2, 3, 77, 32), (2, 3, 1000, 32), (2, 3, 1000, 32), "f16"),  # P rounded to f16
    ("sdpa", (1, 2, 77, 80), (1, 2, 300, 80), (1, 2, 300, 40), "f16"),
]
# The cases the tensor-core template takes: a block per 64 query rows, not per row.
TENSOR_CORES = {i for i, (_, q, _, _, dtype) in enumerate(CASES) if dtype != "f32" and q[2] >= 16}


@pytest.mark.parametrize("case", range(len(CASES)))
def test_attention_on_the_gpu_matches_float64(case):
    import pyree.runtime as rt
    from pyree.compiler import CompileOptions, compile_str
    kind, q, k, v, dtype = CASES[case]
    vmfb = compile_str(cases.mlir(kind, q, k, v, dtype),
                       CompileOptions(target_backends=["cuda"], cuda_target="sm_80"))
    (executable,) = rt.read_module(vmfb).tree.executables
    exports = [e for e in executable.cuda.exports if "attention" in e.name]
    assert exports  # one kernel
    if case in TENSOR_CORES:
        blocks = q[0] * q[1] * -(-q[2] // 64)
        assert [list(e.gridSize)[0] for e in exports] == [blocks]
    module = rt.load_module(vmfb, device="cuda")
    args = cases.inputs(kind, q, k, v, dtype, np.random.default_rng())
    got = np.asarray(module[module.function_names[0]](*args).to_host(), np.float64)
    want = cases.reference(kind, args)
    tol = TOLERANCE[dtype]
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


if __name__ == "__main__":  # on the build machine: import every case's program into a folder
    os.environ["PYREE_TEST_ATTENTION_MLIR"] = sys.argv[1]
    for kind, q, k, v, dtype in CASES:
        cases.mlir(kind, q, k, v, dtype)
