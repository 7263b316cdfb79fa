"""Integer division at its edges on the CPU drivers and Vulkan: every arith division and remainder
(``divsi``, ``divui``, ``remsi``, ``remui``, ``floordivsi``, ``ceildivsi``, ``ceildivui``) of
i8, i32 and i64 over a grid of signed extremes, -1, 0 and small values, against exact Python
integers where arith defines the result. Where it does not (a zero divisor, ``MIN / -1``) any
value will do, but the call must return: x86's ``idiv`` traps on both, so a kernel that
divides without guarding kills the process with SIGFPE. ``arith.ceildivui`` was refused by
name, both in a body and as size arithmetic (``ceil(n / 2)`` elements of a stride-2 slice).
NVIDIA's Vulkan driver answered ONNX's Scatter wrong (its 64-bit index arithmetic gathered from
the wrong row) where lavapipe is right: ``-m vulkan`` runs these on both."""

from __future__ import annotations

import functools

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str

OPS = ["divsi", "divui", "remsi", "remui", "floordivsi", "ceildivsi", "ceildivui"]
DTYPES = {"i8": np.int8, "i32": np.int32, "i64": np.int64}


def _program(t: str) -> str:
    body = "\n".join(f"    %r{k} = arith.{op} %x, %y : {t}" for k, op in enumerate(OPS))
    outs = ", ".join(f"%o{k}: {t}" for k in range(len(OPS)))
    types = ", ".join([f"tensor<?x{t}>"] * len(OPS))
    return f"""
#m = affine_map<(d0) -> (d0)>
func.func @f(%a: tensor<?x{t}>, %b: tensor<?x{t}>) -> ({types}) {{
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?x{t}>
  %e = tensor.empty(%n) : tensor<?x{t}>
  %r:{len(OPS)} = linalg.generic {{indexing_maps = [#m, #m{", #m" * len(OPS)}],
      iterator_types = ["parallel"]}} ins(%a, %b : tensor<?x{t}>, tensor<?x{t}>)
      outs({", ".join(["%e"] * len(OPS))} : {types}) {{
  ^bb0(%x: {t}, %y: {t}, {outs}):
{body}
    linalg.yield {", ".join(f"%r{k}" for k in range(len(OPS)))} : {", ".join([t] * len(OPS))}
  }} -> ({types})
  return {", ".join(f"%r#{k}" for k in range(len(OPS)))} : {types}
}}"""


@functools.cache
def _module(t: str, device: str):
    return _load(_program(t), device)


def _load(text: str, device: str):
    """``text`` compiled for ``device``'s target (vulkan-spirv for vulkan, else llvm-cpu)."""
    backend = "vulkan-spirv" if device == "vulkan" else "llvm-cpu"
    return rt.load_module(compile_str(text, CompileOptions(target_backends=[backend])),
                          device=device)


