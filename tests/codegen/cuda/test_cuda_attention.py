"""CPU-only: the cuda target's attention kernels (codegen/cuda/attention.py, and
attention_mma.py on tensor cores for f16/bf16 prefill, from flow's fuse-attention) run on this
CPU (nvptx_on_cpu.py) against the chain they replace, evaluated by the kernel IR's reference
semantics, and against PyTorch's attention in float64: decode and prefill rows (M = 1 .. 130),
short and long key ranges (T = 5 .. 130) across the block's threads and tiles, head dims that
differ, f32, f16 and bf16, causal and padded masks, a row masked whole, and NaN and infinities
in q, k and v, which land where the chain puts them. ptxas assembles the kernels for Ampere and
Hopper. tests/drivers/cuda/test_cuda_attention_on_gpu.py runs them on a GPU."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from tooling import require_module

require_module("torch")
require_module("torch_mlir")

from flow import attention_cases as cases  # noqa: E402
from flow.pass_runs import after_pass, before_pass, generics  # noqa: E402
from nvptx_on_cpu import Emulated  # noqa: E402
from ptx_modules import cuda_executable  # noqa: E402
from pyree.compiler import CompileOptions, compile_str  # noqa: E402
from pyree.compiler.tensor_program import Constant  # noqa: E402

FLOW = {"gpu": True, "implicit_gemm": True, "attention": True}


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Flash-decoding's chunks of 8 keys, not 128: the emulator's blocks stay small, and the
    one-query cases split their keys over blocks (the partial kernel and the combine)."""
    from pyree.compiler.flow import flash_decoding
    monkeypatch.setattr(flash_decoding, "MIN_CHUNK_KEYS", 8)
TOLERANCE = {"f32": 2e-6, "f16": 2e-3, "bf16": 1.6e-2}

# kind, (b, h, M, d), (b, h, T, d), (b, h, T, e), dtype
SHAPES = [
    ("sdpa_mask", (1, 2, 1, 24), (1, 2, 130, 24), (1, 2, 130, 8), "f32"),  # decode, 13 chunks
    ("sdpa_mask", (1, 1, 1, 8), (1, 1, 37, 8), (1, 1, 37, 24), "f16"),  # 37 keys: 4 chunks, last of 7
    ("causal", (1, 1, 17, 8), (1, 1, 17, 8), (1, 1, 17, 24), "f16"),
    ("sdpa", (1, 1, 3, 8), (1, 1, 37, 8), (1, 1, 37, 24), "bf16"),
    ("by_hand", (2, 1, 3, 24), (2, 1, 5, 24), (2, 1, 5, 8), "f32"),
    ("by_hand", (1, 2, 3, 8), (1, 2, 37, 8), (1, 2, 37, 24), "f16"),  # P rounded to f16
]


def _emulated(kernel, buffers, tensor_cores: bool | None = None) -> None:
    """The attention kernel as the cuda target compiles it, the other kernels' reference;
    ``tensor_cores``: whether the kernel must be the tensor-core template's (None: either)."""
    if kernel.attention is None:
        from pyree.compiler.kernel import evaluate
        evaluate(kernel, buffers)
    else:
        emulated = Emulated(kernel)
        assert tensor_cores is None or ("mma.m16n8k16" in emulated.text) == tensor_cores
        assert emulated(buffers, [])


def _both(kind: str, shapes, dtype: str, args, tensor_cores: bool | None = None):
    """(the fused op on the emulated GPU, the chain by the reference semantics)."""
    mlir = cases.mlir(kind, *shapes, dtype)
    fused = after_pass(mlir, "fuse-attention", **FLOW)
    assert generics(fused)[0].attention is not None
    (got,) = cases.run(fused, args, lambda k, b: _emulated(k, b, tensor_cores))
    (want,) = cases.run(before_pass(mlir, "fuse-attention", **FLOW), args)
    return got.astype(np.float64), want.astype(np.float64)


@pytest.mark.parametrize("kind, q, k, v, dtype", SHAPES)
def test_the_kernel_computes_attention(kind, q, k, v, dtype):
    args = cases.inputs(kind, q, k, v, dtype, np.random.default_rng(11))
    got, chain = _both(kind, (q, k, v), dtype, args)
    tol = TOLERANCE[dtype]
    np.testing.assert_allclose(got, chain, rtol=tol, atol=tol)
    np.testing.assert_allclose(got, cases.reference(kind, args), rtol=2 * tol, atol=2 * tol)


