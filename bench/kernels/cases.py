"""Issue 11's kernel benchmark cases: single ops and short fused chains with shapes taken from real
models (BERT-base, GPT-2, LLaMA-7B, ResNet-18/50, MobileNet v2) plus odd and skinny sizes, in f32,
f16 and bf16. Each case is a plain torch function of its inputs; weights are inputs too, so pyree's
module and PyTorch eager see the same tensors and neither folds constants.

f16/bf16 matmuls, batch matmuls and convs accumulate in f32 on both sides, as cuBLAS/cuDNN do
(run_suite.py turns off their reduced-precision split-K reductions and TF32): torch-mlir makes the
f32 accumulator explicit, a ``linalg.matmul``/``batch_matmul``/``conv_2d_nchw_fchw`` of f16 or
bf16 operands into an f32 tensor, then ``arith.truncf``; a bf16 ``F.linear`` (aten.addmm) instead
extends its operands to f32 and multiplies in f32.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
DTYPE_NAMES = {f32: "f32", f16: "f16", bf16: "bf16", torch.bool: "i1", torch.int64: "i64",
               torch.int32: "i32", torch.uint8: "ui8"}


@dataclass(frozen=True)
class Input:
    """One argument: ``randn`` values, ``positive`` ones in [0.5, 1.5) (variances), a random
    ``mask`` (half set, 0 or 1), or ``index:N``, integers drawn from [0, N)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    fill: str = "randn"

    def make(self, generator: torch.Generator, device: str) -> torch.Tensor:
        if self.fill == "mask":
            return (torch.rand(self.shape, generator=generator) < 0.5).to(device, self.dtype)
        if self.fill.startswith("index:"):
            high = int(self.fill.split(":")[1])
            return torch.randint(0, high, self.shape, generator=generator).to(device, self.dtype)
        if self.fill == "positive":
            x = torch.rand(self.shape, generator=generator) + 0.5
        else:
            x = torch.randn(self.shape, generator=generator)
        return x.to(device=device, dtype=self.dtype)

    @property
    def spelling(self) -> str:
        return "x".join([*map(str, self.shape), DTYPE_NAMES[self.dtype]])


@dataclass(frozen=True)
class Case:
    name: str  # where the shape comes from, for people
    fn: Callable[..., torch.Tensor]
    inputs: tuple[Input, ...]

    @property
    def key(self) -> str:
        """The name as a file name: ``bert_base_qkv_f16_128x768_768x2304``."""
        return re.sub(r"[^0-9a-zA-Z]+", "_", self.name).strip("_").lower()

    def module(self) -> torch.nn.Module:
        """The function as the nn.Module that the torch importer takes."""
        return _Wrap(self.fn)

    def make_inputs(self, seed: int, device: str) -> list[torch.Tensor]:
        generator = torch.Generator().manual_seed(seed)
        return [i.make(generator, device) for i in self.inputs]


