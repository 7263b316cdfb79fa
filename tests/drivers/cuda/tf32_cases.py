"""f32 matmuls and convolutions for ``--pyree-cuda-f32-matmul=tf32|3xtf32`` on a GPU: MLIR, the
arguments' shapes and a float64 reference with its scale (sum |a| |b|, what TF32's rounding is
relative to). Shared by test_cuda_tf32_on_gpu.py and build_tf32_modules.py; no compiler import here."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "flow"))
from conv_cases import Conv  # noqa: E402

MODES = ("tf32", "3xtf32")
# Bounds on |got - want| / (sum |a| |b| + |bias|): TF32 rounds each operand to 2^-11; 3xtf32 is
# about f32's own accuracy.
BOUND = {"tf32": 1e-3, "3xtf32": 1e-5}


def _t(shape, dtype="f32") -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{dtype}>"


def _matmul(op: str, a, b, c) -> str:
    return f"""func.func @main(%a: {_t(a)}, %b: {_t(b)}) -> {_t(c)} {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {_t(c)}
  %f = linalg.fill ins(%zero : f32) outs(%e : {_t(c)}) -> {_t(c)}
  %0 = linalg.{op} ins(%a, %b : {_t(a)}, {_t(b)}) outs(%f : {_t(c)}) -> {_t(c)}
  return %0 : {_t(c)}
}}"""


class Case:
    def __init__(self, mlir: str, shapes: list[tuple], reference, scale):
        self.mlir, self.shapes, self.reference, self.scale = mlir, shapes, reference, scale


def matmul(m: int, n: int, k: int, batch: int = 0, weight_nk: bool = False) -> Case:
    """``a @ b``; ``weight_nk``: b given as [n, k] (a linear layer's weight)."""
    lead = (batch,) if batch else ()
    b_shape = lead + ((n, k) if weight_nk else (k, n))
    op = ("batch_" if batch else "") + "matmul" + ("_transpose_b" if weight_nk else "")

    def right(b):
        return np.swapaxes(b, -1, -2) if weight_nk else b
    return Case(_matmul(op, lead + (m, k), b_shape, lead + (m, n)), [lead + (m, k), b_shape],
                lambda a, b: a @ right(b), lambda a, b: np.abs(a) @ np.abs(right(b)))


def conv(c: Conv) -> Case:
    xs, _, ws, _ = c.shapes()

    def scale(x, w, b):
        return c.reference(np.abs(x), np.abs(w), np.abs(b))
    return Case(c.mlir(), [xs, ws, (c.f,)], c.reference, scale)


CASES = {
    "mm_7x129x1000": matmul(7, 129, 1000),
    "mm_127x1000x129": matmul(127, 1000, 129),
    "mm_129x127x7": matmul(129, 127, 7),
    "mm_1000x1000x127": matmul(1000, 1000, 127),
    "mm_1x1000x129": matmul(1, 1000, 129),             # a matrix-vector product: stays strict
    "mm_nk_129x1000x127": matmul(129, 1000, 127, weight_nk=True),
    "mm_nk_1000x7x1000": matmul(1000, 7, 1000, weight_nk=True),
    "bmm_3x129x127x65": matmul(129, 127, 65, batch=3),
    "bmm_nk_5x127x129x1000": matmul(127, 129, 1000, batch=5, weight_nk=True),
    # large enough for wgmma on sm_90a (matmul_wgmma._fills: a block per multiprocessor)
    "mm_nk_1037x1100x29": matmul(1037, 1100, 29, weight_nk=True),
    "bmm_nk_12x300x257x136": matmul(300, 257, 136, batch=12, weight_nk=True),
    # ResNet-like convolutions, odd spatial sizes: implicit GEMMs where the channels fill 4-element
    # chunks, else (3 or 19 channels) an im2col copy and a GEMM
    "conv_3x3_64x15x13_f64": conv(Conv(c=64, h=15, w=13, f=64, kh=3, kw=3, pad=(1, 1), bias_relu=True)),
    "conv_1x1_64x15x13_f128": conv(Conv(c=64, h=15, w=13, f=128, kh=1, kw=1)),
    "conv_3x3_s2_32x29x31_f64": conv(Conv(n=2, c=32, h=29, w=31, f=64, kh=3, kw=3, stride=(2, 2),
                                          pad=(1, 1))),
    "conv_1x1_s2_64x29x27_f128": conv(Conv(c=64, h=29, w=27, f=128, kh=1, kw=1, stride=(2, 2))),
    "conv_7x7_s2_3x61x59_f64": conv(Conv(c=3, h=61, w=59, f=64, kh=7, kw=7, stride=(2, 2), pad=(3, 3))),
    "conv_nhwc_3x3_48x17x19_f40": conv(Conv(layout="nhwc", c=48, h=17, w=19, f=40, kh=3, kw=3,
                                            pad=(1, 1))),
    "conv_grouped_dil_2x2x8x13x11_f16": conv(Conv(layout="ngchw", n=2, groups=2, c=8, h=13, w=11,
                                                  f=16, kh=3, kw=3, dilation=(1, 2), pad=(1, 2))),
    "conv_3x3_19x23x17_f37": conv(Conv(c=19, h=23, w=17, f=37, kh=3, kw=3, pad=(1, 1))),  # im2col
}
# the cases that also run with NaN and +-inf in their operands (mma.sync, and wgmma on sm_90a)
SPECIALS = ("mm_127x1000x129", "mm_nk_1037x1100x29")


def module_name(name: str, mode: str) -> str:
    return f"tf32_{name}_{mode}"


def flags(mode: str) -> list[str]:
    return [f"--pyree-cuda-f32-matmul={mode}"]
