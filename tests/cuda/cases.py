"""End-to-end CUDA cases: MLIR text, argument types and a numpy (float64) reference each."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
from test_math_ops import BINARY, UNARY  # noqa: E402


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
    "matmul_f32_700x900x333": (matmul(700, 900, 333, "f32"),  # 64x64 tiles
                               [((700, 333), "float32"), ((333, 900), "float32")],
                               lambda a, b: a @ b, 1e-5),
    "matmul_f32_1600x1500x37": (matmul(1600, 1500, 37, "f32"),  # 128x128 tiles
                                [((1600, 37), "float32"), ((37, 1500), "float32")],
                                lambda a, b: a @ b, 1e-5),
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


# name: (dtype, unary ops, binary ops) of a test_math_ops.program, measured in ulp against float64
# with exact special values (test_cuda_gpu.py: test_math_ops_within_ulp_bounds).
MATH_CASES = {f"math_{dtype}": (dtype, list(UNARY), list(BINARY)) for dtype in ("f32", "f16", "bf16")}


def random_args(name: str, rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.standard_normal(shape).astype(dtype) for shape, dtype in CASES[name][1]]


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    got, want = got.astype(np.float64), want.astype(np.float64)
    if not np.all(np.isfinite(got)):
        return float("inf")
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