class _Wrap(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _ins(*specs) -> tuple[Input, ...]:
    return tuple(s if isinstance(s, Input) else Input(*s) for s in specs)


def mm(a, b):
    return a @ b


def linear(x, w, b):
    return F.linear(x, w, b)


def linear_gelu_erf(x, w, b):
    return F.gelu(F.linear(x, w, b))


def linear_gelu_tanh(x, w, b):
    return F.gelu(F.linear(x, w, b), approximate="tanh")


def linear_residual(x, w, b, r):
    return F.linear(x, w, b) + r


def conv(stride: int, padding: int, groups: int = 1):
    def fn(x, w):
        return F.conv2d(x, w, stride=stride, padding=padding, groups=groups)
    return fn


def conv_bias_relu(stride: int, padding: int):
    def fn(x, w, b):
        return F.relu(F.conv2d(x, w, b, stride=stride, padding=padding))
    return fn


def conv_relu6(x, w):
    return F.relu6(F.conv2d(x, w))


def softmax(x):
    return torch.softmax(x, dim=-1)


def scaled_masked_softmax(s, mask):
    return torch.softmax((s * 0.125).masked_fill(mask, float("-inf")), dim=-1)


def log_softmax(x):
    return torch.log_softmax(x, dim=-1)


def layernorm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


def add_layernorm(x, r, w, b):
    return F.layer_norm(x + r, (x.shape[-1],), w, b, eps=1e-12)


def rmsnorm(x, w):
    """LLaMA's RMSNorm: in f32, back to the input type, then the weight."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
    return h.to(x.dtype) * w


def batchnorm_relu(x, mean, var, w, b):
    return F.relu(F.batch_norm(x, mean, var, w, b, training=False, eps=1e-5))


def sum_last(x):
    return x.sum(dim=-1)


def sum_first(x):
    return x.sum(dim=0)


def sum_all(x):
    return x.sum()


def mean_hw(x):
    return x.mean(dim=(2, 3))


def amax_last(x):
    return x.amax(dim=-1)


def var_last(x):
    return x.var(dim=-1)


def gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def swiglu(gate, up):
    return F.silu(gate) * up


def chain4(a, b, c):
    return torch.relu((a + b) * c - a)


def bias_relu(x, b):
    return torch.relu(x + b)


def exp_tanh(x):
    return torch.exp(-x * x) * torch.tanh(x)


def cast_scale(x):
    return x.to(torch.bfloat16) * 0.5


def residual_scale(x, r, s):
    return r + x * s


CASES: tuple[Case, ...] = (
    # GEMMs and linears -------------------------------------------------------------------------
    Case("bert_base qkv f16 128x768@768x2304", mm, _ins(((128, 768), f16), ((768, 2304), f16))),
    Case("bert_base attn_out linear+bias f32 128x768 -> 768", linear,
         _ins(((128, 768), f32), ((768, 768), f32), ((768,), f32))),
    Case("bert_base ffn1 linear+bias+gelu(erf) bf16 128x768 -> 3072", linear_gelu_erf,
         _ins(((128, 768), bf16), ((3072, 768), bf16), ((3072,), bf16))),
    Case("bert_base ffn2 linear+bias+residual f16 128x3072 -> 768", linear_residual,
         _ins(((128, 3072), f16), ((768, 3072), f16), ((768,), f16), ((128, 768), f16))),
    Case("gpt2 mlp_fc linear+bias+gelu(tanh) f16 1024x768 -> 3072", linear_gelu_tanh,
         _ins(((1024, 768), f16), ((3072, 768), f16), ((3072,), f16))),
    Case("gpt2 lm_head f16 128x768@768x50257", mm, _ins(((128, 768), f16), ((768, 50257), f16))),
    Case("resnet50 fc linear+bias f32 32x2048 -> 1000", linear,
         _ins(((32, 2048), f32), ((1000, 2048), f32), ((1000,), f32))),
    Case("gemv batch-1 f32 1x768@768x3072", mm, _ins(((1, 768), f32), ((768, 3072), f32))),
    Case("llama7b decode q_proj gemv f16 1x4096@4096x4096", mm,
         _ins(((1, 4096), f16), ((4096, 4096), f16))),
    Case("square matmul bf16 2048x2048@2048x2048", mm,
         _ins(((2048, 2048), bf16), ((2048, 2048), bf16))),
    Case("odd matmul f32 37x53@53x29", mm, _ins(((37, 53), f32), ((53, 29), f32))),
    Case("odd matmul f32 1000x1500@1500x700", mm, _ins(((1000, 1500), f32), ((1500, 700), f32))),
    Case("skinny-k matmul f32 4096x16@16x4096", mm, _ins(((4096, 16), f32), ((16, 4096), f32))),
    Case("pointnet first layer skinny f32 16384x3@3x64", mm,
         _ins(((16384, 3), f32), ((3, 64), f32))),
    # batch matmuls -------------------------------------------------------------------------------
    Case("bert_base scores bmm f16 12x128x64 @ 12x64x128", torch.bmm,
         _ins(((12, 128, 64), f16), ((12, 64, 128), f16))),
    Case("gpt2 context bmm f16 12x1024x1024 @ 12x1024x64", torch.bmm,
         _ins(((12, 1024, 1024), f16), ((12, 1024, 64), f16))),
    Case("llama decode scores bmm bf16 32x1x128 @ 32x128x512", torch.bmm,
         _ins(((32, 1, 128), bf16), ((32, 128, 512), bf16))),
    Case("odd bmm f32 7x33x65 @ 7x65x17", torch.bmm, _ins(((7, 33, 65), f32), ((7, 65, 17), f32))),
    # convolutions (NCHW, as PyTorch) ---------------------------------------------------------
    Case("resnet18 conv1 7x7 s2 3->64ch 224x224 f32", conv(2, 3),
         _ins(((1, 3, 224, 224), f32), ((64, 3, 7, 7), f32))),
    Case("resnet18 conv3x3 s1 256ch 14x14 f32", conv(1, 1),
         _ins(((1, 256, 14, 14), f32), ((256, 256, 3, 3), f32))),
    Case("resnet18 conv3x3 s1 64ch 56x56 batch8 f16", conv(1, 1),
         _ins(((8, 64, 56, 56), f16), ((64, 64, 3, 3), f16))),
    # ResNet-18 f16 at batch 1: the stages' 3x3 convolutions (implicit GEMMs, split K)
    *[Case(f"resnet18 conv3x3 s1 {c}ch {hw}x{hw} f16", conv(1, 1),
           _ins(((1, c, hw, hw), f16), ((c, c, 3, 3), f16)))
      for c, hw in ((64, 56), (128, 28), (256, 14), (512, 7))],
    Case("resnet18 conv3x3 s2 128->256ch 28x28 +bias+relu f32", conv_bias_relu(2, 1),
         _ins(((1, 128, 28, 28), f32), ((256, 128, 3, 3), f32), ((256,), f32))),
    Case("resnet50 conv1x1 256->64ch 56x56 f32", conv(1, 0),
         _ins(((1, 256, 56, 56), f32), ((64, 256, 1, 1), f32))),
    Case("mobilenet dw3x3 s2 144ch 56x56 f32", conv(2, 1, groups=144),
         _ins(((1, 144, 56, 56), f32), ((144, 1, 3, 3), f32))),
    Case("mobilenet dw3x3 s1 32ch 112x112 f16", conv(1, 1, groups=32),
         _ins(((1, 32, 112, 112), f16), ((32, 1, 3, 3), f16))),
    Case("mobilenet pw1x1 expand 24->144ch 56x56 +relu6 f32", conv_relu6,
         _ins(((1, 24, 56, 56), f32), ((144, 24, 1, 1), f32))),
    # softmax -----------------------------------------------------------------------------------
    Case("bert_base softmax f32 12x128x128", softmax, _ins(((12, 128, 128), f32))),
    Case("gpt2 scaled masked softmax f16 12x1024x1024", scaled_masked_softmax,
         _ins(((12, 1024, 1024), f16), Input((1024, 1024), torch.bool, "mask"))),
    Case("gpt2 lm log_softmax f32 32x50257", log_softmax, _ins(((32, 50257), f32))),
    Case("softmax bf16 4096x1000", softmax, _ins(((4096, 1000), bf16))),
    # normalizations ------------------------------------------------------------------------------
    Case("layernorm f32 8192x1024", layernorm,
         _ins(((8192, 1024), f32), ((1024,), f32), ((1024,), f32))),
    Case("bert_base residual+layernorm f16 128x768", add_layernorm,
         _ins(((128, 768), f16), ((128, 768), f16), ((768,), f16), ((768,), f16))),
    Case("llama7b rmsnorm bf16 2048x4096", rmsnorm, _ins(((2048, 4096), bf16), ((4096,), bf16))),
    Case("resnet18 batchnorm(eval)+relu f32 8x256x14x14", batchnorm_relu,
         _ins(((8, 256, 14, 14), f32), ((256,), f32), Input((256,), f32, "positive"),
              ((256,), f32), ((256,), f32))),
    # reductions --------------------------------------------------------------------------------
    Case("sum over last dim f32 4096x1000", sum_last, _ins(((4096, 1000), f32))),
    Case("sum over first dim f32 8192x512", sum_first, _ins(((8192, 512), f32))),
    Case("full sum f32 10000000", sum_all, _ins(((10_000_000,), f32))),
    Case("resnet global avgpool f32 32x512x7x7", mean_hw, _ins(((32, 512, 7, 7), f32))),
    Case("amax over vocab f16 64x32000", amax_last, _ins(((64, 32000), f16))),
    Case("variance over last dim f32 1024x4096", var_last, _ins(((1024, 4096), f32))),
    # elementwise chains --------------------------------------------------------------------------
    Case("gpt2 gelu(tanh) f16 1024x3072", gelu_tanh, _ins(((1024, 3072), f16))),
    Case("llama7b swiglu silu(gate)*up bf16 2048x11008", swiglu,
         _ins(((2048, 11008), bf16), ((2048, 11008), bf16))),
    Case("chain relu((a+b)*c-a) f32 16M", chain4,
         _ins(((4096, 4096), f32), ((4096, 4096), f32), ((4096, 4096), f32))),
    Case("resnet bias+relu broadcast f32 8x256x56x56", bias_relu,
         _ins(((8, 256, 56, 56), f32), ((256, 1, 1), f32))),
    Case("odd-size exp(-x^2)*tanh(x) f32 999983", exp_tanh, _ins(((999_983,), f32))),
    Case("cast f32->bf16 *0.5 4096x4096", cast_scale, _ins(((4096, 4096), f32))),
    Case("gpt2 residual r+x*s f16 1024x768", residual_scale,
         _ins(((1024, 768), f16), ((1024, 768), f16), ((768,), f16))),
)



def argmax_last(x):
    return x.argmax(dim=-1)


def topk_values(x):
    return torch.topk(x, 50, dim=-1).values


def transpose_2d(x):
    return x.t().contiguous()


def heads_to_rows(x):
    """(batch, heads, seq, dim) -> (batch, seq, heads * dim): attention's output back to rows."""
    b, h, n, d = x.shape
    return x.transpose(1, 2).reshape(b, n, h * d)


def causal_attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def rotary(x, cos, sin):
    """LLaMA's rotary embedding of (batch, heads, seq, dim) by (seq, dim) tables."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def _gemv(name, m, k, n, dtype, weight_nk=True):
    """A decode linear: x[m, k] times a [n, k] weight (nn.Linear, a tied LM head) or a
    [k, n] one (GPT-2's Conv1D)."""
    w = ((n, k), dtype) if weight_nk else ((k, n), dtype)
    fn = (lambda x, w: F.linear(x, w)) if weight_nk else mm
    return Case(f"{name} {DTYPE_NAMES[dtype]} {m}x{k} -> {n}{'' if weight_nk else ' [k,n]'}", fn,
                _ins(((m, k), dtype), w))


# Issue 31's LLM-class kernels: LLaMA-7B and GPT-2 layers at decode (batch 1-16) and prefill
# (128-2048), f16 and bf16 (``--suite llm``).
LLM_CASES: tuple[Case, ...] = (
    _gemv("llama7b q_proj", 1, 4096, 4096, f16),
    _gemv("llama7b gate_proj", 1, 4096, 11008, f16),
    _gemv("llama7b down_proj", 1, 11008, 4096, bf16),
    _gemv("llama7b qkv_proj", 1, 4096, 12288, bf16),
    _gemv("llama7b lm_head", 1, 4096, 32000, bf16),
    _gemv("gpt2 c_attn", 1, 768, 2304, f16, weight_nk=False),
    _gemv("gpt2 c_fc", 1, 768, 3072, f16, weight_nk=False),
    _gemv("gpt2 mlp c_proj", 1, 3072, 768, bf16, weight_nk=False),
    _gemv("gpt2 lm_head", 1, 768, 50257, f16),
    _gemv("llama7b q_proj batch4", 4, 4096, 4096, f16),
    _gemv("llama7b gate_proj batch16", 16, 4096, 11008, bf16),
    _gemv("llama7b qkv_proj prefill", 128, 4096, 12288, bf16),
    _gemv("llama7b gate_proj prefill", 512, 4096, 11008, f16),
    _gemv("llama7b down_proj prefill", 2048, 11008, 4096, bf16),
    _gemv("gpt2 c_fc prefill", 1024, 768, 3072, f16, weight_nk=False),
    Case("argmax vocab f16 1x50257", argmax_last, _ins(((1, 50257), f16))),
    Case("argmax vocab bf16 16x32000", argmax_last, _ins(((16, 32000), bf16))),
    Case("top-50 vocab f32 1x32000", topk_values, _ins(((1, 32000), f32))),
    Case("top-50 vocab batch f32 64x32000", topk_values, _ins(((64, 32000), f32))),
    Case("top-50 vocab batch f16 32x50257", topk_values, _ins(((32, 50257), f16))),
    Case("softmax vocab f32 1x50257", softmax, _ins(((1, 50257), f32))),
    Case("softmax vocab f16 16x32000", softmax, _ins(((16, 32000), f16))),
    Case("transpose f16 4096x4096", transpose_2d, _ins(((4096, 4096), f16))),
    Case("heads to rows bf16 1x32x2048x128", heads_to_rows, _ins(((1, 32, 2048, 128), bf16))),
    Case("full sum f32 16M", sum_all, _ins(((16_777_216,), f32))),
    Case("llama7b rmsnorm decode bf16 1x4096", rmsnorm, _ins(((1, 4096), bf16), ((4096,), bf16))),
    Case("llama7b rotary bf16 1x32x512x128", rotary,
         _ins(((1, 32, 512, 128), bf16), ((512, 128), bf16), ((512, 128), bf16))),
    Case("llama7b causal attention prefill f16 1x32x512x128", causal_attention,
         _ins(((1, 32, 512, 128), f16), ((1, 32, 512, 128), f16), ((1, 32, 512, 128), f16))),
    Case("gpt2 causal attention prefill f16 1x12x1024x64", causal_attention,
         _ins(((1, 12, 1024, 64), f16), ((1, 12, 1024, 64), f16), ((1, 12, 1024, 64), f16))),
    Case("llama7b decode attention over 1024 f16 1x32x1x128", attention,
         _ins(((1, 32, 1, 128), f16), ((1, 32, 1024, 128), f16), ((1, 32, 1024, 128), f16))),
)


# Kernel classes of vision, diffusion and generic models that the two suites above do not time:
# gathers and scatters, scans and sorts, transposed/grouped/3-D/large-kernel convolutions,
# norms over groups and channels, resampling, pooling, padding, layout shuffles, odd-axis
# reductions. Shapes from ResNeXt, ConvNeXt, UNet/Stable Diffusion, DCGAN, C3D and
# classification heads; the point is to find a class far behind PyTorch before a user does.

def embedding(idx, w):
    return F.embedding(idx, w)


def gather_last(x, idx):
    return torch.gather(x, -1, idx)


def index_select_rows(x, idx):
    return x.index_select(0, idx)


def index_add_rows(x, idx, src):
    return x.index_add(0, idx, src)


def embedding_bag_sum(table, ids, bags):
    """Sums of looked-up rows per bag (an EmbeddingBag's sum mode as index_add)."""
    sums = torch.zeros(4096, table.shape[1], dtype=table.dtype, device=table.device)
    return sums.index_add(0, bags, table[ids])


def cumsum_last(x):
    return x.cumsum(-1)


def sort_descending(x):
    return torch.sort(x, dim=-1, descending=True).values


def sort_flat(x):
    return torch.sort(x).values


def argsort_last(x):
    """The elements taken in argsort's order: exact whichever order ties take (PyTorch's argsort
    need not be stable; pyree's is)."""
    return torch.take_along_dim(x, torch.argsort(x, dim=-1), dim=-1)


def topk_classes(x):
    return torch.topk(x, 5, dim=-1).values


def conv_transpose_s2(x, w):
    return F.conv_transpose2d(x, w, stride=2, padding=1)


def group_norm(x, w, b):
    return F.group_norm(x, 32, w, b, eps=1e-5)


def instance_norm(x):
    return F.instance_norm(x, eps=1e-5)


def channels_layernorm(x, w, b):
    """ConvNeXt's LayerNorm over the channels of an NCHW image."""
    return F.layer_norm(x.permute(0, 2, 3, 1), (x.shape[1],), w, b, 1e-6).permute(0, 3, 1, 2)


def upsample_nearest(x):
    return F.interpolate(x, scale_factor=2, mode="nearest")


def upsample_bilinear(x):
    return F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)


def max_pool_3x3_s2(x):
    return F.max_pool2d(x, 3, stride=2, padding=1)


def avg_pool_2x2(x):
    return F.avg_pool2d(x, 2)


def adaptive_avg_7(x):
    return F.adaptive_avg_pool2d(x, 7)


def conv3d_3(x, w):
    return F.conv3d(x, w, padding=1)


def grouped_conv_32(x, w):
    return F.conv2d(x, w, padding=1, groups=32)


def depthwise_7x7(x, w):
    return F.conv2d(x, w, padding=3, groups=x.shape[1])


def mean_middle(x):
    return x.mean(1)


def softmax_first(x):
    return torch.softmax(x, 0)


def logsumexp_last(x):
    return torch.logsumexp(x, -1)


def row_norms(x):
    return torch.linalg.vector_norm(x, dim=-1)


def masked_fill_scores(s, mask):
    return s.masked_fill(mask, float("-inf"))


def reflection_pad(x):
    return F.pad(x, (3, 3, 3, 3), mode="reflect")


def pixel_shuffle_2(x):
    return F.pixel_shuffle(x, 2)


def cat_channels(*xs):
    return torch.cat(xs, 1)


def scores_einsum(q, k):
    return torch.einsum("bnhd,bmhd->bhnm", q, k)


def permute_0213(x):
    return x.permute(0, 2, 1, 3).contiguous()


def gelu_erf(x):
    return F.gelu(x)


def fake_quantize(x):
    return torch.round(x * 20.0).clamp(-128, 127) / 20.0


def mse(a, b):
    return F.mse_loss(a, b)


BREADTH_CASES = (
    Case("gpt2 embedding f16 512 tokens of 50257x768", embedding,
         _ins(Input((1, 512), torch.int64, "index:50257"), ((50257, 768), f16))),
    Case("gather last dim f32 64x4096 by 64x256", gather_last,
         _ins(((64, 4096), f32), Input((64, 256), torch.int64, "index:4096"))),
    Case("index_select rows f32 100000x128 by 4096", index_select_rows,
         _ins(((100000, 128), f32), Input((4096,), torch.int64, "index:100000"))),
    Case("index_add rows f32 10000x64 from 50000", index_add_rows,
         _ins(((10000, 64), f32), Input((50000,), torch.int64, "index:10000"), ((50000, 64), f32))),
    Case("embedding-bag sum f32 1M lookups of 100000x32 into 4096 bags", embedding_bag_sum,
         _ins(((100000, 32), f32), Input((1 << 20,), torch.int64, "index:100000"),
              Input((1 << 20,), torch.int64, "index:4096"))),
    Case("cumsum last dim f32 32x8192", cumsum_last, _ins(((32, 8192), f32))),
    Case("sort descending f32 1x32000", sort_descending, _ins(((1, 32000), f32))),
    Case("sort f32 1000000", sort_flat, _ins(((1_000_000,), f32))),
    Case("argsort last dim f32 64x4096", argsort_last, _ins(((64, 4096), f32))),
    Case("classifier top-5 f32 64x1000", topk_classes, _ins(((64, 1000), f32))),
    Case("dcgan conv_transpose 4x4 s2 64->32ch 64x64 f32", conv_transpose_s2,
         _ins(((1, 64, 64, 64), f32), ((64, 32, 4, 4), f32))),
    Case("sd unet group_norm 32 groups f32 2x320x64x64", group_norm,
         _ins(((2, 320, 64, 64), f32), ((320,), f32), ((320,), f32))),
    Case("sd unet group_norm 32 groups f16 2x640x32x32", group_norm,
         _ins(((2, 640, 32, 32), f16), ((640,), f16), ((640,), f16))),
    Case("style instance_norm f32 1x64x256x256", instance_norm, _ins(((1, 64, 256, 256), f32))),
    Case("convnext channels layernorm f32 1x96x56x56", channels_layernorm,
         _ins(((1, 96, 56, 56), f32), ((96,), f32), ((96,), f32))),
    Case("unet upsample nearest 2x f32 1x256x64x64", upsample_nearest, _ins(((1, 256, 64, 64), f32))),
    Case("upsample bilinear 2x f32 1x64x128x128", upsample_bilinear, _ins(((1, 64, 128, 128), f32))),
    Case("resnet maxpool 3x3 s2 f32 8x64x112x112", max_pool_3x3_s2, _ins(((8, 64, 112, 112), f32))),
    Case("avgpool 2x2 f32 8x128x56x56", avg_pool_2x2, _ins(((8, 128, 56, 56), f32))),
    Case("adaptive avgpool to 7x7 f32 8x512x14x14", adaptive_avg_7, _ins(((8, 512, 14, 14), f32))),
    Case("c3d conv3d 3x3x3 64->64ch 8x28x28 f32", conv3d_3,
         _ins(((1, 64, 8, 28, 28), f32), ((64, 64, 3, 3, 3), f32))),
    Case("resnext grouped conv3x3 32 groups 256ch 56x56 f32", grouped_conv_32,
         _ins(((1, 256, 56, 56), f32), ((256, 8, 3, 3), f32))),
    Case("convnext depthwise 7x7 96ch 56x56 f32", depthwise_7x7,
         _ins(((1, 96, 56, 56), f32), ((96, 1, 7, 7), f32))),
    Case("mean over middle dim f32 64x1024x64", mean_middle, _ins(((64, 1024, 64), f32))),
    Case("softmax over first dim f32 1024x1024", softmax_first, _ins(((1024, 1024), f32))),
    Case("logsumexp vocab f32 64x32000", logsumexp_last, _ins(((64, 32000), f32))),
    Case("row 2-norms f32 4096x1024", row_norms, _ins(((4096, 1024), f32))),
    Case("masked_fill scores f32 12x1024x1024", masked_fill_scores,
         _ins(((12, 1024, 1024), f32), Input((1024, 1024), torch.bool, "mask"))),
    Case("reflection pad 3 f32 1x64x256x256", reflection_pad, _ins(((1, 64, 256, 256), f32))),
    Case("pixel_shuffle 2 f32 1x256x64x64", pixel_shuffle_2, _ins(((1, 256, 64, 64), f32))),
    Case("cat 8 along channels f32 1x64x56x56", cat_channels, _ins(*[((1, 64, 56, 56), f32)] * 8)),
    Case("einsum scores bnhd,bmhd f16 1x128x12x64", scores_einsum,
         _ins(((1, 128, 12, 64), f16), ((1, 128, 12, 64), f16))),
    Case("permute 0213 f32 8x512x12x64", permute_0213, _ins(((8, 512, 12, 64), f32))),
    Case("strict f32 matmul 2048x2048x2048", mm, _ins(((2048, 2048), f32), ((2048, 2048), f32))),
    Case("gelu erf f32 16M", gelu_erf, _ins(((16_777_216,), f32))),
    Case("fake quantize round clamp f32 16M", fake_quantize, _ins(((16_777_216,), f32))),
    Case("mse loss f32 16M", mse, _ins(((16_777_216,), f32), ((16_777_216,), f32))),
)

# ---- the second breadth suite: classes the others do not time (``--suite breadth2``) ----------

def lstm_unrolled(x, w_ih, w_hh, b):
    """An LSTM layer over 32 steps, its cell written out (what an exported recurrence becomes).
    The weights are scaled as an initialisation would (1/16 of randn): unscaled, the gates
    saturate and PyTorch's own f32 answer is 4% from float64's."""
    h = torch.zeros(x.shape[1], w_hh.shape[1], dtype=x.dtype, device=x.device)
    c = torch.zeros_like(h)
    w_ih, w_hh = w_ih * 0.0625, w_hh * 0.0625
    for t in range(x.shape[0]):
        i, f, g, o = (x[t] @ w_ih.T + h @ w_hh.T + b).chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
    return h


def conv1d_s5(x, w):
    return F.conv1d(x, w, stride=5)


def depthwise_conv1d_31(x, w):
    return F.conv1d(x, w, padding=15, groups=x.shape[1])


def depthwise_31x31(x, w):
    return F.conv2d(x, w, padding=15, groups=x.shape[1])


def dilated_conv_d2(x, w):
    return F.conv2d(x, w, padding=2, dilation=2)


def max_pool3d_2(x):
    return F.max_pool3d(x, 2)


def upsample_trilinear(x):
    return F.interpolate(x, scale_factor=2, mode="trilinear", align_corners=False)


def upsample_bicubic(x):
    return F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False)


