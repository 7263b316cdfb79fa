"""Programs and numpy references shared by the CPU and Vulkan tests of special float values and of
the 16-bit float types (f16, bf16), with helpers that compare bit for bit."""

from __future__ import annotations

import math
import struct

import ml_dtypes
import numpy as np
from pyree.compiler._fb.Module import Module, ModuleT

BF16 = np.dtype(ml_dtypes.bfloat16)
NAN32, NINF32, PINF32, NZ32 = 0x7FC00000, 0xFF800000, 0x7F800000, 0x80000000


def bits(a) -> np.ndarray:
    a = np.asarray(a)
    return a.reshape(-1).view(f"u{a.dtype.itemsize}")


def f32(*patterns) -> np.ndarray:
    return np.array(patterns, np.uint32).view(np.float32)


def ptx_of(vmfb: bytes) -> str:
    """The PTX of a module compiled for the cuda target alone."""
    (data_offset,) = struct.unpack_from("<Q", vmfb, len(vmfb) - 40)  # trailer: magic, offset, digest
    (exe,) = ModuleT.InitFromObj(Module.GetRootAs(vmfb, 0)).executables
    ref = exe.cuda.ptx
    return vmfb[data_offset + ref.offset:data_offset + ref.offset + ref.length].decode()


# ---- special values: every form of constant, every path a constant takes -----------------------

T5 = "tensor<5xf32>"
SPECIAL = f"""
func.func @f(%x: {T5}, %h: tensor<5xf16>) -> ({T5}, {T5}, {T5}, tensor<3xf32>, tensor<4xf32>, f32,
                                               tensor<5xf16>, tensor<2xf16>, tensor<3xf32>, tensor<2xi8>) {{
  %ninf = arith.constant 0xFF800000 : f32
  %nan = arith.constant 0x7FC00000 : f32
  %negz = arith.constant -0.0 : f32
  %mask = arith.constant dense<0xFF800000> : {T5}
  %masked = arith.addf %x, %mask : {T5}
  %e = tensor.empty() : {T5}
  %fill = linalg.fill ins(%ninf : f32) outs(%e : {T5}) -> {T5}
  %imm = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                          iterator_types = ["parallel"]}} ins(%x : {T5}) outs(%e : {T5}) {{
  ^bb0(%in: f32, %out: f32):
    %zero = arith.mulf %in, %negz : f32
    %pos = arith.cmpf ogt, %in, %zero : f32
    %s = arith.select %pos, %nan, %ninf : f32
    %t = arith.addf %s, %zero : f32
    linalg.yield %t : f32
  }} -> {T5}
  %list = arith.constant dense<[0x7FC00000, -0.0, 0xFF800000]> : tensor<3xf32>
  %u = util.unfoldable_constant dense<[0x7F800000, -0.0, 1.0e40, 0xFFC00000]> : tensor<4xf32>
  %folded = arith.mulf %ninf, %negz : f32
  %hinf = arith.constant 1.0e5 : f16
  %he = tensor.empty() : tensor<5xf16>
  %hmax = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                           iterator_types = ["parallel"]}} ins(%h : tensor<5xf16>) outs(%he : tensor<5xf16>) {{
  ^bb0(%in: f16, %out: f16):
    %m = arith.minimumf %in, %hinf : f16
    %n = arith.negf %m : f16
    linalg.yield %n : f16
  }} -> tensor<5xf16>
  %hlist = arith.constant dense<[0xFC00, 1.0e5]> : tensor<2xf16>
  %zs = arith.constant dense<-0.0> : tensor<3xf32>
  %i8 = arith.constant dense<[0xFF, 0x80]> : tensor<2xi8>
  check.expect_eq_const(%fill, dense<0xFF800000> : {T5}) : {T5}
  return %masked, %fill, %imm, %list, %u, %folded, %hmax, %hlist, %zs, %i8
      : {T5}, {T5}, {T5}, tensor<3xf32>, tensor<4xf32>, f32, tensor<5xf16>, tensor<2xf16>, tensor<3xf32>, tensor<2xi8>
}}
"""
X = np.array([1.5, -2.0, np.nan, -np.inf, 0.0], np.float32)
H = np.array([7.0, -np.inf, np.nan, 6e4, -0.0], np.float16)


def special_expected() -> list[np.ndarray]:
    with np.errstate(invalid="ignore"):
        zero = X * np.float32(-0.0)
        imm = np.where(X > zero, np.float32(np.nan), np.float32(-np.inf)) + zero
        hmax = -np.minimum(H, np.float16(np.inf))
        return [X + np.float32(-np.inf), f32(*[NINF32] * 5), imm, f32(NAN32, NZ32, NINF32),
                f32(PINF32, NZ32, PINF32, 0xFFC00000), np.array(np.float32(-np.inf) * np.float32(-0.0)),
                hmax, np.array([0xFC00, 0x7C00], np.uint16).view(np.float16), f32(*[NZ32] * 3),
                np.array([-1, -128], np.int8)]