# Tensor cores (attention_mma.py): at least 16 query rows; rows and keys across tiles of 64 and
# not multiples of them, head dims padded to 16 (24, 40) or not (16, 64, 80).
TENSOR_CORE_SHAPES = [
    ("causal", (1, 2, 16, 16), (1, 2, 16, 16), (1, 2, 16, 16), "f16"),
    ("causal", (1, 1, 17, 64), (1, 1, 17, 64), (1, 1, 17, 64), "bf16"),
    ("sdpa_mask", (1, 2, 17, 16), (1, 2, 37, 16), (1, 2, 37, 24), "bf16"),  # a row masked whole
    ("sdpa", (1, 1, 40, 80), (1, 1, 5, 80), (1, 1, 5, 40), "f16"),
    ("by_hand", (1, 1, 130, 16), (1, 1, 5, 16), (1, 1, 5, 16), "f16"),  # P rounded to f16
    ("sdpa_mask", (1, 1, 16, 16), (1, 1, 130, 16), (1, 1, 130, 16), "f16"),
]


@pytest.mark.parametrize("kind, q, k, v, dtype", TENSOR_CORE_SHAPES)
def test_tensor_cores_compute_attention(kind, q, k, v, dtype):
    """The tensor-core template against the chain and PyTorch's attention in float64: P is
    rounded to the operand type before P V (where the chain keeps it in f32, one rounding more)."""
    args = cases.inputs(kind, q, k, v, dtype, np.random.default_rng(14))
    got, chain = _both(kind, (q, k, v), dtype, args, tensor_cores=True)
    tol = TOLERANCE[dtype]
    np.testing.assert_allclose(got, chain, rtol=tol, atol=tol)
    np.testing.assert_allclose(got, cases.reference(kind, args), rtol=2 * tol, atol=2 * tol)


@pytest.mark.parametrize("kind", ["sdpa_mask", "by_hand"])
def test_special_values_on_tensor_cores(kind):
    """As below, on tensor cores (f16, 20 queries over 37 keys): NaN in a query, +inf in a key,
    -inf in a value, a row masked whole (SDPA: 0; by hand: NaN)."""
    shapes = ((1, 2, 20, 16), (1, 2, 37, 16), (1, 2, 37, 16))
    args = cases.inputs(kind, *shapes, "f16", np.random.default_rng(15))
    q, k, v, mask = args
    q[0, 0, 10, 3] = np.nan
    k[0, 1, 7, 0] = np.inf
    v[0, 0, 20, 5] = -np.inf
    mask[..., 1, :] = np.False_ if kind == "sdpa_mask" else -np.inf
    got, chain = _both(kind, shapes, "f16", args, tensor_cores=True)
    assert np.isnan(got).any() and np.isfinite(got).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(chain))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(chain))
    both = np.isfinite(chain)
    np.testing.assert_allclose(got[both], chain[both], rtol=2e-3, atol=2e-3)