def grid_sample_bilinear(x, grid):
    return F.grid_sample(x, grid.clamp(-1.0, 1.0), align_corners=False)


def cross_entropy_vocab(logits, target):
    return F.cross_entropy(logits, target)


def scatter_amax_bins(src, index):
    return torch.full((1000,), float("-inf"), dtype=src.dtype, device=src.device).scatter_reduce(
        0, index, src, reduce="amax")


def one_hot_float(index):
    return F.one_hot(index, 1000).float()


def gqa_repeat_interleave(k):
    return k.repeat_interleave(4, dim=2)


def flip_hw(x):
    return x.flip(2, 3)


def swin_roll(x):
    return x.roll((3, 3), (1, 2))


def causal_mask_in_graph(s):
    n = s.shape[-1]
    mask = torch.tril(torch.ones(n, n, dtype=torch.bool, device=s.device))
    return torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)


def std_last(x):
    return x.std(-1)


def cdist_rows(a, b):
    return torch.cdist(a, b)


def cosine_rows(a, b):
    return F.cosine_similarity(a, b, dim=-1)


def median_rows(x):
    return x.median(-1).values


def searchsorted_sorted_bins(x):
    boundaries = torch.linspace(-3.0, 3.0, 1024, device=x.device).to(x.dtype)  # f32's, in f64 too
    return torch.searchsorted(boundaries, x)