def same_bits(actual: np.ndarray, expected: np.ndarray) -> bool:
    """Bit-equal, except that any NaN matches any NaN (payloads are not specified)."""
    actual, expected = np.asarray(actual).reshape(-1), np.asarray(expected).reshape(-1)
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return False
    if actual.dtype.kind == "f" or actual.dtype == BF16:
        nan = np.isnan(expected.astype(np.float32))
        if not np.array_equal(nan, np.isnan(actual.astype(np.float32))):
            return False
        actual, expected = actual[~nan], expected[~nan]
    return bits(actual).tolist() == bits(expected).tolist()

# ---- bf16: arithmetic, casts and constants, bit-exact against ml_dtypes -----------------------

S = "5x13"  # 65 elements: no multiple of any vector width


def _t(dtype: str) -> str:
    return f"tensor<{S}x{dtype}>"


BF16_OPS = f"""
func.func @bf(%a: {_t("bf16")}, %b: {_t("bf16")}, %x: {_t("f32")}, %i: {_t("i32")})
    -> ({_t("bf16")}, {_t("bf16")}, {_t("bf16")}, {_t("bf16")}, {_t("f32")}, {_t("bf16")},
        {_t("bf16")}, {_t("i32")}, {_t("i16")}, {_t("bf16")}, {_t("i1")}, {_t("bf16")}) {{
  %tenth = arith.constant dense<0.1> : {_t("bf16")}
  %ninf = arith.constant 0xFF80 : bf16
  %s = arith.addf %a, %b : {_t("bf16")}
  %m = arith.mulf %s, %tenth : {_t("bf16")}
  %q = arith.divf %a, %b : {_t("bf16")}
  %mx = arith.maximumf %a, %b : {_t("bf16")}
  %w = arith.extf %a : {_t("bf16")} to {_t("f32")}
  %t = arith.truncf %x : {_t("f32")} to {_t("bf16")}
  %si = arith.sitofp %i : {_t("i32")} to {_t("bf16")}
  %fi = arith.fptosi %b : {_t("bf16")} to {_t("i32")}
  %bc = arith.bitcast %a : {_t("bf16")} to {_t("i16")}
  %one = arith.constant dense<1> : {_t("i16")}
  %bc1 = arith.addi %bc, %one : {_t("i16")}
  %cb = arith.bitcast %bc1 : {_t("i16")} to {_t("bf16")}
  %lt = arith.cmpf olt, %a, %b : {_t("bf16")}
  %e = tensor.empty() : {_t("bf16")}
  %sel = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                          iterator_types = ["parallel", "parallel"]}}
      ins(%a : {_t("bf16")}) outs(%e : {_t("bf16")}) {{
  ^bb0(%in: bf16, %out: bf16):
    %neg = arith.negf %in : bf16
    %pos = arith.cmpf ogt, %in, %neg : bf16
    %r = arith.select %pos, %in, %ninf : bf16
    linalg.yield %r : bf16
  }} -> {_t("bf16")}
  return %s, %m, %q, %mx, %w, %t, %si, %fi, %bc, %cb, %lt, %sel
      : {_t("bf16")}, {_t("bf16")}, {_t("bf16")}, {_t("bf16")}, {_t("f32")}, {_t("bf16")},
        {_t("bf16")}, {_t("i32")}, {_t("i16")}, {_t("bf16")}, {_t("i1")}, {_t("bf16")}
}}
"""
# f64 <-> bf16 (the default Vulkan target has no f64). f64 rounds to bf16 through f32, as
# PyTorch, XLA and IREE do (ml_dtypes rounds once since 0.7).
BF16_F64 = f"""
func.func @bf64(%a: {_t("bf16")}, %d: {_t("f64")}) -> ({_t("bf16")}, {_t("f64")}) {{
  %td = arith.truncf %d : {_t("f64")} to {_t("bf16")}
  %ed = arith.extf %a : {_t("bf16")} to {_t("f64")}
  return %td, %ed : {_t("bf16")}, {_t("f64")}
}}
"""


def bf16_inputs(rng) -> list[np.ndarray]:
    shape = tuple(int(n) for n in S.split("x"))
    a = (rng.standard_normal(shape) * 3).astype(BF16)
    a.reshape(-1)[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 3.0e38]
    b = (rng.standard_normal(shape) * 3).astype(BF16)
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[:5] = [np.nan, -np.inf, -0.0, 3.4e38, 1.0 + 2.0 ** -8]  # 3.4e38 rounds to inf
    i = rng.integers(-100000, 100000, shape).astype(np.int32)
    return [a, b, x, i]


def bf16_expected(a, b, x, i) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        s = a + b
        bc = a.view(np.int16)
        return [s, s * BF16.type(0.1), a / b, np.maximum(a, b), a.astype(np.float32),
                x.astype(BF16), i.astype(BF16),
                b.astype(np.int32), bc, (bc + np.int16(1)).view(BF16), a < b,
                np.where(a > -a, a, BF16.type(-np.inf))]


# ---- f16 and bf16 math, reductions and matmuls, to a tolerance ------------------------------------

