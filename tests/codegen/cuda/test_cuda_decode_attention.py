"""A decode step's attention on cuda, its kernels run here on the CPU (nvptx_on_cpu.py) against
numpy, special values included, in the two forms a program writes it:

- pyree's decoders' (``models.attend``, docs/LLM.md): one softmax over the cache with the step's
  row selected in at its position, later rows masked. fuse-attention makes one op of it, the
  select recomputed in its loads (no copy of the cache), and flash-decoding splits its keys:
  two kernels. Grouped queries (LLaMA) attend as rows of their shared key head.
- the scores over the cache and over the step's own row joined, one softmax, the probabilities
  split again into P·V over the cache plus p·v over the new row. fuse-attention does not take
  this form, so the P·V it kept whole is split by ``split-unfused-products`` like any long
  matrix-vector product (whole, it ran on one block per head: 6 us of GPT-2's 12-head step
  over 1024 keys on the H200)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from tooling import require_module

require_module("llvmlite")
torch = require_module("torch")
require_module("torch_mlir")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from nvptx_on_cpu import run_program  # noqa: E402
from pyree.compiler.llm.models import attend  # noqa: E402


class TwoPart(torch.nn.Module):
    def forward(self, q, k_cache, v_cache, k_new, v_new):
        n = k_cache.shape[-2]
        s = torch.cat([q @ k_cache.transpose(-1, -2), q @ k_new.transpose(-1, -2)], -1) * 0.25
        p = torch.softmax(s.float(), -1).to(q.dtype)
        return p[..., :n] @ v_cache + p[..., n:] @ v_new


def _program(heads: int, keys: int, d: int, dtype) -> tuple[str, list[np.ndarray]]:
    from pyree.compiler import import_torch
    rng = np.random.default_rng(keys)
    shapes = [(1, heads, 1, d), (1, heads, keys, d), (1, heads, keys, d), (1, heads, 1, d),
              (1, heads, 1, d)]
    args = [rng.standard_normal(s).astype(dtype) for s in shapes]
    args[2].reshape(-1)[::97] = 0.0
    args[2].reshape(-1)[5::101] = -0.0
    args[1][0, 0, 3] = 40.0  # one key far ahead of the rest: its probability near 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = import_torch(TwoPart(), *map(torch.from_numpy, args))
    return text, args


def _reference(q, kc, vc, kn, vn) -> np.ndarray:
    q, kc, vc, kn, vn = (a.astype(np.float64) for a in (q, kc, vc, kn, vn))
    s = np.concatenate([q @ kc.swapaxes(-1, -2), q @ kn.swapaxes(-1, -2)], -1) * 0.25
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    n = kc.shape[-2]
    return p[..., :n] @ vc + p[..., n:] @ vn


@pytest.mark.parametrize("heads,keys,d,dtype", [(2, 384, 16, np.float16), (3, 640, 8, np.float32)])
def test_two_part_decode_attention_matches_numpy(heads, keys, d, dtype):
    text, args = _program(heads, keys, d, dtype)
    got = run_program(text, args, attention=True).astype(np.float64)
    want = _reference(*args)
    tol = 2e-2 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def _flow_ops(text: str) -> list:
    from pyree.compiler.flow.passes import flow_passes, run_flow
    from pyree.compiler.input import parse_mlir
    from pyree.compiler.input.lowering import lower_to_tensor_program

    program = lower_to_tensor_program(parse_mlir(text, "program.mlir"))
    return run_flow(program, flow_passes(gpu=True, implicit_gemm=True, attention=True)).functions[0].ops


@pytest.mark.parametrize("keys", [384, 4224])
def test_the_cache_product_is_whole_or_split_by_its_column(keys):
    """After the flow of a cuda module, P·V over the cached rows reads the probabilities where
    the softmax wrote them (rows of keys + 1): whole where a column of the cache is at most
    GPU_VECTOR_WHOLE_BYTES (384 f16 keys: the matrix-vector template fills the GPU alone),
    else a partial fold (K in chunks) and its final fold."""
    from pyree.compiler.flow.split_reduction import GPU_VECTOR_WHOLE_BYTES
    from pyree.compiler.tensor_program import Generic

    text, _ = _program(2, keys, 16, np.float16)
    ops = _flow_ops(text)
    reads = [op for op in ops if isinstance(op, Generic)
             and (2, keys, 16) in {v.shape for v in op.inputs} and op.num_parallel < len(op.loop_ranges)]
    assert len(reads) == 1
    product = reads[0]
    assert {v.shape for v in product.inputs} == {(1, 2, 1, keys + 1), (2, keys, 16)}
    if keys * 2 <= GPU_VECTOR_WHOLE_BYTES:
        assert "partial folds" not in product.origin and product.loop_ranges[-1] == keys
    else:
        assert "partial folds" in product.origin
        assert product.loop_ranges[0] > 1 and product.loop_ranges[-1] * product.loop_ranges[0] == keys


class DecoderStep(torch.nn.Module):
    def forward(self, q, k_cache, v_cache, k_new, v_new, position):
        return attend(q, k_cache, v_cache, k_new, v_new, position)


def _decoder_step(heads: int, kv_heads: int, keys: int, d: int, dtype, position: int):
    from pyree.compiler import import_torch
    rng = np.random.default_rng(keys + position)
    shapes = [(1, heads, 1, d), (1, kv_heads, keys, d), (1, kv_heads, keys, d),
              (1, kv_heads, 1, d), (1, kv_heads, 1, d)]
    args = [rng.standard_normal(s).astype(dtype) for s in shapes]
    args[2].reshape(-1)[::97] = 0.0
    args[2].reshape(-1)[5::101] = -0.0
    args[1][0, 0, max(position - 3, 0)] = 8.0   # one earlier key far ahead of the rest
    args[1][0, -1, keys - 1] = np.nan           # past the position (unless it is the last row):
    args[2][0, -1, keys - 1] = np.inf           # masked, and overwritten where it is the row
    args.append(np.array(position, np.int64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = import_torch(DecoderStep(), *map(torch.from_numpy, args))
    return text, args


def _decoder_reference(q, kc, vc, kn, vn, position) -> np.ndarray:
    """The cache with the new row written at ``position``, keys after it masked (their scores
    -inf even where NaN, as masked_fill makes them; a masked infinite value still gives 0 * inf,
    NaN, as PyTorch's product does), per query head its key head (h // groups)."""
    q, kc, vc, kn, vn = (a.astype(np.float64) for a in (q, kc, vc, kn, vn))
    k, v = kc.copy(), vc.copy()
    k[:, :, position], v[:, :, position] = kn[:, :, 0], vn[:, :, 0]
    groups = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, groups, axis=1), np.repeat(v, groups, axis=1)
    with np.errstate(invalid="ignore"):
        s = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
        s[..., position + 1:] = -np.inf
        p = np.exp(s - s.max(-1, keepdims=True))
        return (p / p.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("heads,kv_heads,keys,d,dtype,position", [
    (2, 2, 1024, 64, np.float32, 700),    # GPT-2's chunks and head width: 8 chunks of 128
    (2, 2, 1024, 64, np.float16, 1023),   # the last row: its NaN key and inf value replaced
    (4, 2, 384, 16, np.float32, 0),       # grouped queries, only the new row attended
    (3, 1, 640, 8, np.float16, 131),
    (2, 1, 1021, 16, np.float32, 1020),   # a prime count: 7 chunks of 146, the last of 145
])
def test_the_decoders_step_attention_matches_numpy(heads, kv_heads, keys, d, dtype, position):
    text, args = _decoder_step(heads, kv_heads, keys, d, dtype, position)
    got = run_program(text, args, attention=True).astype(np.float64)
    want = _decoder_reference(*args)
    with torch.no_grad():  # PyTorch's own answer in f64 agrees, NaN rows included
        torch_f64 = DecoderStep()(*(torch.from_numpy(a if a.dtype == np.int64 else
                                                     a.astype(np.float64)) for a in args))
    np.testing.assert_allclose(want, torch_f64.numpy(), rtol=1e-9, atol=1e-9)
    finite = position == args[1].shape[2] - 1   # the masked infinite value replaced
    assert np.isfinite(got).all() == finite and np.isnan(got).any() != finite
    tol = 2e-2 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("keys, chunks, chunk", [(1024, 8, 128), (1025, 5, 205), (1021, 7, 146),
                                                  (255, 1, 255)])
def test_keys_split_in_chunks_that_divide_them_else_with_a_short_last(keys, chunks, chunk):
    """Chunks that divide the keys where they make at least half the blocks wanted; a count
    they do not divide well (a prime) in equal chunks and a shorter last, whose keys past the
    end read nothing (their loads under a Select); fewer than two chunks' worth stays whole."""
    from pyree.compiler.kernel import Compare, Const, Select, walk
    from pyree.compiler.tensor_program import Generic

    text, _ = _decoder_step(2, 2, keys, 16, np.float16, 9)
    generics = [op for op in _flow_ops(text) if isinstance(op, Generic) and op.attention is not None]
    (att,) = [op for op in generics if op.attention.partial or chunks == 1]
    e = att.attention.e
    assert (att.loop_ranges[e - 1] if chunks > 1 else 1, att.loop_ranges[e + 1]) == (chunks, chunk)
    guarded = any(isinstance(x, Select) and isinstance(x.cond, Compare)
                  and x.cond.b == Const(keys, "index") for x in walk(att.attention.score))
    assert guarded == (chunks * chunk > keys)


@pytest.mark.parametrize("kv_heads", [2, 1])
def test_the_decoders_step_attention_is_one_op_split_over_keys(kv_heads):
    """fuse-attention takes the decoders' form whole: one partial attention op over chunks of
    the keys that reads the cache and the new row themselves (the select recomputed in its
    loads, no copy of the cache; grouped queries without a copy per query head) and the row
    kernel that combines the chunks; nothing else reads the cache."""
    from pyree.compiler.tensor_program import Generic

    text, args = _decoder_step(2, kv_heads, 1024, 64, np.float16, 9)
    generics = [op for op in _flow_ops(text) if isinstance(op, Generic)]
    partial = [op for op in generics if op.attention is not None and op.attention.partial]
    assert len(partial) == 1, [op.origin for op in generics]
    cache = {(1, kv_heads, 1024, 64), (kv_heads, 1024, 64)}
    readers = [op for op in generics if any(v.shape in cache for v in op.inputs)]
    assert readers == partial, [op.origin for op in readers]
    assert len(generics) <= 3, [op.origin for op in generics]