def unfold_3x3(x):
    return F.unfold(x, 3, padding=1)


def constant_pad_5(x):
    return F.pad(x, (5, 5, 5, 5), value=0.5)


def layernorm_plain(x):
    return F.layer_norm(x, x.shape[-1:])


def argmin_first(x):
    return x.argmin(0)


def all_positive_rows(x):
    return (x > -3.0).all(-1)


def sort_int64(x):
    return torch.sort(x).values


def topk_1000(x):
    return torch.topk(x, 1000).values


def int_bit_chain(a, b):
    return ((a ^ b) >> 3) & 255


def cumsum_first(x):
    return x.cumsum(0)


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def group_norm_1(x):
    return F.group_norm(x, 1)


def pixel_unshuffle_2(x):
    return F.pixel_unshuffle(x, 2)


def channel_shuffle_2(x):
    n, c, h, w = x.shape
    return x.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)


def max_pool1d_3_s2(x):
    return F.max_pool1d(x, 3, stride=2, padding=1)


def quantize_int8_roundtrip(x):
    return torch.clamp(torch.round(x / 0.05), -128, 127).to(torch.int8).float() * 0.05


def l2_normalize(x):
    return F.normalize(x, dim=-1)


def lerp_addcmul(a, b, c):
    return torch.lerp(a, b, 0.3) + torch.addcmul(a, b, c, value=0.5)


