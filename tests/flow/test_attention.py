"""fuse-attention (flow/attention.py): the score contraction, softmax row kernel and P·V
contraction are one attention op, matched by structure in PyTorch's SDPA decompositions
(causal, a boolean mask, no mask) and in softmax(q @ k.T * s + mask) @ v written by hand, at odd
shapes where heads and batch merge into one batch loop; the op's reference semantics give
PyTorch's numbers in float64. Where the scores or probabilities have another reader, the chain
stays. Only targets that declare the capability run the pass."""

from __future__ import annotations

import attention_cases as cases
import numpy as np
import pytest
from pass_runs import after_pass, generics
from tooling import require_module

require_module("torch")
require_module("torch_mlir")

from pyree.compiler.codegen import backend  # noqa: E402
from pyree.compiler.flow.passes import flow_passes  # noqa: E402

SHAPES = ((2, 3, 5, 8), (2, 3, 13, 8), (2, 3, 13, 6))  # (b, h, M, d), (b, h, T, d), (b, h, T, e)


def _fused(mlir: str):
    return after_pass(mlir, "fuse-attention", gpu=True, implicit_gemm=True, attention=True)


@pytest.mark.parametrize("kind", cases.KINDS)
def test_the_chain_is_one_attention_op_with_pytorchs_numbers(kind):
    function = _fused(cases.mlir(kind, *SHAPES, "f32"))
    (op,) = generics(function)
    assert op.attention is not None and op.origin == "attention"
    assert op.attention.masked_zero == (kind != "by_hand")  # SDPA's select of 0, not the hand's
    args = cases.inputs(kind, *SHAPES, "f32", np.random.default_rng(7))
    (got,) = cases.run(function, args)
    want = cases.reference(kind, args)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


def test_probabilities_rounded_to_half_precision_before_the_product():
    """Hand-written f16 softmax attention: P is stored as f16 and widened for P·V; the op
    rounds its probabilities the same way."""
    function = _fused(cases.mlir("by_hand", *SHAPES, "f16"))
    (op,) = generics(function)
    assert op.attention.p_dtype == "f16"
    args = cases.inputs("by_hand", *SHAPES, "f16", np.random.default_rng(10))
    (got,) = cases.run(function, args)
    np.testing.assert_allclose(got.astype(np.float64), cases.reference("by_hand", args),
                               rtol=3e-3, atol=3e-3)


