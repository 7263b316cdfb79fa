"""Two reference decoders in PyTorch that follow pyree's decoder convention (``decoder.py``):
a GPT-2 (learned positions, LayerNorm, GELU MLP, fused QKV) and a LLaMA (RMSNorm, rotary
positions, SwiGLU, grouped-query attention). Their ``state_dict`` names and layouts are Hugging
Face's (``h.0.attn.c_attn.weight`` as a ``[d, 3d]`` Conv1D; ``model.layers.0.self_attn.q_proj``),
so a checkpoint written by ``transformers`` fills them, and pyree's parameter files use the same
keys.

The convention: ``forward(tokens[b, n], start, k_cache, v_cache) -> (logits[b, vocab],
k_cache, v_cache)``. Tokens sit at positions ``start .. start + n - 1``; the caches are
``[layers, b, kv_heads, context, head_dim]`` and come back with those rows written; the logits
are the last position's. Each layer attends over its cache with its new rows selected in
(``write_cache``: rows ``start .. start + n - 1`` from the new keys, the rest kept, a select
rather than ``index_copy_``, so that the forward stays a function of its arguments, which is
what torch.export and pyree compile), and the caches are returned written once, at the end,
for every layer at once by the same select. The select a layer reads is recomputed in its
attention's loads, never stored. (Written per layer and then stacked, the caches were copied
twice a step: 0.12 ms of GPT-2 small's 0.76 ms of decode kernels on the H200.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class DecoderConfig:
    vocab: int
    width: int
    layers: int
    heads: int
    context: int
    kv_heads: int | None = None      # grouped-query attention: fewer key/value heads (LLaMA)
    hidden: int | None = None        # the MLP's width (4 * width for GPT-2)
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.width // self.heads

    @property
    def cache_heads(self) -> int:
        return self.kv_heads or self.heads

    def cache_shape(self, batch: int = 1) -> tuple[int, ...]:
        return (self.layers, batch, self.cache_heads, self.context, self.head_dim)


GPT2_SMALL = DecoderConfig(vocab=50257, width=768, layers=12, heads=12, context=1024)
LLAMA_SMALL = DecoderConfig(vocab=32000, width=768, layers=12, heads=12, kv_heads=4, hidden=2048,
                            context=1024)


def randomize(model: nn.Module, seed: int) -> nn.Module:
    """``model`` with every weight drawn from a normal seeded by ``seed`` (the same on every
    machine), scaled so that a greedy loop wanders over the vocabulary instead of repeating
    one token: what tests and benchmarks run when there is no checkpoint."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:   # norms' gains, biases
                mean, std = (1.0, 0.2) if name.endswith(".weight") else (0.0, 0.1)
            elif "wte" in name or "wpe" in name or "embed" in name:
                mean, std = 0.0, 0.3
            else:
                mean, std = 0.0, 4 / p.shape[0] ** 0.5
            p.copy_(torch.randn(p.shape, generator=generator) * std + mean)
    return model