BREADTH2_CASES = (
    Case("lstm 32 steps batch 8 hidden 256 f32", lstm_unrolled,
         _ins(((32, 8, 256), f32), ((1024, 256), f32), ((1024, 256), f32), ((1024,), f32))),
    Case("wav2vec conv1d k10 s5 1->512ch 16000 f32", conv1d_s5,
         _ins(((1, 1, 16000), f32), ((512, 1, 10), f32))),
    Case("conformer depthwise conv1d k31 256ch 1000 f32", depthwise_conv1d_31,
         _ins(((1, 256, 1000), f32), ((256, 1, 31), f32))),
    Case("replknet depthwise 31x31 128ch 32x32 f32", depthwise_31x31,
         _ins(((1, 128, 32, 32), f32), ((128, 1, 31, 31), f32))),
    Case("deeplab dilated conv3x3 d2 256ch 33x33 f32", dilated_conv_d2,
         _ins(((1, 256, 33, 33), f32), ((256, 256, 3, 3), f32))),
    Case("maxpool3d 2 f32 1x64x16x56x56", max_pool3d_2, _ins(((1, 64, 16, 56, 56), f32))),
    Case("upsample trilinear 2x f32 1x32x16x32x32", upsample_trilinear,
         _ins(((1, 32, 16, 32, 32), f32))),
    Case("upsample bicubic 2x f32 1x3x256x256", upsample_bicubic, _ins(((1, 3, 256, 256), f32))),
    Case("grid_sample bilinear f32 1x64x64x64", grid_sample_bilinear,
         _ins(((1, 64, 64, 64), f32), ((1, 64, 64, 2), f32))),
    Case("cross entropy vocab f32 2048x32000", cross_entropy_vocab,
         _ins(((2048, 32000), f32), Input((2048,), torch.int64, "index:32000"))),
    Case("scatter_reduce amax 100000 into 1000 bins f32", scatter_amax_bins,
         _ins(((100000,), f32), Input((100000,), torch.int64, "index:1000"))),
    Case("one_hot 8192 of 1000 classes", one_hot_float,
         _ins(Input((8192,), torch.int64, "index:1000"))),
    Case("gqa repeat_interleave 4 bf16 1x1024x8x128", gqa_repeat_interleave,
         _ins(((1, 1024, 8, 128), bf16))),
    Case("flip hw f32 1x3x512x512", flip_hw, _ins(((1, 3, 512, 512), f32))),
    Case("swin roll 3 f32 1x56x56x128", swin_roll, _ins(((1, 56, 56, 128), f32))),
    Case("causal mask built in graph softmax f32 16x512x512", causal_mask_in_graph,
         _ins(((16, 512, 512), f32))),
    Case("std over last dim f32 4096x4096", std_last, _ins(((4096, 4096), f32))),
    Case("cdist f32 2048x64 to 2048x64", cdist_rows, _ins(((2048, 64), f32), ((2048, 64), f32))),
    Case("cosine similarity rows f32 4096x768", cosine_rows,
         _ins(((4096, 768), f32), ((4096, 768), f32))),
    Case("median rows f32 1024x1023", median_rows, _ins(((1024, 1023), f32))),
    Case("searchsorted 1M into 1024 bins f32", searchsorted_sorted_bins,
         _ins(((1 << 20,), f32))),
    Case("unfold im2col 3x3 f32 1x64x56x56", unfold_3x3, _ins(((1, 64, 56, 56), f32))),
    Case("constant pad 5 f32 1x64x256x256", constant_pad_5, _ins(((1, 64, 256, 256), f32))),
    Case("layernorm odd width f32 4096x1000", layernorm_plain, _ins(((4096, 1000), f32))),
    Case("softmax odd width clip f16 8x12x77x77", softmax, _ins(((8, 12, 77, 77), f16))),
    Case("argmin over dim 0 f32 4096x1000", argmin_first, _ins(((4096, 1000), f32))),
    Case("all over rows bool f32 4096x4096", all_positive_rows, _ins(((4096, 4096), f32))),
    Case("sort int64 1M", sort_int64, _ins(Input((1 << 20,), torch.int64, "index:1000000000"))),
    Case("topk 1000 of 1M f32", topk_1000, _ins(((1 << 20,), f32))),
    Case("int64 bit ops chain 16M", int_bit_chain,
         _ins(Input((1 << 24,), torch.int64, "index:1000000"),
              Input((1 << 24,), torch.int64, "index:1000000"))),
    Case("cumsum over first dim f32 8192x512", cumsum_first, _ins(((8192, 512), f32))),
    Case("clip text sdpa f16 1x8x77x64", sdpa,
         _ins(((1, 8, 77, 64), f16), ((1, 8, 77, 64), f16), ((1, 8, 77, 64), f16))),
    Case("sdpa f32 1x8x256x64", sdpa,
         _ins(((1, 8, 256, 64), f32), ((1, 8, 256, 64), f32), ((1, 8, 256, 64), f32))),
    Case("group_norm 1 group f32 8x64x32x32", group_norm_1, _ins(((8, 64, 32, 32), f32))),
    Case("pixel_unshuffle 2 f32 1x64x128x128", pixel_unshuffle_2, _ins(((1, 64, 128, 128), f32))),
    Case("shufflenet channel shuffle f32 8x232x14x14", channel_shuffle_2,
         _ins(((8, 232, 14, 14), f32))),
    Case("maxpool1d 3 s2 f32 1x768x512", max_pool1d_3_s2, _ins(((1, 768, 512), f32))),
    Case("cifar resnet conv3x3 64ch batch64 8x8 f32", conv(1, 1),
         _ins(((64, 64, 8, 8), f32), ((64, 64, 3, 3), f32))),
    Case("bmm many tiny f32 4096x8x8", torch.bmm, _ins(((4096, 8, 8), f32), ((4096, 8, 8), f32))),
    Case("int8 quantize round trip f32 16M", quantize_int8_roundtrip, _ins(((1 << 24,), f32))),
    Case("l2 normalize rows f32 4096x768", l2_normalize, _ins(((4096, 768), f32))),
    Case("lerp + addcmul f32 16M", lerp_addcmul,
         _ins(((1 << 24,), f32), ((1 << 24,), f32), ((1 << 24,), f32))),
)

# ---- the third breadth suite: classes the others do not time (``--suite breadth3``) ----------

def avg_pool_3_nopad_count(x):
    return F.avg_pool2d(x, 3, 1, 1, count_include_pad=False)


def conv_transpose_2_s2(x, w):
    return F.conv_transpose2d(x, w, stride=2)


def conv_transpose_3_s2(x, w):
    return F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)


def depthwise_7_dilated_3(x, w):
    return F.conv2d(x, w, padding=9, dilation=3, groups=x.shape[1])


def conv_1x7(x, w):
    return F.conv2d(x, w, padding=(0, 3))


def conv_7x1(x, w):
    return F.conv2d(x, w, padding=(3, 0))


def conv_5x5(x, w):
    return F.conv2d(x, w, padding=2)


def outer_product(a, b):
    return a[:, None] * b[None, :]


def triu_mask(x):
    return torch.triu(x, diagonal=1)


def cumprod_rows(x):
    return torch.cumprod(x, dim=-1)


def argmax_channels(x):
    return torch.argmax(x, dim=1)


def nll_2d(x, t):
    return F.cross_entropy(x, t)


def bilinear_4x_corners(x):
    return F.interpolate(x, scale_factor=4, mode="bilinear", align_corners=True)


def gather_dim1(x, i):
    return torch.gather(x, 1, i)


def batchnorm_train_stats(x):
    return torch.var_mean(x, dim=(0, 2, 3), correction=0)[0]


def squeeze_excite(x, w1, w2):
    s = x.mean((2, 3))
    s = torch.sigmoid(F.relu(s @ w1) @ w2)
    return x * s[:, :, None, None]


def hardswish_chain(x):
    return F.hardswish(x) * torch.sigmoid(x)


def transpose_last_two(x):
    return x.transpose(-1, -2).contiguous()


def sum_int32(x):
    return (x * 3).sum(dtype=torch.int32)


def prod_rows(x):
    return torch.prod(x, dim=-1)


def sort_columns(x):
    return torch.sort(x, dim=0).values


def mean_columns(x):
    return x.mean(dim=1)


def rmsnorm_f16(x, w):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * w


def strided_slice(x):
    return x[:, :, ::2, ::2].contiguous()