def test_a_tile_masked_whole_on_tensor_cores():
    """Causal f16, 70 queries and keys: the key tile 64..69 is masked whole for rows 0..63,
    whose warps pass over its softmax (their P 0, O, the maximum and the sum as they were). An
    infinite value at key 69 still reaches every row as the chain's 0 * inf: NaN in its column,
    +inf in row 69's."""
    shapes = ((1, 1, 70, 16),) * 3
    args = cases.inputs("causal", *shapes, "f16", np.random.default_rng(16))
    args[2][0, 0, 69, 5] = np.inf
    got, chain = _both("causal", shapes, "f16", args, tensor_cores=True)
    assert np.isnan(chain[0, 0, :69, 5]).all() and chain[0, 0, 69, 5] == np.inf
    np.testing.assert_array_equal(np.isnan(got), np.isnan(chain))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(chain))
    finite = np.isfinite(chain)
    np.testing.assert_allclose(got[finite], chain[finite], rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("kind, queries, keys", [("sdpa_mask", 5, 37), ("by_hand", 5, 37),
                                                  ("sdpa_mask", 1, 48), ("by_hand", 1, 48)])
def test_special_values_land_where_the_chain_puts_them(kind, queries, keys):
    """NaN in one query, +inf in one key, -inf in another key's values (masked out of some
    rows, where 0 * inf is NaN as in the chain), and a row masked whole (SDPA: 0; by hand:
    NaN); with one query, the keys split in six chunks, the last three masked whole."""
    shapes = ((1, 2, queries, 8), (1, 2, keys, 8), (1, 2, keys, 8))
    args = cases.inputs(kind, *shapes, "f32", np.random.default_rng(12))
    q, k, v, mask = args
    q[0, 0, queries // 2, 3] = np.nan
    k[0, 1, 7, 0] = np.inf
    v[0, 0, 20, 5] = -np.inf
    masked = np.False_ if kind == "sdpa_mask" else -np.inf
    if queries > 1:
        mask[..., 1, :] = masked
    else:
        mask[..., keys // 2:] = masked
    got, chain = _both(kind, shapes, "f32", args)
    assert np.isnan(got).any() and np.isfinite(got).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(chain))
    np.testing.assert_allclose(got, chain, rtol=2e-6, atol=2e-6)


def _takes(kernel) -> bool:
    """cuda sm_80's predicate on attention kernels with run-time sizes (the pipeline's)."""
    from pyree.compiler.codegen.cuda import attention_mma, resolve_target
    return attention_mma.taker(resolve_target("sm_80"))(kernel)


def _run_time_op(kind: str, dtype: str):
    """The attention op of ``kind`` over a run-time sequence (2 heads, head dims 16 and 24)."""
    fused = after_pass(cases.run_time_mlir(kind, 2, 16, 24, dtype), "fuse-attention", **FLOW,
                       run_time_attention=_takes)
    (op,) = [g for g in generics(fused) if g.attention is not None]
    return fused, op


@functools.cache
def _emulated_run_time(kind: str, dtype: str) -> tuple:
    from pyree.compiler.flow.kernels import outline
    fused, op = _run_time_op(kind, dtype)
    return fused, op, Emulated(outline(op, "k"))


@pytest.mark.parametrize("kind, dtype, t", [("causal", "f16", 1), ("causal", "f16", 17),
                                            ("causal", "f16", 130), ("by_hand", "bf16", 16),
                                            ("by_hand", "bf16", 64)])
def test_run_time_lengths_on_tensor_cores(kind, dtype, t):
    """One kernel serves every prompt length: the sequence T (query rows and keys) a push
    constant, the grid a size; at T across and inside tiles of 64, against PyTorch's attention
    in float64, with NaN in a query and +inf in a key where T allows (by hand: rows masked
    whole, NaN there as in PyTorch)."""
    fused, op, em = _emulated_run_time(kind, dtype)
    assert "mma.m16n8k16" in em.text
    shapes = ((1, 2, t, 16), (1, 2, t, 16), (1, 2, t, 24))
    args = cases.inputs(kind, *shapes, dtype, np.random.default_rng(t))
    if t > 3:
        args[0][0, 1, 2, 3] = np.nan
        args[1][0, 0, 0, 0] = np.inf  # key 0: no mask hides it (inf + -inf would be the chain's NaN)
    constants = {c.result: c.data.reshape(c.result.shape) for c in fused.ops
                 if isinstance(c, Constant) and c.data is not None}
    buffers = [args[fused.arguments.index(v)] if v in fused.arguments else constants[v]
               for v in op.inputs]  # (the causal mask's select reads three 0-d constants)
    got = np.full((1, 2, t, 24), 7.0, args[0].dtype)
    assert em([*buffers, got], [t])
    assert em.grid([t]) == (2 * -(-t // 64), 1, 1)
    want = cases.reference(kind, args)
    got = got.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    tol = 2 * TOLERANCE[dtype]
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=tol, atol=tol)


def test_run_time_lengths_keep_the_chain_elsewhere():
    """A run-time sequence is fused only where the target's template takes the op: f32 keeps
    its three kernels (the SIMT attention kernel takes static sizes), as does a target without
    the template (None), or one whose template declines the op (a layout it does not stage)."""
    for dtype, run_time in (("f32", _takes), ("f16", None), ("f16", lambda kernel: False)):
        fused = after_pass(cases.run_time_mlir("causal", 2, 16, 24, dtype), "fuse-attention",
                           **FLOW, run_time_attention=run_time)
        assert not any(g.attention is not None for g in generics(fused))
        assert len(generics(fused)) >= 3


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptxas_assembles_the_kernels(ptxas, arch):
    """Causal f16 prefill is one export on tensor cores, a block of 128 threads per 64 query
    rows; f32 prefill the SIMT kernel's, a block per query row; a decode step over 1024 keys
    two, the partial kernel's blocks a chunk of a row's keys each."""
    options = CompileOptions(target_backends=["cuda"], cuda_target=arch)
    for dtype, dim, grid in (("f16", 64, 3 * 3), ("bf16", 128, 3 * 3), ("f32", 64, 3 * 130)):
        prefill = cuda_executable(compile_str(cases.mlir("causal", *[(1, 3, 130, dim)] * 3, dtype),
                                              options))
        (export,) = prefill.exports
        assert prefill.cubin.length > 0
        assert (list(export.gridSize), list(export.blockSize)) == ([grid, 1, 1], [128, 1, 1])
    decode = cuda_executable(compile_str(cases.mlir(
        "sdpa_mask", (1, 12, 1, 64), (1, 12, 1024, 64), (1, 12, 1024, 64), "f16"), options))
    partial, combine = decode.exports
    assert decode.cubin.length > 0 and b"partial" in partial.name and b"combine" in combine.name
    assert list(partial.gridSize) == [12 * 16, 1, 1]
    for dim, warps in ((256, 1), (400, 4)):  # 1 warp stages 256-long key rows; 400 are not staged
        wide = cuda_executable(compile_str(cases.mlir(
            "by_hand", (1, 2, 3, dim), (1, 2, 5, dim), (1, 2, 5, 24), "f32"), options))
        (export,) = wide.exports
        assert wide.cubin.length > 0 and list(export.blockSize) == [32 * warps, 1, 1]


def test_a_gpt2_blocks_attention_is_one_kernel():
    """tests/models' GPT-2 block (q, k and v sliced from one projection, a causal masked_fill,
    softmax by hand), small: its attention is one kernel and the block PyTorch's in float64."""
    import torch
    from models import definitions
    from pyree.compiler import import_torch

    torch.manual_seed(0)
    model = definitions.gpt2_block(width=16, heads=2, seq=9).eval()
    x = torch.randn(1, 9, 16)
    fused = after_pass(import_torch(model, x), "fuse-attention", **FLOW)
    assert sum(op.attention is not None for op in generics(fused)) == 1
    (got,) = cases.run(fused, [x.numpy()], _emulated)
    with torch.no_grad():
        want = model.double()(x.double()).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_score_whose_operands_both_read_the_key():
    """A product the kernel cannot split into q(row, c) * k(key, c) (here k(key, c)^2): each
    lane computes its key's score from the loads themselves, against the reference semantics
    (37 keys: the partial op of 4 chunks, the last of 7, its keys past the end read nothing)."""
    import dataclasses

    from pyree.compiler import kernel as K
    from pyree.compiler.flow.kernels import outline

    shapes = ((1, 2, 3, 8), (1, 2, 37, 8), (1, 2, 37, 24))
    (op,) = [g for g in generics(after_pass(cases.mlir("sdpa", *shapes, "f32"), "fuse-attention", **FLOW))
             if g.attention is not None and g.attention.partial]
    step = op.attention.score_step
    ((_, term),) = K.fold_pattern((K.Result(0, (), step),))
    key = next(x for x in (term.a, term.b) if any(
        isinstance(n, K.Load) and n.index[2].coeffs[op.num_parallel] for n in K.walk(x)))
    squared = K.Binary("add", K.Acc(0, "f32"), K.Binary("mul", key, key, "f32"), "f32")
    kernel = outline(dataclasses.replace(
        op, attention=dataclasses.replace(op.attention, score_step=squared)), "k")
    rng = np.random.default_rng(13)
    inputs = [rng.standard_normal(b.shape).astype(np.float32) for b in kernel.bindings[:-1]]
    got, want = (np.zeros(kernel.bindings[-1].shape, np.float32) for _ in range(2))
    assert Emulated(kernel)([*inputs, got], [])
    K.evaluate(kernel, [*inputs, want])
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("dtype, queries, heads", [("f32", 9, 4), ("f16", 20, 2)])
def test_grouped_query_attention(dtype, queries, heads):
    """SDPA with enable_gqa (query heads over half as many key/value heads): one attention
    kernel, PyTorch's numbers; f16 with 20 queries on tensor cores. Its K and V are expanded to
    every query head by copies it reads."""
    import torch
    import torch.nn.functional as F
    from pyree.compiler import import_torch

    class Grouped(torch.nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    torch.manual_seed(1)
    half = dtype == "f16"
    q, k, v = (torch.randn(*s).to(torch.float16 if half else torch.float32) for s in (
        (1, heads, queries, 8), (1, heads // 2, queries, 8), (1, heads // 2, queries, 16)))
    fused = after_pass(import_torch(Grouped(), q, k, v), "fuse-attention", **FLOW)
    assert sum(op.attention is not None for op in generics(fused)) == 1
    (got,) = cases.run(fused, [q.numpy(), k.numpy(), v.numpy()],
                       lambda kernel, b: _emulated(kernel, b, tensor_cores=half))
    want = Grouped()(q.double(), k.double(), v.double()).numpy()
    tol = 4e-3 if half else 1e-5
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)