def _expected(op: str, x: int, y: int, bits: int) -> int | None:
    """arith's result as a signed ``bits``-bit integer, None where arith leaves it undefined."""
    lo = -(1 << (bits - 1))
    ux, uy = x % (1 << bits), y % (1 << bits)
    if op.endswith("ui"):
        if uy == 0:
            return None
        r = {"divui": ux // uy, "remui": ux % uy, "ceildivui": -(-ux // uy)}[op]
    else:
        if y == 0 or (x == lo and y == -1):
            return None
        q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)  # rounded toward zero
        r = {"divsi": q, "remsi": x - q * y, "floordivsi": x // y, "ceildivsi": -(-x // y)}[op]
    r %= 1 << bits
    return r - (1 << bits) if r >= 1 << (bits - 1) else r


@pytest.mark.parametrize("device", ["local-task", "local-sync",
                                    pytest.param("vulkan", marks=pytest.mark.vulkan)])
@pytest.mark.parametrize("t", list(DTYPES))
def test_division_and_remainder_at_the_extremes(t, device):
    info = np.iinfo(DTYPES[t])
    values = np.array([info.min, info.min + 1, -7, -3, -1, 0, 1, 3, 7, 100, info.max], DTYPES[t])
    a, b = np.repeat(values, len(values)), np.tile(values, len(values))
    results = [r.to_host() for r in _module(t, device)["f"](a, b)]
    for op, got in zip(OPS, results):
        assert got.dtype == a.dtype and got.shape == a.shape
        for x, y, r in zip(a.tolist(), b.tolist(), got.tolist()):
            want = _expected(op, x, y, info.bits)
            assert want is None or r == want, f"{op}({x}, {y}) = {r}, not {want}"


STRIDED = """
func.func @f(%a: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = tensor.dim %a, %c0 : tensor<?xf32>
  %h = arith.ceildivui %n, %c2 : index
  %s = tensor.extract_slice %a[0] [%h] [2] : tensor<?xf32> to tensor<?xf32>
  return %s : tensor<?xf32>
}
"""


def test_ceildivui_as_size_arithmetic():
    module = _load(STRIDED, "local-task")
    for n in (0, 1, 2, 7, 1030):
        a = np.arange(n, dtype=np.float32)
        np.testing.assert_array_equal(module["f"](a).to_host(), a[::2])


CONSTANTS = [3, 7, -3, 1, -1, 1000]


def _by_constant(t: str, c: int) -> str:
    """Every op by the constant ``c`` (as the index arithmetic of a gather divides a loop index
    by a static extent)."""
    body = "\n".join(f"    %r{k} = arith.{op} %x, %k : {t}" for k, op in enumerate(OPS))
    n = len(OPS)
    types = ", ".join([f"tensor<?x{t}>"] * n)
    return f"""
#m = affine_map<(d0) -> (d0)>
func.func @f(%a: tensor<?x{t}>) -> ({types}) {{
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?x{t}>
  %e = tensor.empty(%n) : tensor<?x{t}>
  %r:{n} = linalg.generic {{indexing_maps = [#m{", #m" * n}], iterator_types = ["parallel"]}}
      ins(%a : tensor<?x{t}>) outs({", ".join(["%e"] * n)} : {types}) {{
  ^bb0(%x: {t}, {", ".join(f"%o{k}: {t}" for k in range(n))}):
    %k = arith.constant {c} : {t}
{body}
    linalg.yield {", ".join(f"%r{k}" for k in range(n))} : {", ".join([t] * n)}
  }} -> ({types})
  return {", ".join(f"%r#{k}" for k in range(n))} : {types}
}}"""


@pytest.mark.parametrize("device", ["local-task", pytest.param("vulkan", marks=pytest.mark.vulkan)])
@pytest.mark.parametrize("t", ["i32", "i64"])
def test_division_and_remainder_by_constants(t, device):
    """A static divisor, as a gather's index arithmetic divides by a static extent."""
    info = np.iinfo(DTYPES[t])
    x = np.array([info.min, info.min + 1, -1001, -7, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 1001,
                  info.max], DTYPES[t])
    for c in CONSTANTS:
        results = [r.to_host() for r in _load(_by_constant(t, c), device)["f"](x)]
        for op, got in zip(OPS, results):
            for v, r in zip(x.tolist(), got.tolist()):
                want = _expected(op, v, c, info.bits)
                assert want is None or r == want, f"{op}({v}, {c}) = {r}, not {want}"


# ONNX's Scatter (axis 0) as torch-mlir writes it (pyree-import-onnx of onnx's
# test_scatter_without_axis): the update's row is gathered at ((i / 3) % 2, i % 3) in 64 bits.
SCATTER = """
#map = affine_map<(d0) -> (d0, 0)>
#map1 = affine_map<(d0) -> (d0)>
module {
  func.func @test_scatter_without_axis(%arg0: tensor<3x3xf32>, %arg1: tensor<2x3xi64>, %arg2: tensor<2x3xf32>) -> tensor<3x3xf32> {
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c0_i64 = arith.constant 0 : i64
    %cst = arith.constant 0.000000e+00 : f32
    %0 = tensor.empty() : tensor<6x1xi64>
    %1 = linalg.fill ins(%c0_i64 : i64) outs(%0 : tensor<6x1xi64>) -> tensor<6x1xi64>
    %2 = tensor.empty() : tensor<6xf32>
    %3 = linalg.fill ins(%cst : f32) outs(%2 : tensor<6xf32>) -> tensor<6xf32>
    %4:3 = linalg.generic {indexing_maps = [#map, #map, #map1], iterator_types = ["parallel"]} outs(%1, %1, %3 : tensor<6x1xi64>, tensor<6x1xi64>, tensor<6xf32>) {
    ^bb0(%out: i64, %out_1: i64, %out_2: f32):
      %8 = linalg.index 0 : index
      %9 = arith.remsi %8, %c3 : index
      %10 = arith.divsi %8, %c3 : index
      %11 = arith.remsi %10, %c2 : index
      %extracted = tensor.extract %arg1[%11, %9] : tensor<2x3xi64>
      %extracted_3 = tensor.extract %arg2[%11, %9] : tensor<2x3xf32>
      %12 = arith.index_cast %9 : index to i64
      linalg.yield %extracted, %12, %extracted_3 : i64, i64, f32
    } -> (tensor<6x1xi64>, tensor<6x1xi64>, tensor<6xf32>)
    %5 = tensor.empty() : tensor<6x2xi64>
    %6 = linalg.fill ins(%c0_i64 : i64) outs(%5 : tensor<6x2xi64>) -> tensor<6x2xi64>
    %inserted_slice = tensor.insert_slice %4#0 into %6[0, 0] [6, 1] [1, 1] : tensor<6x1xi64> into tensor<6x2xi64>
    %inserted_slice_0 = tensor.insert_slice %4#1 into %inserted_slice[0, 1] [6, 1] [1, 1] : tensor<6x1xi64> into tensor<6x2xi64>
    %7 = tm_tensor.scatter {dimension_map = array<i64: 0, 1>} unique_indices(false) ins(%4#2, %inserted_slice_0 : tensor<6xf32>, tensor<6x2xi64>) outs(%arg0 : tensor<3x3xf32>) {
    ^bb0(%arg3: f32, %arg4: f32):
      tm_tensor.yield %arg3 : f32
    } -> tensor<3x3xf32>
    return %7 : tensor<3x3xf32>
  }
}
"""


@pytest.mark.parametrize("device", ["local-task", pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_onnx_scatter_index_arithmetic(device):
    """On NVIDIA's Vulkan driver this program put the first row's updates nowhere (its
    gather read row 1 for i = 0, 1, 2) until signed 64-bit division ran on magnitudes; lavapipe,
    and the divisions by constants above, were right either way."""
    module = _load(SCATTER, device)
    data = np.zeros((3, 3), np.float32)
    indices = np.array([[1, 0, 2], [0, 2, 1]], np.int64)
    updates = np.array([[1.0, 1.1, 1.2], [2.0, 2.1, 2.2]], np.float32)
    want = data.copy()
    for i in range(2):
        for j in range(3):
            want[indices[i, j], j] = updates[i, j]
    np.testing.assert_array_equal(module["test_scatter_without_axis"](data, indices, updates)
                                  .to_host(), want)