def mlp_tiny_width(x, w1, w2):
    return F.relu(x @ w1) @ w2


def masked_mean(x, m):
    return (x * m).sum(-1) / m.sum(-1).clamp(min=1)


def depthwise_3x3_f16(x, w):
    return F.conv2d(x, w, padding=1, groups=x.shape[1])


BREADTH3_CASES: tuple[Case, ...] = (
    Case("poolformer avgpool 3x3 s1 no-pad-count f32 8x64x56x56", avg_pool_3_nopad_count,
         _ins(((8, 64, 56, 56), f32))),
    Case("unet conv_transpose 2x2 s2 128->64ch 64x64 f32", conv_transpose_2_s2,
         _ins(((1, 128, 64, 64), f32), ((128, 64, 2, 2), f32))),
    Case("conv_transpose 3x3 s2 f16 1x256x32x32 -> 128ch", conv_transpose_3_s2,
         _ins(((1, 256, 32, 32), f16), ((256, 128, 3, 3), f16))),
    Case("van depthwise 7x7 dilation 3 64ch 56x56 f32", depthwise_7_dilated_3,
         _ins(((1, 64, 56, 56), f32), ((64, 1, 7, 7), f32))),
    Case("inception conv 1x7 192ch 17x17 batch8 f32", conv_1x7,
         _ins(((8, 192, 17, 17), f32), ((192, 192, 1, 7), f32))),
    Case("inception conv 7x1 192ch 17x17 batch8 f16", conv_7x1,
         _ins(((8, 192, 17, 17), f16), ((192, 192, 7, 1), f16))),
    Case("dense conv 5x5 3->32ch 128x128 batch8 f32", conv_5x5,
         _ins(((8, 3, 128, 128), f32), ((32, 3, 5, 5), f32))),
    Case("outer product f32 4096x4096", outer_product, _ins(((4096,), f32), ((4096,), f32))),
    Case("triu mask f32 4096x4096", triu_mask, _ins(((4096, 4096), f32))),
    Case("cumprod rows f32 256x1000", cumprod_rows, _ins(((256, 1000), f32, "positive"))),
    Case("segmentation argmax over 21 classes f32 1x21x512x512", argmax_channels,
         _ins(((1, 21, 512, 512), f32))),
    Case("segmentation cross entropy 21 classes f32 2x21x256x256", nll_2d,
         _ins(((2, 21, 256, 256), f32), ((2, 256, 256), torch.int64, "index:21"))),
    Case("upsample bilinear 4x align_corners f32 1x32x64x64", bilinear_4x_corners,
         _ins(((1, 32, 64, 64), f32))),
    Case("gather dim 1 f32 4096x1024 by 4096x512", gather_dim1,
         _ins(((4096, 1024), f32), ((4096, 512), torch.int64, "index:1024"))),
    Case("batchnorm training stats f32 32x256x28x28", batchnorm_train_stats,
         _ins(((32, 256, 28, 28), f32))),
    Case("squeeze-excite f32 8x256x28x28", squeeze_excite,
         _ins(((8, 256, 28, 28), f32), ((256, 64), f32), ((64, 256), f32))),
    Case("hardswish * sigmoid f32 16M", hardswish_chain, _ins(((1 << 24,), f32))),
    Case("transpose last two f16 64x1024x1024", transpose_last_two, _ins(((64, 1024, 1024), f16))),
    Case("sum int32 16M", sum_int32, _ins(((1 << 24,), torch.int32, "index:100"))),
    Case("prod rows f32 4096x64", prod_rows, _ins(((4096, 64), f32, "positive"))),
    Case("sort columns f32 1000x512", sort_columns, _ins(((1000, 512), f32))),
    Case("mean over dim 1 f32 1x4096x4096", mean_columns, _ins(((1, 4096, 4096), f32))),
    Case("rmsnorm f16 odd width 2048x5120", rmsnorm_f16, _ins(((2048, 5120), f16), ((5120,), f16))),
    Case("strided slice ::2 f32 8x64x112x112", strided_slice, _ins(((8, 64, 112, 112), f32))),
    Case("tiny-width mlp f32 65536x32x32", mlp_tiny_width,
         _ins(((65536, 32), f32), ((32, 32), f32), ((32, 32), f32))),
    Case("masked mean f32 4096x512", masked_mean, _ins(((4096, 512), f32), ((4096, 512), f32, "mask"))),
    Case("depthwise 3x3 f16 256ch batch16 28x28", depthwise_3x3_f16,
         _ins(((16, 256, 28, 28), f16), ((256, 1, 3, 3), f16))),
)