M, K, N = 5, 13, 7
TOLERANCE = {"f16": 2e-3, "bf16": 1.6e-2}  # about 4 units in the last place


def math_program(d: str) -> str:
    mn, mk, kn, m = (f"tensor<{M}x{N}x{d}>", f"tensor<{M}x{K}x{d}>", f"tensor<{K}x{N}x{d}>",
                     f"tensor<{M}x{d}>")
    return f"""
func.func @f(%a: {mk}, %b: {kn}, %x: {mn}) -> ({mn}, {mn}, {mn}, {mn}, {m}) {{
  %z = arith.constant 0.0 : {d}
  %e = tensor.empty() : {mn}
  %f = linalg.fill ins(%z : {d}) outs(%e : {mn}) -> {mn}
  %mm = linalg.matmul ins(%a, %b : {mk}, {kn}) outs(%f : {mn}) -> {mn}
  %ex = math.exp %x : {mn}
  %th = math.tanh %x : {mn}
  %er = math.erf %x : {mn}
  %re = tensor.empty() : {m}
  %rf = linalg.fill ins(%z : {d}) outs(%re : {m}) -> {m}
  %sum = linalg.reduce ins(%x : {mn}) outs(%rf : {m}) dimensions = [1]
    (%in: {d}, %acc: {d}) {{
      %s = arith.addf %in, %acc : {d}
      linalg.yield %s : {d}
    }}
  return %mm, %ex, %th, %er, %sum : {mn}, {mn}, {mn}, {mn}, {m}
}}
"""


def reduce_program(d: str, n: int = 4099) -> str:
    """A row sum long enough for the GPU targets' cross-lane (shuffle) reductions."""
    return f"""
func.func @f(%x: tensor<3x{n}x{d}>) -> tensor<3x{d}> {{
  %z = arith.constant 0.0 : {d}
  %e = tensor.empty() : tensor<3x{d}>
  %f = linalg.fill ins(%z : {d}) outs(%e : tensor<3x{d}>) -> tensor<3x{d}>
  %sum = linalg.reduce ins(%x : tensor<3x{n}x{d}>) outs(%f : tensor<3x{d}>) dimensions = [1]
    (%in: {d}, %acc: {d}) {{
      %s = arith.addf %in, %acc : {d}
      linalg.yield %s : {d}
    }}
  return %sum : tensor<3x{d}>
}}
"""


def math_inputs(rng, d: str) -> list[np.ndarray]:
    dtype = BF16 if d == "bf16" else np.dtype(np.float16)
    return [rng.standard_normal(shape).astype(dtype) for shape in ((M, K), (K, N), (M, N))]


def math_expected(a, b, x) -> list[np.ndarray]:
    a, b, x = (v.astype(np.float64) for v in (a, b, x))
    return [a @ b, np.exp(x), np.tanh(x), np.vectorize(math.erf)(x), x.sum(axis=1)]


def relative_error(actual, expected) -> float:
    return float(np.abs(np.asarray(actual, np.float64) - expected).max() / np.abs(expected).max())


# f16 <-> i16 bitcasts. Where the target computes f16 in f32 (lavapipe), the bits go through
# GLSL's half packing; an f16 computed first (a sum) is rounded to f16 before its bits are taken.
F16_BITS = f"""
func.func @bits(%h: {_t("f16")}, %i: {_t("i16")}) -> ({_t("i16")}, {_t("f16")}, {_t("i16")}) {{
  %hb = arith.bitcast %h : {_t("f16")} to {_t("i16")}
  %ib = arith.bitcast %i : {_t("i16")} to {_t("f16")}
  %s = arith.addf %h, %h : {_t("f16")}
  %sb = arith.bitcast %s : {_t("f16")} to {_t("i16")}
  return %hb, %ib, %sb : {_t("i16")}, {_t("f16")}, {_t("i16")}
}}
"""


def f16_bits_inputs(rng) -> list[np.ndarray]:
    shape = tuple(int(n) for n in S.split("x"))
    h = (rng.standard_normal(shape) * 3).astype(np.float16)
    h.reshape(-1)[:7] = [np.nan, np.inf, -np.inf, -0.0, 6e-8, 65504.0, 40000.0]  # 40000 + 40000: inf
    i = rng.integers(-2**15, 2**15, shape).astype(np.int16)
    i.reshape(-1)[:4] = [0x7C00, -0x400, -0x8000, 1]  # inf, -inf, -0, the least subnormal
    return [h, i]


def f16_bits_expected(h: np.ndarray, i: np.ndarray) -> list[np.ndarray]:
    with np.errstate(over="ignore"):
        return [h.view(np.int16), i.view(np.float16), (h + h).view(np.int16)]


# The programs above by name, as the Vulkan tests compile them (tests/codegen/spirv validates
# their shaders, tests/drivers/vulkan runs them).
PROGRAMS = {"special": SPECIAL, "bf16_ops": BF16_OPS, "math_f16": math_program("f16"),
            "math_bf16": math_program("bf16"), "reduce_f16": reduce_program("f16"),
            "reduce_bf16": reduce_program("bf16"), "f16_bits": F16_BITS}
