"""Pass split-reductions (flow/split_reduction.py): a long fold with few outputs becomes a partial
fold over chunks and a fold of the partials; the IR right after the pass, then the numbers of the
whole compile on local-task against numpy at odd sizes."""

from __future__ import annotations

import numpy as np
import pytest
from pass_runs import after_pass, before_pass, generics, run_local_task
from test_regions import run


def row_fold(rows: int, n: int, op: str = "arith.addf", init: str = "0.0") -> str:
    """r[i] = fold of x[i, :] with ``op`` from ``init``."""
    return f"""
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @main(%x: tensor<{rows}x{n}xf32>) -> tensor<{rows}xf32> {{
  %c = arith.constant {init} : f32
  %e = tensor.empty() : tensor<{rows}xf32>
  %init = linalg.fill ins(%c : f32) outs(%e : tensor<{rows}xf32>) -> tensor<{rows}xf32>
  %r = linalg.generic {{indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}}
      ins(%x : tensor<{rows}x{n}xf32>) outs(%init : tensor<{rows}xf32>) {{
  ^bb0(%a: f32, %acc: f32):
    %s = {op} %a, %acc : f32
    linalg.yield %s : f32
  }} -> tensor<{rows}xf32>
  return %r : tensor<{rows}xf32>
}}
"""


def matmul(m: int, k: int, n: int, dtype: str = "f32") -> str:
    """``a @ b`` of ``dtype`` operands, summed in f32."""
    return f"""
func.func @main(%a: tensor<{m}x{k}x{dtype}>, %b: tensor<{k}x{n}x{dtype}>) -> tensor<{m}x{n}xf32> {{
  %c = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %init = linalg.fill ins(%c : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %r = linalg.matmul ins(%a, %b : tensor<{m}x{k}x{dtype}>, tensor<{k}x{n}x{dtype}>)
      outs(%init : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  return %r : tensor<{m}x{n}xf32>
}}
"""


def test_a_long_row_fold_splits_into_whole_chunks_and_a_fold_of_the_partials():
    """3 rows of 20011: 19 chunks of 1053 (whole chunks, no guard) per row; the final fold reads
    the (3, 19) partials and takes the 4 elements past the chunks itself."""
    partial, final = generics(after_pass(row_fold(3, 20011), "split-reductions"))
    assert (partial.loop_ranges, partial.num_parallel) == ((19, 3, 1053), 2)
    assert partial.results[0].shape == (3, 19)
    assert (final.loop_ranges, final.num_parallel) == ((3, 19), 1)
    assert final.inputs[-1] is partial.results[0] and final.results[0].shape == (3,)


@pytest.mark.parametrize("fold, init, reference", [
    ("arith.addf", "0.0", lambda x: np.sum(x.astype(np.float64), axis=1)),
    ("arith.maximumf", "0xFF800000", lambda x: np.max(x, axis=1)),
])
def test_a_split_row_fold_matches_numpy(fold, init, reference):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 20011)).astype(np.float32)
    x[1, 20009] = np.inf  # past the whole chunks: the final fold's share
    x[2, 7] = -np.inf
    got = run_local_task(row_fold(3, 20011, fold, init), x)
    scale = np.sum(np.abs(np.where(np.isfinite(x), x, 0)), axis=1).astype(np.float64)
    np.testing.assert_allclose(got, reference(x), rtol=0, atol=1e-5 * float(np.max(scale)))


