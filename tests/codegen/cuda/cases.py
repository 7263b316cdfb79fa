"""End-to-end CUDA cases: MLIR text, argument types and a numpy (float64) reference each."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e"))
from test_math_ops import BINARY, UNARY, np_dtype  # noqa: E402


def _t(shape, dtype):
    return f"tensor<{'x'.join(map(str, shape))}x{dtype}>"


def add(m, n):
    t = _t((m, n), "f32")
    return f"""func.func @main(%a: {t}, %b: {t}) -> {t} {{
  %0 = arith.addf %a, %b : {t}
  return %0 : {t}
}}"""


def chain(m, n):
    t = _t((m, n), "f32")
    return f"""func.func @main(%a: {t}, %b: {t}) -> {t} {{
  %0 = arith.mulf %a, %b : {t}
  %1 = math.tanh %0 : {t}
  %2 = math.exp %1 : {t}
  %3 = arith.subf %2, %a : {t}
  return %3 : {t}
}}"""


def reduce(m, n, op):
    t, r = _t((m, n), "f32"), _t((m,), "f32")
    init = "0.0" if op == "addf" else "0xFF800000"
    return f"""func.func @main(%a: {t}) -> {r} {{
  %init = arith.constant {init} : f32
  %e = tensor.empty() : {r}
  %f = linalg.fill ins(%init : f32) outs(%e : {r}) -> {r}
  %0 = linalg.reduce ins(%a : {t}) outs(%f : {r}) dimensions = [1]
    (%x: f32, %acc: f32) {{
      %s = arith.{op} %x, %acc : f32
      linalg.yield %s : f32
    }}
  return %0 : {r}
}}"""


def matmul(m, n, k, dtype):
    a, b, c = _t((m, k), dtype), _t((k, n), dtype), _t((m, n), "f32")
    return f"""func.func @main(%a: {a}, %b: {b}) -> {c} {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {c}
  %f = linalg.fill ins(%zero : f32) outs(%e : {c}) -> {c}
  %0 = linalg.matmul ins(%a, %b : {a}, {b}) outs(%f : {c}) -> {c}
  return %0 : {c}
}}"""


def linear_f32_relu(m, n, k):
    """relu(a @ b + bias): a SIMT contraction whose epilogue loads per column."""
    a, b, c, bias = _t((m, k), "f32"), _t((k, n), "f32"), _t((m, n), "f32"), _t((n,), "f32")
    maps = "affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, " \
           "affine_map<(d0, d1) -> (d0, d1)>"
    epilogue = _generic(maps, [("%0", c), ("%bias", bias)], ("%e", c),
                        "    %s = arith.addf %x0, %x1 : f32\n    %y = arith.maximumf %s, %zero : f32")
    return f"""func.func @main(%a: {a}, %b: {b}, %bias: {bias}) -> {c} {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {c}
  %f = linalg.fill ins(%zero : f32) outs(%e : {c}) -> {c}
  %0 = linalg.matmul ins(%a, %b : {a}, {b}) outs(%f : {c}) -> {c}
  %1 = {epilogue}
  return %1 : {c}
}}"""


def _generic(maps: str, ins: list[tuple[str, str]], out: tuple[str, str], body: str, iterators: int = 2) -> str:
    """A parallel linalg.generic; ``body`` uses %x0.. for the inputs and yields %y."""
    names = ", ".join(n for n, _ in ins)
    types = ", ".join(t for _, t in ins)
    args = ", ".join(f"%x{i}: {t.split('x')[-1].rstrip('>')}" for i, (_, t) in enumerate(ins))
    out_elem = out[1].split("x")[-1].rstrip(">")
    its = ", ".join(['"parallel"'] * iterators)
    return (f"linalg.generic {{indexing_maps = [{maps}], iterator_types = [{its}]}} "
            f"ins({names} : {types}) outs({out[0]} : {out[1]}) {{\n"
            f"  ^bb0({args}, %o: {out_elem}):\n{body}\n    linalg.yield %y : {out_elem}\n  }} -> {out[1]}")


def narrow_matmul(m, n, k, dtype, batch=0, epilogue="", weight=False):
    """What torch-mlir imports for an f16/bf16 ``a @ b`` (``torch.bmm`` with ``batch``): a matmul of
    the narrow operands into an f32 accumulator, then truncf to ``dtype``; with ``weight``
    ``F.linear(a, w, bias)`` (+ ``epilogue``: "gelu" (tanh) or "residual"), where the operands
    are extended to f32 first, w is ``[n, k]`` and is transposed."""
    lead = (batch,) if batch else ()
    acc, out = _t(lead + (m, n), "f32"), _t(lead + (m, n), dtype)
    id2 = "affine_map<(d0, d1) -> (d0, d1)>"
    row = "affine_map<(d0, d1) -> (d1)>"
    args = [f"%a: {_t(lead + (m, k), dtype)}"]
    lines = ["%zero = arith.constant 0.0 : f32", f"%e = tensor.empty() : {acc}",
             f"%f = linalg.fill ins(%zero : f32) outs(%e : {acc}) -> {acc}"]
    if not weight:
        a, b = _t(lead + (m, k), dtype), _t(lead + (k, n), dtype)
        args.append(f"%b: {b}")
        op = "batch_matmul" if batch else "matmul"
        lines.append(f"%acc = linalg.{op} ins(%a, %b : {a}, {b}) outs(%f : {acc}) -> {acc}")
    else:
        w, wt, a32, wt32, bias32 = (_t((n, k), dtype), _t((k, n), dtype), _t((m, k), "f32"),
                                    _t((k, n), "f32"), _t((n,), "f32"))
        args += [f"%w: {w}", f"%bias: {_t((n,), dtype)}"]
        extf = f"    %y = arith.extf %x0 : {dtype} to f32"
        lines += [f"%wte = tensor.empty() : {wt}",
                  f"%wt = linalg.transpose ins(%w : {w}) outs(%wte : {wt}) permutation = [1, 0]",
                  f"%a32e = tensor.empty() : {a32}",
                  "%a32 = " + _generic(f"{id2}, {id2}", [("%a", _t((m, k), dtype))], ("%a32e", a32), extf),
                  f"%wt32e = tensor.empty() : {wt32}",
                  "%wt32 = " + _generic(f"{id2}, {id2}", [("%wt", wt)], ("%wt32e", wt32), extf),
                  f"%b32e = tensor.empty() : {bias32}",
                  "%b32 = " + _generic("affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>",
                                       [("%bias", _t((n,), dtype))], ("%b32e", bias32), extf, 1),
                  f"%mm = linalg.matmul ins(%a32, %wt32 : {a32}, {wt32}) outs(%f : {acc}) -> {acc}",
                  "%acc = " + _generic(f"{id2}, {row}, {id2}", [("%mm", acc), ("%b32", bias32)], ("%e", acc),
                                       "    %y = arith.addf %x0, %x1 : f32")]
    maps = ", ".join([f"affine_map<({', '.join(f'd{i}' for i in range(len(lead) + 2))}) -> "
                      f"({', '.join(f'd{i}' for i in range(len(lead) + 2))})>"] * 2)
    lines += [f"%oe = tensor.empty() : {out}",
              "%r = " + _generic(maps, [("%acc", acc)], ("%oe", out),
                                 f"    %y = arith.truncf %x0 : f32 to {dtype}", len(lead) + 2)]
    if epilogue == "residual":
        args.append(f"%res: {out}")
        lines.append("%r2 = " + _generic(f"{id2}, {id2}, {id2}", [("%r", out), ("%res", out)], ("%oe", out),
                                          f"    %y = arith.addf %x0, %x1 : {dtype}"))
    elif epilogue == "gelu":  # 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), in dtype
        lines.append("%r2 = " + _generic(f"{id2}, {id2}", [("%r", out)], ("%oe", out), f"""\
    %half = arith.constant 0.5 : {dtype}
    %one = arith.constant 1.0 : {dtype}
    %c = arith.constant 0.7978845608 : {dtype}
    %d = arith.constant 0.044715 : {dtype}
    %x2 = arith.mulf %x0, %x0 : {dtype}
    %x3 = arith.mulf %x2, %x0 : {dtype}
    %t0 = arith.mulf %x3, %d : {dtype}
    %t1 = arith.addf %x0, %t0 : {dtype}
    %t2 = arith.mulf %t1, %c : {dtype}
    %t3 = math.tanh %t2 : {dtype}
    %t4 = arith.addf %t3, %one : {dtype}
    %t5 = arith.mulf %t4, %half : {dtype}
    %y = arith.mulf %x0, %t5 : {dtype}"""))
    result = "%r2" if epilogue else "%r"
    body = "\n  ".join(lines)
    return f"""func.func @main({", ".join(args)}) -> {out} {{
  {body}
  return {result} : {out}
}}"""


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _linear(x, w, bias):
    return x @ w.T + bias


def _tanh_chain(a, b):
    return np.exp(np.tanh(a * b)) - a


CASES = {
    # name: (mlir, [(shape, dtype) per argument], reference(*float64 args), rtol)
    "add_37x53": (add(37, 53), [((37, 53), "float32")] * 2, lambda a, b: a + b, 1e-6),
    "add_64x1024": (add(64, 1024), [((64, 1024), "float32")] * 2, lambda a, b: a + b, 1e-6),
    "chain_37x53": (chain(37, 53), [((37, 53), "float32")] * 2, _tanh_chain, 1e-5),
    "row_sum_37x1531": (reduce(37, 1531, "addf"), [((37, 1531), "float32")],
                        lambda a: a.sum(1), 1e-5),
    "row_max_41x333": (reduce(41, 333, "maximumf"), [((41, 333), "float32")],
                       lambda a: a.max(1), 0.0),
    "row_sum_37x45": (reduce(37, 45, "addf"), [((37, 45), "float32")], lambda a: a.sum(1), 1e-5),
    "matmul_f32_37x53x61": (matmul(37, 53, 61, "f32"), [((37, 61), "float32"), ((61, 53), "float32")],
                            lambda a, b: a @ b, 1e-5),
    "matmul_f32_257x131x67": (matmul(257, 131, 67, "f32"),
                              [((257, 67), "float32"), ((67, 131), "float32")],
                              lambda a, b: a @ b, 1e-5),
    "matmul_f32_700x900x333": (matmul(700, 900, 333, "f32"),  # K split 3 ways (GPU modules)
                               [((700, 333), "float32"), ((333, 900), "float32")],
                               lambda a, b: a @ b, 1e-5),
    # K below LONG_K, split for GPU modules (flow/split_reduction.py: GPU_MIN_K_CHUNK): 15 chunks
    "matmul_f32_split_k_160x49x960": (matmul(160, 49, 960, "f32"),
                                      [((160, 960), "float32"), ((960, 49), "float32")],
                                      lambda a, b: a @ b, 1e-5),
    "matmul_f32_1600x1500x37": (matmul(1600, 1500, 37, "f32"),  # 128x128 tiles
                                [((1600, 37), "float32"), ((37, 1500), "float32")],
                                lambda a, b: a @ b, 1e-5),
    # SIMT tiles store runs of 4 (128x128) and 2 (64x64) columns as one vector where the row is
    # aligned and the run inside; tails in m and n take the scalar stores (900 and 2052: runs
    # straddle n's end). The epilogue loads the bias per column.
    "linear_f32_relu_1030x2052x45": (linear_f32_relu(1030, 2052, 45),
                                     [((1030, 45), "float32"), ((45, 2052), "float32"),
                                      ((2052,), "float32")],
                                     lambda a, b, bias: np.maximum(a @ b + bias, 0), 1e-5),
    "linear_f32_relu_700x900x133": (linear_f32_relu(700, 900, 133),
                                    [((700, 133), "float32"), ((133, 900), "float32"),
                                     ((900,), "float32")],
                                    lambda a, b, bias: np.maximum(a @ b + bias, 0), 1e-5),
    "matmul_f16_37x53x61": (matmul(37, 53, 61, "f16"), [((37, 61), "float16"), ((61, 53), "float16")],
                            lambda a, b: a @ b, 1e-3),
    "matmul_f16_tc_256x384x96": (matmul(256, 384, 96, "f16"),  # the tensor-core template
                                 [((256, 96), "float16"), ((96, 384), "float16")],
                                 lambda a, b: a @ b, 1e-5),
    "matmul_f16_tc_128x256x320": (matmul(128, 256, 320, "f16"),  # a longer k pipeline
                                  [((128, 320), "float16"), ((320, 256), "float16")],
                                  lambda a, b: a @ b, 1e-5),
    "matmul_f16_tc_128x384x128": (matmul(128, 384, 128, "f16"),
                                  [((128, 128), "float16"), ((128, 384), "float16")],
                                  lambda a, b: a @ b, 1e-5),
    "matmul_f16_tc_128x256x96": (matmul(128, 256, 96, "f16"),
                                 [((128, 96), "float16"), ((96, 256), "float16")],
                                 lambda a, b: a @ b, 1e-5),
    "matmul_f16_wg_256x512x192": (matmul(256, 512, 192, "f16"),  # wgmma n256 on sm_90a
                                  [((256, 192), "float16"), ((192, 512), "float16")],
                                  lambda a, b: a @ b, 1e-5),
    "matmul_f16_wg_128x384x640": (matmul(128, 384, 640, "f16"),  # wgmma n128, stages wrap
                                  [((128, 640), "float16"), ((640, 384), "float16")],
                                  lambda a, b: a @ b, 1e-5),
    "matmul_f16_259x133x71": (matmul(259, 133, 71, "f16"),
                              [((259, 71), "float16"), ((71, 133), "float16")],
                              lambda a, b: a @ b, 1e-3),
}

# f16/bf16 contractions on tensor cores (wgmma on sm_90a, mma.sync on sm_80/sm_90): bf16, B as
# [n, k] (linear), batch, fused epilogues, tails on every side, unaligned rows (k = 29, 65: scalar
# staging), M = 1; the big ones take the wide tiles (wgmma n256 / n128). The 16-bit results are
# rounded once: 2^-11 (f16) and 2^-8 (bf16) relative at most.
_F16, _BF16 = "float16", "bfloat16"
TENSOR_CORE_CASES = {
    "matmul_bf16_tc_256x384x96": (matmul(256, 384, 96, "bf16"), [((256, 96), _BF16), ((96, 384), _BF16)],
                                  lambda a, b: a @ b, 1e-5),
    "matmul_bf16_37x53x29": (matmul(37, 53, 29, "bf16"), [((37, 29), _BF16), ((29, 53), _BF16)],
                             lambda a, b: a @ b, 1e-5),
    "mm_f16_129x257x65": (narrow_matmul(129, 257, 65, "f16"), [((129, 65), _F16), ((65, 257), _F16)],
                          lambda a, b: a @ b, 1e-3),
    "mm_bf16_2048x2048x192": (narrow_matmul(2048, 2048, 192, "bf16"),
                              [((2048, 192), _BF16), ((192, 2048), _BF16)], lambda a, b: a @ b, 8e-3),
    "bmm_f16_3x37x53x29": (narrow_matmul(37, 53, 29, "f16", batch=3),
                           [((3, 37, 29), _F16), ((3, 29, 53), _F16)], lambda a, b: a @ b, 1e-3),
    "linear_f16_gelu_129x257x72": (narrow_matmul(129, 257, 72, "f16", epilogue="gelu", weight=True),
                                   [((129, 72), _F16), ((257, 72), _F16), ((257,), _F16)],
                                   lambda x, w, b: _gelu_tanh(_linear(x, w, b)), 5e-3),
    "linear_f16_gelu_split_k_128x256x256": (  # 4 chunks of 64, GELU in the final fold
        narrow_matmul(128, 256, 256, "f16", epilogue="gelu", weight=True),
        [((128, 256), _F16), ((256, 256), _F16), ((256,), _F16)],
        lambda x, w, b: _gelu_tanh(_linear(x, w, b)), 5e-3),
    "linear_bf16_gelu_37x53x29": (narrow_matmul(37, 53, 29, "bf16", epilogue="gelu", weight=True),
                                  [((37, 29), _BF16), ((53, 29), _BF16), ((53,), _BF16)],
                                  lambda x, w, b: _gelu_tanh(_linear(x, w, b)), 3e-2),
    "linear_f16_residual_2048x2304x128": (
        narrow_matmul(2048, 2304, 128, "f16", epilogue="residual", weight=True),
        [((2048, 128), _F16), ((2304, 128), _F16), ((2304,), _F16), ((2048, 2304), _F16)],
        lambda x, w, b, r: _linear(x, w, b) + r, 2e-3),
    "linear_bf16_2048x2048x192": (narrow_matmul(2048, 2048, 192, "bf16", weight=True),
                                  [((2048, 192), _BF16), ((2048, 192), _BF16), ((2048,), _BF16)],
                                  _linear, 8e-3),
}
CASES.update(TENSOR_CORE_CASES)

# Matrix-vector products (m or n <= 4: common/llvm_gpu/matmul_gemv.py): lanes along n where the right operand is
# [K, N], along k where it is a linear layer's [N, K] weight; K split in 128-deep chunks below 1024
# (771 = 3 x 257: 3 chunks), 256-deep from 1024; an odd K unsplit; batch; fused bias and GELU.
CASES.update({
    "gemv_f32_1x3077x771": (matmul(1, 3077, 771, "f32"), [((1, 771), "float32"), ((771, 3077), "float32")],
                            lambda a, b: a @ b, 1e-5),
    "gemv_f32_3x517x1283": (matmul(3, 517, 1283, "f32"), [((3, 1283), "float32"), ((1283, 517), "float32")],
                            lambda a, b: a @ b, 1e-5),
    "gemv_f32_relu_2x1031x97": (linear_f32_relu(2, 1031, 97),
                                [((2, 97), "float32"), ((97, 1031), "float32"), ((1031,), "float32")],
                                lambda a, b, bias: np.maximum(a @ b + bias, 0), 1e-5),
    "gemv_f16_linear_1x771x1024": (narrow_matmul(1, 771, 1024, "f16", weight=True),
                                   [((1, 1024), _F16), ((771, 1024), _F16), ((771,), _F16)], _linear, 2e-3),
    "gemv_bf16_gelu_4x129x65": (narrow_matmul(4, 129, 65, "bf16", epilogue="gelu", weight=True),
                                [((4, 65), _BF16), ((129, 65), _BF16), ((129,), _BF16)],
                                lambda x, w, b: _gelu_tanh(_linear(x, w, b)), 3e-2),
    "mm_f16_1x512x4096": (narrow_matmul(1, 512, 4096, "f16"), [((1, 4096), _F16), ((4096, 512), _F16)],
                          lambda a, b: a @ b, 1e-3),
    "bmm_bf16_32x1x512x128": (narrow_matmul(1, 512, 128, "bf16", batch=32),
                              [((32, 1, 128), _BF16), ((32, 128, 512), _BF16)], lambda a, b: a @ b, 8e-3),
    "bgemv_f16_5x2x333x640": (narrow_matmul(2, 333, 640, "f16", batch=5),
                              [((5, 2, 640), _F16), ((5, 640, 333), _F16)], lambda a, b: a @ b, 2e-3),
    # n <= 4: the template's m and n swapped, the left operand read as its matrix
    "gemv_columns_f32_1031x1x771": (matmul(1031, 1, 771, "f32"),
                                    [((1031, 771), "float32"), ((771, 1), "float32")],
                                    lambda a, b: a @ b, 1e-5),
    "gemv_columns_f16_linear_517x3x1024": (narrow_matmul(517, 3, 1024, "f16", weight=True),
                                           [((517, 1024), _F16), ((3, 1024), _F16), ((3,), _F16)],
                                           _linear, 2e-3),
    "bgemv_columns_bf16_6x333x2x640": (narrow_matmul(333, 2, 640, "bf16", batch=6),
                                       [((6, 333, 640), _BF16), ((6, 640, 2), _BF16)],
                                       lambda a, b: a @ b, 8e-3),
})

# Convolutions: f16 ones with whole 8-channel chunks as implicit GEMMs (flow/implicit_gemm.py:
# channels-last image and filter, patches gathered into the tensor-core tiles 16 bytes at a time)
# with pads, strides, dilations, groups, batch and tails on every side; 3 channels (the stem) and
# f32 keep the im2col copy.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "flow"))
from conv_cases import Conv  # noqa: E402

_NP_NAME = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def _conv_case(conv: Conv, rtol: float):
    xs, _, ws, _ = conv.shapes()
    args = [(xs, _NP_NAME[conv.dtype]), (ws, _NP_NAME[conv.dtype]), ((conv.f,), "float32")]
    return conv.mlir(), args, conv.reference, rtol


CONV_CASES = {
    "conv_f16_nchw_pad_2x24x23x17_f37": _conv_case(
        Conv(dtype="f16", n=2, c=24, h=23, w=17, f=37, kh=3, kw=3, pad=(1, 1)), 1e-5),
    "conv_f16_nchw_s2_dil_64x29x31_f72_relu": _conv_case(
        Conv(dtype="f16", c=64, h=29, w=31, f=72, kh=3, kw=3, stride=(2, 2), dilation=(1, 2),
             pad=(1, 2), bias_relu=True), 1e-5),
    "conv_f16_nchw_7x7_s2_3x61x59_f64": _conv_case(  # im2col
        Conv(dtype="f16", c=3, h=61, w=59, f=64, kh=7, kw=7, stride=(2, 2), pad=(3, 3)), 1e-5),
    "conv_f16_nhwc_s2_2x32x21x19_f24": _conv_case(
        Conv(layout="nhwc", dtype="f16", n=2, c=32, h=21, w=19, f=24, kh=3, kw=3, stride=(2, 2),
             pad=(1, 1)), 1e-5),
    # ResNet-18's stride-2 and layer-4 shapes: K split in 4 and 18 chunks, walks crossing taps
    "conv_f16_nchw_s2_128x28x28_f256_split_k": _conv_case(
        Conv(dtype="f16", c=128, h=28, w=28, f=256, kh=3, kw=3, stride=(2, 2), pad=(1, 1)), 1e-5),
    "conv_f16_nchw_512x7x7_f512_split_k": _conv_case(
        Conv(dtype="f16", c=512, h=7, w=7, f=512, kh=3, kw=3, pad=(1, 1)), 1e-5),
    "conv_f16_grouped_2x3x8x13x11_f16": _conv_case(
        Conv(layout="ngchw", dtype="f16", n=2, groups=3, c=8, h=13, w=11, f=16, kh=3, kw=3,
             pad=(1, 1)), 1e-5),
    "conv_bf16_nchw_pad_16x13x11_f24_relu": _conv_case(
        Conv(dtype="bf16", c=16, h=13, w=11, f=24, kh=3, kw=3, pad=(1, 1), bias_relu=True), 1e-5),
    "conv_f32_nchw_pad_2x19x23x17_f37_relu": _conv_case(  # im2col
        Conv(n=2, c=19, h=23, w=17, f=37, kh=3, kw=3, pad=(1, 1), bias_relu=True), 1e-5),
}
CASES.update(CONV_CASES)

# Row kernels (issue 11): softmax, log_softmax, layernorm and rmsnorm as one dispatch each, on the
# block template (rows of 128 or more), one thread per row (shorter rows), rows of 1 and 7, and a
# vocabulary-long row that stays split reductions. Special values are checked on CPU and Vulkan
# (tests/flow/test_row_kernels.py, tests/drivers/vulkan/test_vulkan_row_kernels.py).
import row_kernel_cases as _rows  # noqa: E402

_ROW_NP = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
_ROW_RTOL = {"f32": 1e-5, "f16": 2e-3, "bf16": 1e-2}


def _row_case(kind: str, m: int, n: int, dtype: str):
    vectors = {"layernorm": 2, "rmsnorm": 1}.get(kind, 0)
    args = [((m, n), _ROW_NP[dtype])] + [((n,), _ROW_NP[dtype])] * vectors
    return (_rows.mlir(kind, m, n, dtype), args,
            lambda *a, kind=kind: _rows.reference(kind, *a), _ROW_RTOL[dtype])


CASES.update({f"{kind}_{dtype}_{m}x{n}": _row_case(kind, m, n, dtype)
              for kind in ("softmax", "log_softmax", "layernorm", "rmsnorm")
              for dtype in ("f32", "f16", "bf16")
              for m, n in ((37, 1000), (5, 45))})
CASES.update({f"{kind}_f32_{m}x{n}": _row_case(kind, m, n, "f32")
              for kind in ("softmax", "log_softmax", "layernorm", "rmsnorm")
              for m, n in ((3, 50257), (1, 7), (37, 129), (37, 1))})
CASES.update({f"softmax_then_{then}_{m}x{n}": (_rows.softmax_then(m, n, then), [((m, n), "float32")],
                                               lambda x, then=then: _rows.softmax_then_reference(then, x),
                                               1e-5)
              for then in ("scale", "entropy") for m, n in ((37, 1000), (5, 45))})

# name: (dtype, unary ops, binary ops) of a test_math_ops.program, measured in ulp against float64
# with exact special values (test_cuda_gpu.py: test_math_ops_within_ulp_bounds).
MATH_CASES = {f"math_{dtype}": (dtype, list(UNARY), list(BINARY)) for dtype in ("f32", "f16", "bf16")}


def random_args(name: str, rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.standard_normal(shape).astype(np_dtype("bf16") if dtype == "bfloat16" else dtype)
            for shape, dtype in CASES[name][1]]


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    got, want = got.astype(np.float64), want.astype(np.float64)
    if not np.all(np.isfinite(got)):
        return float("inf")
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def shufflenet_v2():
    """torchvision's ShuffleNet v2 x0.5 (random weights and batchnorm statistics), its input and
    its MLIR: channel split, concat and shuffle (reshape, transpose, reshape) in every block.
    test_cuda_models.py compiles it; on a GPU, tests/drivers/cuda/test_cuda_pytorch_models.py
    runs it against PyTorch."""
    from tooling import require_module
    torch = require_module("torch")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models"))
    import definitions
    from pyree.compiler import import_torch

    torch.manual_seed(0)
    model = definitions._init_batchnorm(
        definitions._torchvision().models.shufflenet_v2_x0_5(weights=None).eval())
    x = torch.randn((1, 3, 224, 224), generator=torch.Generator().manual_seed(3))
    return model, x, import_torch(model, x, function_name="main")
