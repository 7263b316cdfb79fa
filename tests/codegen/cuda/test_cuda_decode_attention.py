"""A decode step's attention as pyree's decoders write it (docs/LLM.md): the scores over the
cache and over the step's own row joined, one softmax, and the probabilities split again into
P·V over the cache plus p·v over the new row. fuse-attention does not take this form, so the
P·V it kept whole is split by ``split-unfused-products`` like any long matrix-vector product
(whole, it ran on one block per head: 6 us of GPT-2's 12-head step over 1024 keys on the H200).
The cuda module's kernels run here on the CPU (nvptx_on_cpu.py) against numpy, special values
included, and the flow is checked to have split that product."""

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


def test_the_cache_product_is_split():
    """After the flow of a cuda module, P·V over the 384 cached rows is a partial fold (K in
    chunks, as split-reductions splits a matrix-vector product) and its final fold, and each
    reads the probabilities where the softmax wrote them (rows of 385)."""
    from pyree.compiler.flow.passes import flow_passes, run_flow
    from pyree.compiler.input import parse_mlir
    from pyree.compiler.input.lowering import lower_to_tensor_program
    from pyree.compiler.tensor_program import Generic

    text, _ = _program(2, 384, 16, np.float16)
    program = lower_to_tensor_program(parse_mlir(text, "program.mlir"))
    ops = run_flow(program, flow_passes(gpu=True, implicit_gemm=True, attention=True)).functions[0].ops
    partials = [op for op in ops if isinstance(op, Generic) and "partial folds" in op.origin]
    assert len(partials) == 1
    partial = partials[0]
    assert partial.loop_ranges[0] > 1 and partial.loop_ranges[-1] * partial.loop_ranges[0] == 384
    assert {v.shape for v in partial.inputs} == {(1, 2, 1, 385), (2, 384, 16)}
