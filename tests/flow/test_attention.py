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


def test_a_language_models_decode_step_is_one_attention():
    """pyree.compiler.llm's GPT-2 in f16 at decode (one query over the cache with its new row
    written in): the reshapes fold the one-query loop into the heads' index (``heads + query``), a loop
    of one step that the match reads as 0, so each layer's attention is one op (split over the
    keys). The numbers are checked where it runs: the fused op's own tests above, and the
    decode bench's tokens against PyTorch's on the GPU (bench/gpu/llm_decode.py)."""
    import torch
    from pyree.compiler.flow.passes import run_passes
    from pyree.compiler.input import import_mlir
    from pyree.compiler.llm.decoder import export_decoder
    from pyree.compiler.llm.models import GPT2, DecoderConfig
    torch.manual_seed(0)
    model = GPT2(DecoderConfig(vocab=11, width=32, layers=2, heads=4, context=40)).half().eval()
    decode = next(f for f in import_mlir(export_decoder(model), "t.mlir").functions
                  if f.name == "decode")
    fused = run_passes(decode, flow_passes(True, True, attention=True))
    assert sum(op.attention is not None for op in generics(fused)) == 2  # one per layer
