"""Attention programs as PyTorch writes them, imported through torch-mlir at small odd shapes,
with a float64 numpy reference: what tests/flow/test_attention.py matches and the cuda tests
run (``fuse-attention``, flow/attention.py)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

KINDS = ("causal", "sdpa_mask", "sdpa", "by_hand")


def _module(kind: str, extra: str = ""):
    import torch
    import torch.nn.functional as F

    class Attention(torch.nn.Module):
        def forward(self, q, k, v, *mask):
            if kind == "causal":
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
            if kind == "sdpa_mask":
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[0])
            if kind == "sdpa":
                return F.scaled_dot_product_attention(q, k, v)
            s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5 + mask[0]  # by hand
            p = torch.softmax(s, dim=-1)
            o = p @ v
            return {"": o, "scores": (o, s), "probabilities": (o, p)}[extra]
    return Attention()


def inputs(kind: str, q_shape, k_shape, v_shape, dtype: str, rng) -> list[np.ndarray]:
    """Fresh q, k, v (and the mask the kind takes: boolean for SDPA, additive by hand, with
    one row masked whole where the kind lets a row be)."""
    import ml_dtypes
    np_dtype = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}[dtype]
    out = [rng.standard_normal(s).astype(np_dtype) for s in (q_shape, k_shape, v_shape)]
    mask_shape = (1, 1, q_shape[2], k_shape[2])
    if kind == "sdpa_mask":
        mask = rng.random(mask_shape) < 0.7
        if q_shape[2] > 1:
            mask[..., 1, :] = False  # a row masked whole
        out.append(mask)
    elif kind == "by_hand":
        mask = np.where(rng.random(mask_shape) < 0.7, 0.0, -np.inf).astype(np_dtype)
        out.append(mask)
    return out


def reference(kind: str, args: list[np.ndarray]) -> np.ndarray:
    """float64 attention as PyTorch defines it (SDPA's fully masked row: 0)."""
    q, k, v = (a.astype(np.float64) for a in args[:3])
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if kind == "causal":
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    elif kind == "sdpa_mask":
        s = np.where(args[3], s, -np.inf)
    elif kind == "by_hand":
        s = s + args[3].astype(np.float64)
    with np.errstate(invalid="ignore"):
        m = s.max(-1, keepdims=True)
        p = np.exp(s - m)
        p = p / p.sum(-1, keepdims=True)
    if kind.startswith("sdpa") or kind == "causal":
        p = np.where(np.isneginf(s).all(-1, keepdims=True), 0.0, p)
    return p @ v.astype(np.float64)


MLIR_CACHE = "PYREE_TEST_ATTENTION_MLIR"  # a folder of imported programs (a GPU host lacks torch-mlir)


@functools.cache
def mlir(kind: str, q_shape, k_shape, v_shape, dtype: str, extra: str = "") -> str:
    """The program imported from PyTorch, or read from the folder ``$PYREE_TEST_ATTENTION_MLIR``
    names (written there when torch-mlir is present): the GPU host runs what the build machine
    imported."""
    import os
    import re
    folder = os.environ.get(MLIR_CACHE)
    key = re.sub(r"[^0-9a-zA-Z]+", "_", f"{kind} {q_shape} {k_shape} {v_shape} {dtype} {extra}")
    cached = Path(folder) / f"{key}.mlir" if folder else None
    if cached is not None and cached.exists():
        return cached.read_text()
    text = _imported(kind, q_shape, k_shape, v_shape, dtype, extra)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(text)
    return text


@functools.cache
def run_time_mlir(kind: str, heads: int, depth: int, width: int, dtype: str) -> str:
    """``kind`` over a sequence of run-time length (torch.export's ``Dim``): q, k and v of
    shape [1, heads, T, depth (width for v)], the mask [1, 1, T, T]; a prompt's prefill. Read
    from ``$PYREE_TEST_ATTENTION_MLIR`` as ``mlir`` is."""
    import os
    folder = os.environ.get(MLIR_CACHE)
    cached = Path(folder) / f"run_time_{kind}_{heads}_{depth}_{width}_{dtype}.mlir" if folder else None
    if cached is not None and cached.exists():
        return cached.read_text()
    import torch
    from pyree.compiler.importers.torch import import_torch

    t = 5
    args = [torch.from_numpy(np.asarray(a.astype(np.float32))).to(
        {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype])
        if a.dtype != np.bool_ else torch.from_numpy(a)
        for a in inputs(kind, (1, heads, t, depth), (1, heads, t, depth), (1, heads, t, width),
                        dtype, np.random.default_rng(0))]
    seq = torch.export.Dim("seq", min=1, max=4096)
    dims = ({2: seq},) * 3 + ((({2: seq, 3: seq},),) if len(args) == 4 else ())  # *mask: a tuple
    text = import_torch(_module(kind), *args, dynamic_shapes=dims)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(text)
    return text


def _imported(kind: str, q_shape, k_shape, v_shape, dtype: str, extra: str) -> str:
    import torch
    from pyree.compiler.importers.torch import import_torch

    rng = np.random.default_rng(0)
    args = [torch.from_numpy(np.asarray(a.astype(np.float32))).to(
        {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype])
        if a.dtype != np.bool_ else torch.from_numpy(a)
        for a in inputs(kind, q_shape, k_shape, v_shape, dtype, rng)]
    return import_torch(_module(kind, extra), *args)


def run(function, args: list[np.ndarray], kernel=None) -> list[np.ndarray]:
    """``function`` (after flow) on ``args``: constants, views, and each Generic outlined as a
    kernel and run by ``kernel(kernel, buffers)``, ``kernel.evaluate`` where that is None (the
    reference semantics of the kernel IR, the chain's as much as the fused op's)."""
    from pyree.compiler.flow.kernels import outline
    from pyree.compiler.kernel import DTYPES, evaluate
    from pyree.compiler.tensor_program import Constant, View

    env = dict(zip(function.arguments, args))
    for op in function.ops:
        if isinstance(op, Constant):
            env[op.result] = np.full(op.result.shape, op.splat, DTYPES[op.result.dtype]) \
                if op.data is None else op.data.reshape(op.result.shape)
        elif isinstance(op, View):
            flat = np.array(env[op.source], order="C").reshape(-1)
            start = op.byte_offset // flat.itemsize
            env[op.result] = flat[start:start + int(np.prod(op.result.shape))].reshape(op.result.shape)
        else:
            outs = [np.zeros(v.shape, DTYPES[v.dtype]) for v in op.results]
            buffers = [np.array(env[v], order="C") for v in op.inputs] + outs
            (kernel or evaluate)(outline(op, "k"), buffers)
            env.update(zip(op.results, outs))
    return [env[v] for v in function.results]