def test_half_precision_rounds_the_result_once():
    """f16 SDPA: the scale and widening fuse into the op's reads, and the rounding of its f32
    result to f16 (an op of its own after the batch matmul's view) into its epilogue."""
    function = _fused(cases.mlir("sdpa_mask", *SHAPES, "f16"))
    (op,) = generics(function)
    assert op.attention is not None and op.results[0].dtype == "f16"
    args = cases.inputs("sdpa_mask", *SHAPES, "f16", np.random.default_rng(8))
    (got,) = cases.run(function, args)
    np.testing.assert_allclose(got.astype(np.float64), cases.reference("sdpa_mask", args),
                               rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("extra", ["scores", "probabilities"])
def test_scores_or_probabilities_read_elsewhere_keep_the_chain(extra):
    function = _fused(cases.mlir("by_hand", *SHAPES, "f32", extra))
    assert not any(op.attention is not None for op in generics(function))
    assert len(generics(function)) >= 3


def test_only_targets_that_compile_attention_run_the_pass():
    assert backend("cuda").fused_attention
    for name in ("llvm-cpu", "vulkan-spirv", "rocm"):
        assert not backend(name).fused_attention, name
    assert "fuse-attention" not in [p.name for p in flow_passes(gpu=True, implicit_gemm=True)]


def test_few_long_rows_split_their_keys_over_blocks():
    """A decode step (one query, 12 rows) over 512 keys: a partial op per chunk of keys and the
    row kernel combining them (flash-decoding), PyTorch's numbers, a row masked whole included."""
    shapes = ((1, 2, 1, 8), (1, 2, 512, 8), (1, 2, 512, 6))
    function = _fused(cases.mlir("sdpa_mask", *shapes, "f32"))
    partial, combine = generics(function)
    assert partial.attention.partial and combine.attention is None
    assert partial.loop_ranges == (2, 4, 6, 128, 8) and combine.loop_ranges == (2, 6, 4)
    args = cases.inputs("sdpa_mask", *shapes, "f32", np.random.default_rng(9))
    for mask in (args[3], np.zeros_like(args[3])):
        (got,) = cases.run(function, [*args[:3], mask])
        np.testing.assert_allclose(got, cases.reference("sdpa_mask", [*args[:3], mask]),
                                   rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_an_unmasked_decode_step_is_one_attention(dtype):
    """SDPA without a mask for one query: region formation leaves the row max in a kernel of
    its own, read through views with the query's unit dim dropped; it is taken into the softmax,
    and the op, whose heads are no query rows sharing keys, splits its keys (flash-decoding)."""
    shapes = ((1, 3, 1, 8), (1, 3, 512, 8), (1, 3, 512, 6))
    function = _fused(cases.mlir("sdpa", *shapes, dtype))
    partial, combine = generics(function)
    assert partial.attention.partial and combine.attention is None
    args = cases.inputs("sdpa", *shapes, dtype, np.random.default_rng(11))
    args[1][0, 1, 7, 2] = np.inf  # a +inf score: that head's row is NaN, as in PyTorch
    (got,) = cases.run(function, args)
    want = cases.reference("sdpa", args)
    assert np.isnan(got[0, 1]).all() and np.isnan(want[0, 1]).all()
    tol = 2e-6 if dtype == "f32" else 2e-3
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("grouped", [False, True], ids=["gpt2", "llama"])
def test_a_decoders_step_is_one_attention_a_layer(grouped):
    """pyree.compiler.llm's decoders in f16 at decode (models.attend: each layer's cache with
    the new row selected in, one masked softmax over it): the reshapes fold the one-query loop
    into the heads' index (``heads + query``), a loop of one step that the match reads as 0, and
    the select is an elementwise producer the op recomputes, so each layer's attention is one op.
    LLaMA's grouped queries are rows of their key head. (Over the old rows and the new one
    apart, as the decoders attended before, it stayed a chain of seven kernels a layer.)"""
    import torch
    from pyree.compiler.flow.passes import run_passes
    from pyree.compiler.input import import_mlir
    from pyree.compiler.llm import models
    from pyree.compiler.llm.decoder import export_decoder
    torch.manual_seed(0)
    cls, extra = (models.Llama, dict(kv_heads=2, hidden=48)) if grouped else (models.GPT2, {})
    model = cls(models.DecoderConfig(vocab=11, width=32, layers=2, heads=4, context=40,
                                     **extra)).half().eval()
    decode = next(f for f in import_mlir(export_decoder(model), "t.mlir").functions
                  if f.name == "decode")
    fused = run_passes(decode, flow_passes(True, True, attention=True))
    assert sum(op.attention is not None for op in generics(fused)) == 2  # one per layer


def test_large_problems_keep_the_chain():
    """Beyond MAX_SCORES (rows x keys) the SIMT template loses to the chain (flow/attention.py),
    so f32 keeps it; f16 and bf16 prefill fuse whatever the size (the tensor-core template)."""
    from pyree.compiler.flow.attention import MAX_SCORES
    shapes = ((1, 4, 600, 8), (1, 4, 600, 8), (1, 4, 600, 8))
    assert 4 * 600 * 600 > MAX_SCORES
    function = _fused(cases.mlir("causal", *shapes, "f32"))
    assert not any(op.attention is not None for op in generics(function))
    for dtype in ("f16", "bf16"):
        function = _fused(cases.mlir("causal", *shapes, dtype))
        assert [op.attention is not None for op in generics(function)] == [True], dtype


def test_prefill_on_tensor_cores_keeps_its_keys_whole():
    """Few rows over many keys, f16 with 16 queries a head: one op, not flash-decoding's two
    (its partial op would run on the SIMT kernel); with 15 queries the keys split."""
    for queries, ops in ((16, 1), (15, 2)):
        shapes = ((1, 2, queries, 8), (1, 2, 1024, 8), (1, 2, 1024, 8))
        function = _fused(cases.mlir("sdpa_mask", *shapes, "f16"))
        assert len(generics(function)) == ops, queries
