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
    # head rows of 10 and 5 vectors of 16 bytes (80 wide in f16, 20 in f32), over a count of
    # keys no chunk count divides (1021, a prime: the last chunk shorter)
    ("sdpa_mask", (1, 4, 1, 80), (1, 4, 1021, 80), (1, 4, 1021, 80), "f16"),
    ("sdpa_mask", (1, 3, 5, 20), (1, 3, 1021, 20), (1, 3, 1021, 20), "f32"),
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


def _chain(q, k, v) -> np.ndarray:
    """Causal attention as the unfused chain computes it, in float64: the mask added to the
    product (a NaN key past the diagonal makes the row NaN), and 0 * inf in P V NaN."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = s + np.where(np.tril(np.ones(s.shape[-2:], bool)), 0.0, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        p = p / p.sum(-1, keepdims=True)
        return (p[..., :, :, None] * v[..., None, :, :]).sum(-2)


SPECIAL = ("causal", (1, 3, 300, 64), (1, 3, 300, 64), (1, 3, 300, 64), "f16")


def test_special_values_past_the_diagonal_on_the_gpu():
    """Tiles past the causal diagonal are passed over only where that is exact: a NaN key or an
    infinite value past the diagonal (heads 0 and 1) reaches the rows as in the chain; head 2,
    all finite, is PyTorch's attention."""
    import pyree.runtime as rt
    from pyree.compiler import CompileOptions, compile_str
    vmfb = compile_str(cases.mlir(*SPECIAL), CompileOptions(target_backends=["cuda"], cuda_target="sm_80"))
    module = rt.load_module(vmfb, device="cuda")
    q, k, v = cases.inputs(*SPECIAL, np.random.default_rng(5))
    k[0, 0, 250, 3] = np.nan
    v[0, 1, 280, 5] = np.inf
    got = np.asarray(module[module.function_names[0]](q, k, v).to_host(), np.float64)
    want = _chain(q, k, v)
    assert np.isnan(want[0, 0]).all() and np.isnan(want[0, 1, :280, 5]).all() \
        and np.isfinite(want[0, 2]).all()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=3e-3, atol=3e-3)


# kind, heads, head dim of q and k, of v, dtype: one module each, every length T from one module
RUN_TIME = [("causal", 12, 64, 64, "f16"), ("by_hand", 3, 128, 80, "bf16"),
            ("sdpa_mask", 4, 32, 48, "f16")]


@pytest.mark.parametrize("kind, heads, depth, width, dtype", RUN_TIME)
def test_run_time_lengths_on_the_gpu(kind, heads, depth, width, dtype):
    """A prompt of any length through one module: the attention over a run-time sequence is one
    kernel on tensor cores (attention_mma.py), its grid a size; at lengths inside and across
    tiles of 64 (1 .. 1000), against the same attention in float64."""
    import pyree.runtime as rt
    from pyree.compiler import CompileOptions, compile_str
    vmfb = compile_str(cases.run_time_mlir(kind, heads, depth, width, dtype),
                       CompileOptions(target_backends=["cuda"], cuda_target="sm_80"))
    (executable,) = rt.read_module(vmfb).tree.executables
    (export,) = [e for e in executable.cuda.exports if "attention" in e.name]
    assert len(export.gridSizeExpr) == 3
    module = rt.load_module(vmfb, device="cuda")
    for t in (1, 15, 64, 77, 300, 1000):
        shapes = ((1, heads, t, depth), (1, heads, t, depth), (1, heads, t, width))
        args = cases.inputs(kind, *shapes, dtype, np.random.default_rng(t))
        got = np.asarray(module[module.function_names[0]](*args).to_host(), np.float64)
        want = cases.reference(kind, args)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        finite = np.isfinite(want)
        tol = TOLERANCE[dtype]
        np.testing.assert_allclose(got[finite], want[finite], rtol=tol, atol=tol, err_msg=f"T={t}")


if __name__ == "__main__":  # on the build machine: import every case's program into a folder
    os.environ["PYREE_TEST_ATTENTION_MLIR"] = sys.argv[1]
    for kind, q, k, v, dtype in [*CASES, SPECIAL]:
        cases.mlir(kind, q, k, v, dtype)
    for case in RUN_TIME:
        cases.run_time_mlir(*case)