# Large windows (``--suite windows``): depthwise convolutions and poolings of 128 taps and more,
# which the GPU targets stage through shared memory (codegen/common/llvm_gpu/window.py).
def depthwise_same(x, w):
    return F.conv2d(x, w, padding=w.shape[-1] // 2, groups=x.shape[1])


def max_pool_13_s1(x):
    return F.max_pool2d(x, 13, 1, 6)


def max_pool_5_s1(x):
    return F.max_pool2d(x, 5, 1, 2)


def avg_pool_16_s8(x):
    return F.avg_pool2d(x, 16, 8)


def depthwise_conv1d_same(x, w):
    return F.conv1d(x, w, padding=w.shape[-1] // 2, groups=x.shape[1])


WINDOW_CASES: tuple[Case, ...] = (
    Case("slak depthwise 51x51 64ch 28x28 f32", depthwise_same,
         _ins(((1, 64, 28, 28), f32), ((64, 1, 51, 51), f32))),
    Case("depthwise 13x13 256ch batch8 28x28 f32", depthwise_same,
         _ins(((8, 256, 28, 28), f32), ((256, 1, 13, 13), f32))),
    Case("depthwise 13x13 384ch batch16 14x14 f16", depthwise_same,
         _ins(((16, 384, 14, 14), f16), ((384, 1, 13, 13), f16))),
    Case("yolo spp maxpool 13x13 s1 512ch 20x20 f32", max_pool_13_s1, _ins(((1, 512, 20, 20), f32))),
    Case("avgpool 16x16 s8 64ch batch4 129x129 f32", avg_pool_16_s8, _ins(((4, 64, 129, 129), f32))),
    Case("depthwise conv1d k255 512ch 2000 f32", depthwise_conv1d_same,
         _ins(((1, 512, 2000), f32), ((512, 1, 255), f32))),
    # Medium windows, below the template's 128 taps: its threshold measured on them.
    Case("efficientnet depthwise 5x5 240ch batch8 28x28 f32", depthwise_same,
         _ins(((8, 240, 28, 28), f32), ((240, 1, 5, 5), f32))),
    Case("yolo sppf maxpool 5x5 s1 512ch 20x20 f32", max_pool_5_s1, _ins(((1, 512, 20, 20), f32))),
    Case("depthwise 9x9 128ch batch4 64x64 f32", depthwise_same,
         _ins(((4, 128, 64, 64), f32), ((128, 1, 9, 9), f32))),
    Case("mobilenet depthwise 3x3 144ch batch8 56x56 f32", depthwise_same,
         _ins(((8, 144, 56, 56), f32), ((144, 1, 3, 3), f32))),
)

# Tensor-core products beyond the LLM suite's four prefill shapes, for the wgmma template's main
# loop and tile choice (``--suite gemm``): square, odd M, N and K, [k, n] weights, batched.
GEMM_CASES: tuple[Case, ...] = (
    _gemv("square", 4096, 4096, 4096, f16),
    _gemv("llama7b q_proj prefill", 2048, 4096, 4096, bf16),
    _gemv("odd rows", 1000, 4096, 11008, f16),
    _gemv("odd all", 777, 2050, 3001, bf16),
    _gemv("bert-large ffn", 384, 1024, 4096, f16),
    _gemv("gpt2 c_attn prefill", 1024, 768, 2304, f16, weight_nk=False),
    _gemv("wide [k,n]", 512, 4096, 11008, bf16, weight_nk=False),
    Case("batched f16 16x512x512x512", mm, _ins(((16, 512, 512), f16), ((16, 512, 512), f16))),
)
# ---- the fourth breadth suite: classes the others do not time (``--suite breadth4``) ----------
# Scans, counts and scatters pyree decomposes itself (importers/torch_missing_ops.py), image
# preprocessing from bytes, small batched products and the rarer layers of older CNNs.
def cummax_rows(x):
    return torch.cummax(x, 1)[0]


def logcumsumexp_rows(x):
    return torch.logcumsumexp(x, 1)


def histc_100(x):
    return torch.histc(x, 100, -3, 3)


def fold_3x3(x):
    return F.fold(x, (56, 56), 3, padding=1)


def kthvalue_rows(x):
    return torch.kthvalue(x, 17, 1)[0]


def local_response_norm(x):
    return F.local_response_norm(x, 5)


def max_unpool_2(x):
    values, indices = F.max_pool2d(x, 2, return_indices=True)
    return F.max_unpool2d(values, indices, 2)


def bmv(a, x):
    return torch.einsum("bij,bj->bi", a, x)


def image_bytes_normalize(img, mean, std):
    """uint8 NHWC camera frames to a normalised NCHW float batch."""
    return (img.permute(0, 3, 1, 2).float() / 255 - mean[:, None, None]) / std[:, None, None]


def glu_last(x):
    return F.glu(x, -1)


def bilinear_layer(a, b, w):
    return F.bilinear(a, b, w)


def replicate_pad_3d(x):
    return F.pad(x, (2, 2, 2, 2, 2, 2), mode="replicate")


def avg_pool3d_2(x):
    return F.avg_pool3d(x, 2)


def adaptive_max_uneven(x):
    return F.adaptive_max_pool2d(x, (7, 7))


def embedding_bag_max(table, ids):
    return F.embedding_bag(ids, table, mode="max")


def leaky_where_clamp(x):
    return torch.where(x > 0, x, 0.1 * x).clamp(-1, 1)


def adam_update(p, m, v):
    return p - 1e-3 * m / (v.sqrt() + 1e-8)


def inf_norm_rows(x):
    return torch.linalg.vector_norm(x, float("inf"), dim=-1)


def cross_product(a, b):
    return torch.linalg.cross(a, b)


def count_nonzero_rows(x):
    return torch.count_nonzero(x, dim=1)


def nearest_to_odd_size(x):
    return F.interpolate(x, size=(37, 53), mode="nearest")


def atan2_pair(a, b):
    return torch.atan2(a, b)


def floor_divide_int64(a, b):
    return torch.div(a, b + 1, rounding_mode="floor")


def repeat_tile(x):
    return x.repeat(1, 4, 1)


def circular_pad_conv(x, w):
    return F.conv2d(F.pad(x, (1, 1, 1, 1), mode="circular"), w)


def conv_3x3_same(x, w):
    return F.conv2d(x, w, padding=1)


def diff_rows(x):
    return torch.diff(x, dim=1)


def trapezoid_rows(y):
    return torch.trapezoid(y, dim=-1)


def pairwise_l2(a, b):
    return F.pairwise_distance(a, b)


def xlogy_pair(a, b):
    return torch.special.xlogy(a, b)


def logaddexp_pair(a, b):
    return torch.logaddexp(a, b)


def hypot_pair(a, b):
    return torch.hypot(a, b)


def sinc_x(x):
    return torch.sinc(x)


def take_along_rows(x, idx):
    return torch.take_along_dim(x, idx, dim=1)


def scatter_reduce_mean(src, idx):
    return torch.zeros(1000, device=src.device, dtype=src.dtype).scatter_reduce(
        0, idx, src, "mean", include_self=False)


def conv_transpose3d_2(x, w):
    return F.conv_transpose3d(x, w, stride=2)


def gru_cell_steps(x, h, wi, wh):
    """A GRU cell unrolled over 16 steps of one input (gates r, z, n as PyTorch orders them);
    the weights scaled by 1/sqrt(fan-in), as nn.GRU's initialisation keeps them (unscaled, the
    gates saturate and float64 and float32 PyTorch differ by 14%)."""
    wi, wh = wi * wi.shape[1] ** -0.5, wh * wh.shape[1] ** -0.5
    for _ in range(16):
        gi, gh = x @ wi.t(), h @ wh.t()
        ir, iz, in_ = gi.chunk(3, 1)
        hr, hz, hn = gh.chunk(3, 1)
        r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
        n = torch.tanh(in_ + r * hn)
        h = (1 - z) * n + z * h
    return h


def alibi_attention(q, k, v):
    """Scores with ALiBi's per-head linear bias, built in the graph, then softmax and V."""
    heads, n = q.shape[1], q.shape[2]
    slopes = 2.0 ** (-8.0 * torch.arange(1, heads + 1, device=q.device) / heads)
    pos = torch.arange(n, device=q.device)
    bias = slopes[:, None, None] * (pos[None, None, :] - pos[None, :, None]).float()
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5 + bias
    return torch.softmax(scores, -1) @ v


def complex_rotary(x, cos, sin):
    """LLaMA's rotary as a complex product (view_as_complex), back to real pairs."""
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    rot = torch.complex(cos, sin)
    return torch.view_as_real(xc * rot).flatten(-2)


def rfft_magnitude(x):
    return torch.fft.rfft(x).abs()


def area_resize_odd(x):
    return F.interpolate(x, size=(37, 53), mode="area")


def cumsum_int32_rows(x):
    return torch.cumsum(x, 1)


def argsort_descending_stable_ints(x):
    return torch.argsort(x, dim=1, descending=True, stable=True)


def sort_rows_values(x):
    return torch.sort(x, dim=1).values


def log_softmax_first(x):
    return F.log_softmax(x, 0)


def nansum_rows(x):
    return torch.nansum(torch.where(x > 2, torch.nan, x), 1)


def baddbmm_scaled(bias, a, b):
    return torch.baddbmm(bias, a, b, beta=0.5, alpha=2.0)


def addcdiv_update(p, a, b):
    return torch.addcdiv(p, a, b, value=-0.01)


def matmul_chain_3(a, b, c):
    return torch.einsum("ij,jk,kl->il", a, b, c)


def kron_small(a, b):
    return torch.kron(a, b)


def maxpool_ceil_dilated(x):
    return F.max_pool2d(x, 3, 2, 1, dilation=2, ceil_mode=True)


def topk_columns(x):
    return torch.topk(x, 50, dim=0).values


def topk_int_rows(x):
    return torch.topk(x, 10, dim=1).values


def topk_smallest(x):
    return torch.topk(x, 40, dim=1, largest=False).values


BREADTH4_CASES: tuple[Case, ...] = (
    Case("cummax rows f32 64x4096", cummax_rows, _ins(((64, 4096), f32))),
    Case("logcumsumexp rows f32 64x4096", logcumsumexp_rows, _ins(((64, 4096), f32))),
    Case("histc 100 bins f32 4M", histc_100, _ins(((1 << 22,), f32))),
    Case("fold 3x3 (col2im) f32 4x576x3136", fold_3x3, _ins(((4, 576, 3136), f32))),
    Case("kthvalue 17 of rows f32 4096x100", kthvalue_rows, _ins(((4096, 100), f32))),
    Case("alexnet local response norm f32 8x96x55x55", local_response_norm,
         _ins(((8, 96, 55, 55), f32))),
    Case("segnet max_unpool 2x2 f32 4x64x112x112", max_unpool_2, _ins(((4, 64, 112, 112), f32))),
    Case("batched gemv f32 256x512x512", bmv, _ins(((256, 512, 512), f32), ((256, 512), f32))),
    Case("small batched bmm f32 1024x32x32x32", mm,
         _ins(((1024, 32, 32), f32), ((1024, 32, 32), f32))),
    Case("camera bytes to normalised nchw 16x224x224x3", image_bytes_normalize,
         _ins(((16, 224, 224, 3), torch.uint8, "index:256"), ((3,), f32), ((3,), f32, "positive"))),
    Case("glu f16 4096x8192", glu_last, _ins(((4096, 8192), f16))),
    Case("nn.Bilinear f32 512x128x128->64", bilinear_layer,
         _ins(((512, 128), f32), ((512, 128), f32), ((64, 128, 128), f32))),
    Case("replicate pad 3d f32 2x16x32x64x64", replicate_pad_3d, _ins(((2, 16, 32, 64, 64), f32))),
    Case("avg_pool3d 2 f32 4x64x16x56x56", avg_pool3d_2, _ins(((4, 64, 16, 56, 56), f32))),
    Case("adaptive max pool 20x20 -> 7x7 uneven f32 32x512x20x20", adaptive_max_uneven,
         _ins(((32, 512, 20, 20), f32))),
    Case("embedding_bag max 100000x64 by 1024 bags of 8", embedding_bag_max,
         _ins(((100000, 64), f32), ((1024, 8), torch.int64, "index:100000"))),
    Case("leaky where clamp f32 16M", leaky_where_clamp, _ins(((1 << 24,), f32))),
    Case("adam-style update f32 16M", adam_update,
         _ins(((1 << 24,), f32), ((1 << 24,), f32), ((1 << 24,), f32, "positive"))),
    Case("inf norm rows f32 8192x1024", inf_norm_rows, _ins(((8192, 1024), f32))),
    Case("cross product f32 1Mx3", cross_product, _ins(((1 << 20, 3), f32), ((1 << 20, 3), f32))),
    Case("count nonzero rows of a mask f32 4096x4096", count_nonzero_rows,
         _ins(((4096, 4096), f32, "mask"))),
    Case("nearest resize to odd 37x53 f32 16x64x128x128", nearest_to_odd_size,
         _ins(((16, 64, 128, 128), f32))),
    Case("atan2 f32 16M", atan2_pair, _ins(((1 << 24,), f32), ((1 << 24,), f32))),
    Case("floor divide int64 4M", floor_divide_int64,
         _ins(((1 << 22,), torch.int64, "index:100000"), ((1 << 22,), torch.int64, "index:1000"))),
    Case("repeat 1x4x1 f32 64x256x1024", repeat_tile, _ins(((64, 256, 1024), f32))),
    Case("circular pad + conv 3x3 f32 8x64x56x56", circular_pad_conv,
         _ins(((8, 64, 56, 56), f32), ((64, 64, 3, 3), f32))),
    # products with a side of at most four columns, which the matrix-vector template takes
    Case("regression head f32 4096x1024 -> 3", linear,
         _ins(((4096, 1024), f32), ((3, 1024), f32), ((3,), f32))),
    Case("image output conv 3x3 64->3ch f32 4x64x128x128", conv_3x3_same,
         _ins(((4, 64, 128, 128), f32), ((3, 64, 3, 3), f32))),
    Case("value head f16 2048x4096 -> 1", linear,
         _ins(((2048, 4096), f16), ((1, 4096), f16), ((1,), f16))),
)
BREADTH5_CASES: tuple[Case, ...] = (
    Case("diff rows f32 4096x4096", diff_rows, _ins(((4096, 4096), f32))),
    Case("trapezoid rows f32 4096x1024", trapezoid_rows, _ins(((4096, 1024), f32))),
    Case("pairwise distance f32 8192x256", pairwise_l2, _ins(((8192, 256), f32), ((8192, 256), f32))),
    Case("xlogy f32 16M", xlogy_pair, _ins(((1 << 24,), f32), ((1 << 24,), f32, "positive"))),
    Case("logaddexp f32 16M", logaddexp_pair, _ins(((1 << 24,), f32), ((1 << 24,), f32))),
    Case("hypot f32 16M", hypot_pair, _ins(((1 << 24,), f32), ((1 << 24,), f32))),
    Case("sinc f32 16M", sinc_x, _ins(((1 << 24,), f32))),
    Case("take_along_dim rows f32 4096x1024 by 64", take_along_rows,
         _ins(((4096, 1024), f32), ((4096, 64), torch.int64, "index:1024"))),
    Case("scatter_reduce mean 1M into 1000 bins f32", scatter_reduce_mean,
         _ins(((1 << 20,), f32), ((1 << 20,), torch.int64, "index:1000"))),
    Case("conv_transpose3d 2x2x2 s2 32->16ch f32 2x32x8x16x16", conv_transpose3d_2,
         _ins(((2, 32, 8, 16, 16), f32), ((32, 16, 2, 2, 2), f32))),
    Case("gru cell 16 steps f32 64x256 hidden 512", gru_cell_steps,
         _ins(((64, 256), f32), ((64, 512), f32), ((1536, 256), f32), ((1536, 512), f32))),
    Case("alibi attention f32 1x8x512x64", alibi_attention,
         _ins(((1, 8, 512, 64), f32), ((1, 8, 512, 64), f32), ((1, 8, 512, 64), f32))),
    Case("complex rotary f32 1x32x512x128", complex_rotary,
         _ins(((1, 32, 512, 128), f32), ((512, 64), f32), ((512, 64), f32))),
    Case("rfft magnitude f32 64x4096", rfft_magnitude, _ins(((64, 4096), f32))),
    Case("area resize to odd 37x53 f32 4x64x128x128", area_resize_odd,
         _ins(((4, 64, 128, 128), f32))),
    Case("cumsum int32 rows 64x8192", cumsum_int32_rows, _ins(((64, 8192), torch.int32, "index:100"))),
    Case("argsort descending stable ints 64x4096", argsort_descending_stable_ints,
         _ins(((64, 4096), torch.int32, "index:50"))),
    Case("sort rows bf16 256x2048", sort_rows_values, _ins(((256, 2048), bf16))),
    Case("log_softmax over dim 0 f32 1024x4096", log_softmax_first, _ins(((1024, 4096), f32))),
    Case("nansum rows f32 4096x4096", nansum_rows, _ins(((4096, 4096), f32))),
    Case("baddbmm scaled f32 64x128x128x128", baddbmm_scaled,
         _ins(((64, 128, 128), f32), ((64, 128, 128), f32), ((64, 128, 128), f32))),
    Case("addcdiv update f32 16M", addcdiv_update,
         _ins(((1 << 24,), f32), ((1 << 24,), f32), ((1 << 24,), f32, "positive"))),
    Case("einsum chain ij,jk,kl f32 512^2", matmul_chain_3,
         _ins(((512, 512), f32), ((512, 512), f32), ((512, 512), f32))),
    Case("kron f32 64x64 by 32x32", kron_small, _ins(((64, 64), f32), ((32, 32), f32))),
    Case("max_pool 3x3 s2 dilation 2 ceil f32 8x64x56x56", maxpool_ceil_dilated,
         _ins(((8, 64, 56, 56), f32))),
    Case("top-50 along dim 0 f32 32000x64", topk_columns, _ins(((32000, 64), f32))),
    Case("top-10 int32 rows 64x32000", topk_int_rows, _ins(((64, 32000), torch.int32, "index:100000"))),
    Case("top-40 smallest f16 32x50257", topk_smallest, _ins(((32, 50257), f16))),
)
SUITES = {"issue11": CASES, "llm": LLM_CASES, "breadth": BREADTH_CASES, "breadth2": BREADTH2_CASES,
          "gemm": GEMM_CASES, "windows": WINDOW_CASES, "breadth3": BREADTH3_CASES,
          "breadth4": BREADTH4_CASES, "breadth5": BREADTH5_CASES}
BY_KEY = {c.key: c for suite in SUITES.values() for c in suite}
assert len(BY_KEY) == sum(map(len, SUITES.values())), "two cases share a key"


def select(patterns: str, suite: str = "issue11") -> list[Case]:
    """The suite's cases whose key matches one of the comma-separated regexes (all for "")."""
    cases = SUITES[suite]
    if not patterns:
        return list(cases)
    chosen = [c for c in cases if any(re.search(p, c.key) for p in patterns.split(","))]
    if not chosen:
        raise SystemExit(f"no case key matches {patterns!r}; keys: {', '.join(BY_KEY)}")
    return chosen