def test_a_long_k_matmul_with_few_outputs_splits_k_into_a_batch():
    """5x3072 @ 3072x7 (one tile): K splits into 12 chunks of 256 that divide it exactly, as a
    batch loop of a (12, 5, 7) partial product the matmul templates still take."""
    partial, final = generics(after_pass(matmul(5, 3072, 7), "split-reductions"))
    assert (partial.loop_ranges, partial.num_parallel) == ((12, 5, 7, 256), 3)
    assert partial.results[0].shape == (12, 5, 7)
    assert (final.loop_ranges, final.num_parallel) == ((5, 7, 12), 2)
    rng = np.random.default_rng(12)
    a = rng.standard_normal((5, 3072)).astype(np.float32)
    b = rng.standard_normal((3072, 7)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(run_local_task(matmul(5, 3072, 7), a, b), want, rtol=1e-4,
                               atol=1e-3)


def test_short_reductions_and_many_outputs_stay_whole():
    for text in (row_fold(3, 16383), row_fold(301, 20011), matmul(5, 260, 3)):
        before = generics(before_pass(text, "split-reductions"))
        after = generics(after_pass(text, "split-reductions"))
        assert [g.loop_ranges for g in after] == [g.loop_ranges for g in before]
        assert len(after) == 1


def test_only_a_gpu_module_splits_a_small_product_below_long_k():
    """5x260 @ 260x3, a matrix-vector-like product (a side under 16) with K = 260: for GPU
    targets alone K splits into 2 chunks of 130; with a CPU target it stays whole."""
    text = matmul(5, 260, 3)
    assert len(generics(after_pass(text, "split-reductions"))) == 1
    function = after_pass(text, "split-reductions", gpu=True)
    partial, final = generics(function)
    assert partial.loop_ranges == (2, 5, 3, 130) and final.loop_ranges == (5, 3, 2)
    rng = np.random.default_rng(13)
    a = rng.standard_normal((5, 260)).astype(np.float32)
    b = rng.standard_normal((260, 3)).astype(np.float32)
    (got,) = run(function, [a, b])  # the reference interpreter: no GPU here
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k, n, dtype, whole", [
    (768, 2304, "f16", True),     # GPT-2's qkv at decode: a 1.5 KiB column
    (3072, 768, "f16", True),     # its second MLP product: 6 KiB
    (4096, 768, "f16", True),     # 8 KiB: the limit
    (4104, 768, "f16", False),    # past it (4104 = 8 * 513: divisors to split by)
    (3072, 768, "f32", False),    # 12 KiB of f32
])
def test_a_cuda_matrix_vector_product_stays_whole_up_to_an_8_kib_column(k, n, dtype, whole):
    """A 1-row product in a cuda module stays whole while a column of its matrix is at most
    GPU_VECTOR_WHOLE_BYTES (the template narrows its blocks to fill the GPU, each thread's loads
    in flight at once: measured faster in the decode step than the split and its fold); past
    that it splits as before, and every other GPU module splits it as before."""
    text = matmul(1, k, n, dtype)
    ops = generics(after_pass(text, "split-reductions", gpu=True, implicit_gemm=True))
    assert len(ops) == (1 if whole else 2)
    assert len(generics(after_pass(text, "split-reductions", gpu=True))) == 2


F16_CONV = """
func.func @f(%x: tensor<1x64x58x58xf16>, %w: tensor<64x64x3x3xf16>) -> tensor<1x64x56x56xf16> {
  %z = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<1x64x56x56xf16>
  %i = linalg.fill ins(%z : f16) outs(%e : tensor<1x64x56x56xf16>) -> tensor<1x64x56x56xf16>
  %c = linalg.conv_2d_nchw_fchw ins(%x, %w : tensor<1x64x58x58xf16>, tensor<64x64x3x3xf16>)
      outs(%i : tensor<1x64x56x56xf16>) -> tensor<1x64x56x56xf16>
  return %c : tensor<1x64x56x56xf16>
}
"""


@pytest.mark.parametrize("m, k, n, parts", [
    (128, 768, 3072, 1),   # a GPT-2 linear of a 128-token prompt (48 tensor tiles): whole
    (128, 768, 768, 1),    # 12 tiles: whole
    (64, 768, 768, 4),     # 6 tiles: split, as it ran faster on mma.sync
    (64, 3072, 768, 12),   # K from LONG_K on: split
])
def test_f16_matmuls_on_the_gpu_split_k_only_from_long_k(m, k, n, parts):
    """An f16 matmul with K below LONG_K and 12 to 66 tensor tiles stays whole in a cuda module
    (whole ran faster than split in 192-deep chunks on the H200); with fewer tiles, or from
    LONG_K on, it splits. Other GPU modules (Vulkan's, rocm's templates, not measured so) split
    it as before."""
    text = matmul(m, k, n, "f16")
    ops = generics(after_pass(text, "split-reductions", gpu=True, implicit_gemm=True))
    assert [g.loop_ranges[0] for g in ops] == ([m] if parts == 1 else [parts, m])
    other = generics(after_pass(text, "split-reductions", gpu=True))
    assert len(other) == 2


def test_a_convolutions_gemm_still_splits_k():
    """ResNet-18's f16 3x3 convolution of 64 channels at 56x56 (25 tensor tiles, K = 576): its
    GEMM reads the patches, and keeps its split (which ran faster than whole)."""
    ops = generics(after_pass(F16_CONV, "split-reductions", gpu=True, implicit_gemm=True))
    assert [g.origin for g in ops][-2:] == ["linalg.conv_2d_nchw_fchw (partial folds)",
                                             "linalg.conv_2d_nchw_fchw"]
