"""The PyTorch models the end-to-end model tests and benchmarks import, with random weights.

torchvision's MobileNet v2 and ResNet-18 (``weights=None``: no download) and every other
classification model of the zoo sweep (``zoo_models``, bench/models/zoo.py), a GPT-2-style block
written here (causal self-attention, layernorm, tanh-GELU MLP), an MLP and a small CNN. Every
factory seeds torch so that a model is the same in every process that builds it.
"""

from __future__ import annotations

import math
import sys
import types

import torch
from torch import nn

ZOO_LIMIT_BYTES = 50_000_000  # issue 26: the classification models whose weights are under ~50 MB


def _torchvision():
    # torchvision's wheels are CUDA builds; with a CPU-only torch its C++ ops (nms, roi_align)
    # do not load and its meta registrations fail at import. The models used here need neither.
    if not torch.cuda.is_available() and "torchvision" not in sys.modules:
        sys.modules.setdefault("torchvision._meta_registrations",
                               types.ModuleType("torchvision._meta_registrations"))
    import torchvision
    return torchvision


class GPT2Block(nn.Module):
    """One GPT-2 transformer block: pre-layernorm causal attention and a tanh-GELU MLP."""

    def __init__(self, width: int = 256, heads: int = 4, seq: int = 128):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width)
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width)
        self.c_fc = nn.Linear(width, 4 * width)
        self.mlp_proj = nn.Linear(4 * width, width)
        mask = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
        self.register_buffer("bias", mask.view(1, 1, seq, seq))

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        scores = scores.masked_fill(~self.bias[:, :, :t, :t], float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln_1(x))
        h = nn.functional.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")
        return x + self.mlp_proj(h)


class MLP(nn.Module):
    def __init__(self, sizes=(37, 64, 48, 10)):
        super().__init__()
        layers = []
        for a, b in zip(sizes, sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.net = nn.Sequential(*layers[:-1])

    def forward(self, x):
        return self.net(x)


class SmallCNN(nn.Module):
    """Conv (strided, padded, dilated), depthwise conv, batchnorm, pooling and a classifier head:
    every op family of the large CNNs at a size the CI machine runs in a second."""

    def __init__(self, channels: int = 3, classes: int = 7):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channels, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU6(),
            nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 12, 1), nn.MaxPool2d(3, stride=2, padding=1),
            nn.Conv2d(12, 12, 3, padding=2, dilation=2), nn.ReLU(), nn.AvgPool2d(2))
        self.head = nn.Linear(12, classes)

    def forward(self, x):
        y = self.features(x)
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


def zoo_model(name: str) -> nn.Module:
    """torchvision's classification model ``name`` with seeded random weights and batchnorm
    statistics, in eval mode: the same weights in every process that builds it."""
    torch.manual_seed(0)
    return _init_batchnorm(_torchvision().models.get_model(name, weights=None).eval())


def zoo_models(limit_bytes: int = ZOO_LIMIT_BYTES) -> dict[str, int]:
    """name -> parameter count of every torchvision classification model whose fp32 weights
    (its weights enum's ``num_params``) fit in ``limit_bytes``: the sweep follows torchvision's
    own list, so a model torchvision adds is swept without an edit here."""
    models = _torchvision().models
    counts = {name: models.get_model_weights(name).DEFAULT.meta["num_params"]
              for name in models.list_models(module=models)}
    return {name: n for name, n in counts.items() if 4 * n <= limit_bytes}


def zoo_input(size: int = 224, seed: int = 0) -> torch.Tensor:
    """One random NCHW image, batch 1."""
    return torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(seed))


def mobilenet_v2() -> nn.Module:
    return zoo_model("mobilenet_v2")


def resnet18() -> nn.Module:
    return zoo_model("resnet18")


def gpt2_block(width: int = 256, heads: int = 4, seq: int = 128) -> nn.Module:
    torch.manual_seed(0)
    return GPT2Block(width, heads, seq).eval()


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return MLP().eval()


def small_cnn() -> nn.Module:
    torch.manual_seed(0)
    return _init_batchnorm(SmallCNN().eval())


def _init_batchnorm(model: nn.Module) -> nn.Module:
    """Random running statistics, so that batchnorm is not the identity it is when fresh."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return model


class NHWCPredict(nn.Module):
    """The IREE deployment guides' calling convention: ``predict`` takes one NHWC image."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, image):
        return self.model(image.permute(0, 3, 1, 2))


def mobilenet_v2_nhwc() -> nn.Module:
    return NHWCPredict(mobilenet_v2()).eval()


def mlp_f16() -> nn.Module:
    return mlp().half()


# name -> (factory, example input shape, input dtype, exported function name)
MODELS = {
    "mlp": (mlp, (5, 37), torch.float32, "main"),
    "mlp_f16": (mlp_f16, (5, 37), torch.float16, "main"),
    "small_cnn": (small_cnn, (2, 3, 33, 29), torch.float32, "main"),
    "gpt2_block": (gpt2_block, (1, 128, 256), torch.float32, "main"),
    "mobilenet_v2": (mobilenet_v2, (1, 3, 224, 224), torch.float32, "main"),
    "mobilenet_v2_nhwc": (mobilenet_v2_nhwc, (1, 224, 224, 3), torch.float32, "predict"),
    "resnet18": (resnet18, (1, 3, 224, 224), torch.float32, "main"),
}


def example_input(name: str, seed: int = 0) -> torch.Tensor:
    _, shape, dtype, _ = MODELS[name]
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def weights_checksum(model: nn.Module) -> float:
    """A float64 sum over every parameter and buffer: equal models on two hosts agree on it."""
    return float(sum(t.detach().double().abs().sum() for t in model.state_dict().values()
                     if t.is_floating_point()))