def write_cache(cache: torch.Tensor, new: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    """``cache`` ``[..., S, d]`` with rows ``start .. start + n - 1`` replaced by ``new``
    ``[..., n, d]``."""
    n, rows = new.shape[-2], torch.arange(cache.shape[-2], device=cache.device)
    offset = rows - start
    inside = (offset >= 0) & (offset < n)
    # One new row (a decode step; a prompt's run-time length is a SymInt, never this) broadcasts:
    # as a gather the select stayed a copy of the cache a layer, where fuse-attention recomputes
    # an elementwise one in the attention's loads.
    one = isinstance(n, int) and n == 1
    picked = new if one else new.index_select(new.dim() - 2, offset.clamp(0, n - 1))
    return torch.where(inside[:, None], picked, cache)


def store_rows(cache: torch.Tensor, new: torch.Tensor, start: torch.Tensor | int) -> torch.Tensor:
    """The cache a step returns: ``write_cache``'s, written as a ``slice_scatter`` at the
    position a decode step reads from its argument (an insert at a run-time offset), which pyree
    compiles as a store of the new rows alone into the argument's bytes where the caller donates
    them (``flow/argument_windows.py``), instead of a pass over the whole cache. A prefill's
    (``start`` int 0) fills an empty cache: the select, as before."""
    if isinstance(start, int):
        return write_cache(cache, new, start)
    first = start.item()
    return cache.slice_scatter(new, cache.dim() - 2, first, first + new.shape[-2])


def attend(q: torch.Tensor, k_old: torch.Tensor, v_old: torch.Tensor, k_new: torch.Tensor,
           v_new: torch.Tensor, start: torch.Tensor | int) -> torch.Tensor:
    """Causal attention of the queries at positions ``start ..`` over the cache with the new
    rows written in (``write_cache``), each query up to its own position; keys and values may
    have fewer heads than the queries (grouped). One softmax over one set of keys is the form
    fuse-attention makes one op of (two kernels on a GPU; over the old rows and the new ones
    apart it was seven a layer). A ``start`` of int 0 (a prefill, ``decoder.py``) says that no
    row comes before the prompt: only the new rows are read, where a tensor 0 would attend over
    every row of the cache, masked (half a 1024-token prefill's attention work, all of it
    discarded)."""
    if isinstance(start, int) and start == 0:
        k, v, first = k_new, v_new, 0
    else:
        k, v, first = write_cache(k_old, k_new, start), write_cache(v_old, v_new, start), start
    b, heads, n, d = q.shape
    groups, keys = heads // k.shape[1], k.shape[2]
    positions = torch.arange(n, device=q.device) + first
    if groups > 1 and isinstance(n, int):
        # grouped, a static number of queries (a decode step): the query heads that share a key
        # head are that head's rows, so k and v are not copied per query head (torch.export
        # cannot fold a prompt's run-time length into rows so; a prefill repeats its new rows)
        q, positions = q.reshape(b, k.shape[1], groups * n, d), positions.repeat(groups)
    elif groups > 1:
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    later = torch.arange(keys, device=q.device)[None, :] > positions[:, None]
    s = (q @ k.transpose(-1, -2) * (1.0 / math.sqrt(d))).masked_fill(later, float("-inf"))
    return (s.softmax(-1) @ v).reshape(b, heads, n, d)


class Conv1D(nn.Module):
    """Hugging Face's GPT-2 linear layer: ``x @ weight + bias`` with ``weight`` ``[in, out]``."""

    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_in, n_out) * 0.02)
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return x @ self.weight + self.bias


class GPT2Attention(nn.Module):
    def __init__(self, c: DecoderConfig):
        super().__init__()
        self.c = c
        self.c_attn = Conv1D(c.width, 3 * c.width)
        self.c_proj = Conv1D(c.width, c.width)

    def forward(self, x, start, k_cache, v_cache):
        b, n, _ = x.shape
        c = self.c
        q, k, v = (t.view(b, n, c.heads, c.head_dim).transpose(1, 2)
                   for t in self.c_attn(x).split(c.width, dim=-1))
        y = attend(q, k_cache, v_cache, k, v, start).transpose(1, 2).reshape(b, n, c.width)
        return self.c_proj(y), k, v


class GPT2MLP(nn.Module):
    def __init__(self, c: DecoderConfig):
        super().__init__()
        self.c_fc = Conv1D(c.width, c.hidden or 4 * c.width)
        self.c_proj = Conv1D(c.hidden or 4 * c.width, c.width)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(nn.Module):
    def __init__(self, c: DecoderConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.width, eps=c.norm_eps)
        self.attn = GPT2Attention(c)
        self.ln_2 = nn.LayerNorm(c.width, eps=c.norm_eps)
        self.mlp = GPT2MLP(c)

    def forward(self, x, start, k_cache, v_cache):
        """``x`` after the block, and the layer's new keys and values ``[b, heads, n, d]``."""
        a, k, v = self.attn(self.ln_1(x), start, k_cache, v_cache)
        x = x + a
        return x + self.mlp(self.ln_2(x)), k, v


class GPT2(nn.Module):
    """GPT-2 with its LM head tied to the token embedding (no ``lm_head`` key)."""

    def __init__(self, c: DecoderConfig = GPT2_SMALL):
        super().__init__()
        self.config = c
        self.wte = nn.Embedding(c.vocab, c.width)
        self.wpe = nn.Embedding(c.context, c.width)
        self.h = nn.ModuleList(GPT2Block(c) for _ in range(c.layers))
        self.ln_f = nn.LayerNorm(c.width, eps=c.norm_eps)

    def forward(self, tokens, start, k_cache, v_cache):
        x = self.wte(tokens) + self.wpe(start + torch.arange(tokens.shape[1], device=tokens.device))
        ks, vs = [], []
        for i, block in enumerate(self.h):
            x, k, v = block(x, start, k_cache[i], v_cache[i])
            ks.append(k)
            vs.append(v)
        logits = self.ln_f(x[:, -1]) @ self.wte.weight.t()
        return (logits, store_rows(k_cache, torch.stack(ks), start),
                store_rows(v_cache, torch.stack(vs), start))


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x):
        wide = x.float()
        wide = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * wide.to(x.dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary positions as Hugging Face's LLaMA applies them (halves, not interleaved pairs)."""
    half = x.shape[-1] // 2
    turned = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + turned * sin


class LlamaAttention(nn.Module):
    def __init__(self, c: DecoderConfig):
        super().__init__()
        self.c = c
        self.q_proj = nn.Linear(c.width, c.heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.width, c.cache_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.width, c.cache_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.heads * c.head_dim, c.width, bias=False)

    def forward(self, x, cos, sin, start, k_cache, v_cache):
        b, n, _ = x.shape
        c = self.c
        q = self.q_proj(x).view(b, n, c.heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, n, c.cache_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, n, c.cache_heads, c.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        y = attend(q, k_cache, v_cache, k, v, start).transpose(1, 2).reshape(b, n, c.width)
        return self.o_proj(y), k, v


class LlamaMLP(nn.Module):
    def __init__(self, c: DecoderConfig):
        super().__init__()
        hidden = c.hidden or 4 * c.width
        self.gate_proj = nn.Linear(c.width, hidden, bias=False)
        self.up_proj = nn.Linear(c.width, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, c.width, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(nn.Module):
    def __init__(self, c: DecoderConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(c.width, c.norm_eps)
        self.self_attn = LlamaAttention(c)
        self.post_attention_layernorm = RMSNorm(c.width, c.norm_eps)
        self.mlp = LlamaMLP(c)

    def forward(self, x, cos, sin, start, k_cache, v_cache):
        """``x`` after the layer, and its new keys and values ``[b, kv_heads, n, d]``."""
        a, k, v = self.self_attn(self.input_layernorm(x), cos, sin, start, k_cache, v_cache)
        x = x + a
        return x + self.mlp(self.post_attention_layernorm(x)), k, v


class _LlamaModel(nn.Module):
    def __init__(self, c: DecoderConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab, c.width)
        self.layers = nn.ModuleList(LlamaLayer(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.width, c.norm_eps)


class Llama(nn.Module):
    def __init__(self, c: DecoderConfig = LLAMA_SMALL):
        super().__init__()
        self.config = c
        self.model = _LlamaModel(c)
        self.lm_head = nn.Linear(c.width, c.vocab, bias=False)

    def forward(self, tokens, start, k_cache, v_cache):
        # the angles are computed per call (n x head_dim / 2 of them), not kept as a buffer: a
        # buffer outside the state_dict is a constant torch-mlir's importer cannot look up
        c = self.config
        device = tokens.device
        inverse = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, device=device).float()
                                          / c.head_dim))
        angles = (start + torch.arange(tokens.shape[1], device=device)).float()[:, None] * inverse
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos().to(k_cache.dtype), angles.sin().to(k_cache.dtype)
        x = self.model.embed_tokens(tokens)
        ks, vs = [], []
        for i, layer in enumerate(self.model.layers):
            x, k, v = layer(x, cos, sin, start, k_cache[i], v_cache[i])
            ks.append(k)
            vs.append(v)
        logits = self.lm_head(self.model.norm(x[:, -1]))
        return (logits, store_rows(k_cache, torch.stack(ks), start),
                store_rows(v_cache, torch.stack(vs), start))
