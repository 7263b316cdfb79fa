"""--iree-input-demote-f64-to-f32 / -demote-i64-to-i32 / -promote-bf16-to-f32 through the real
CLI: the compiled function takes and returns the narrower types and computes the same numbers."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from pyree.compiler import CompileError, CompileOptions, compile_str

SOURCE = """func.func @f(%a: tensor<4xf64>, %b: tensor<4xi64>) -> (tensor<4xf64>, tensor<4xi64>, tensor<4xf64>) {
  %c = arith.constant dense<[1.5, 2.5, 3.5, 4.5]> : tensor<4xf64>
  %r = arith.mulf %a, %c : tensor<4xf64>
  %init = arith.constant dense<-9223372036854775808> : tensor<4xi64>
  %k = arith.constant dense<[0, 7, 8, 9]> : tensor<4xi64>
  %b32 = arith.trunci %b : tensor<4xi64> to tensor<4xi32>
  %b64 = arith.extsi %b32 : tensor<4xi32> to tensor<4xi64>
  %m = arith.maxsi %b64, %init : tensor<4xi64>
  %s = arith.addi %m, %k : tensor<4xi64>
  %e = tensor.empty() : tensor<4xf64>
  %t = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} ins(%r, %s : tensor<4xf64>, tensor<4xi64>) outs(%e : tensor<4xf64>) {
  ^bb0(%x: f64, %y: i64, %o: f64):
    %yf = arith.sitofp %y : i64 to f64
    %n = arith.truncf %x : f64 to f32
    %w = arith.extf %n : f32 to f64
    %z = arith.addf %w, %yf : f64
    linalg.yield %z : f64
  } -> tensor<4xf64>
  return %r, %s, %t : tensor<4xf64>, tensor<4xi64>, tensor<4xf64>
}
"""

A = np.array([1.0, -2.0, 0.5, 8.0])
B = np.array([-5, 10, 2, 1000])
EXPECTED = (A * [1.5, 2.5, 3.5, 4.5], B + [0, 7, 8, 9])


def compile_cli(tmp_path, *flags: str) -> subprocess.CompletedProcess:
    source = tmp_path / "m.mlir"
    source.write_text(SOURCE)
    return subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile", str(source),
                           "-o", str(tmp_path / "m.vmfb"), *flags], capture_output=True, text=True)


def run(path, a, b):
    import pyree.runtime as rt
    return [r.to_host() for r in rt.load_module(path.read_bytes(), device="local-task")["f"](a, b)]


@pytest.mark.parametrize("flags, types", [
    ((), (np.float64, np.int64)),
    (("--iree-input-demote-f64-to-f32", "--iree-input-demote-i64-to-i32"), (np.float32, np.int32)),
    (("--pyree-input-demote-f64-to-f32=true", "--pyree-input-demote-i64-to-i32=1"),
     (np.float32, np.int32)),
    (("--iree-input-demote-f64-to-f32", "--iree-input-demote-i64-to-i32=false"),
     (np.float32, np.int64)),
])
def test_demotion_through_the_cli(tmp_path, flags, types):
    result = compile_cli(tmp_path, *flags)
    assert result.returncode == 0, result.stderr
    r, s, t = run(tmp_path / "m.vmfb", A.astype(types[0]), B.astype(types[1]))
    assert (r.dtype, s.dtype, t.dtype) == (types[0], types[1], types[0])
    np.testing.assert_allclose(r, EXPECTED[0], rtol=1e-6)
    np.testing.assert_array_equal(s, EXPECTED[1])
    np.testing.assert_allclose(t, EXPECTED[0] + EXPECTED[1], rtol=1e-6)


def test_bf16_promotion():
    text = """func.func @f(%a: tensor<3xbf16>) -> tensor<3xbf16> {
  %c = arith.constant dense<[0.5, 1.5, -2.0]> : tensor<3xbf16>
  %r = arith.mulf %a, %c : tensor<3xbf16>
  return %r : tensor<3xbf16>
}"""
    import pyree.runtime as rt
    vmfb = compile_str(text, CompileOptions(promote_bf16_to_f32=True))
    a = np.array([3.0, 0.1, 7.0], np.float32)  # 0.1 is not a bf16: promoted means f32 arithmetic
    got = rt.load_module(vmfb, device="local-task")["f"](a).to_host()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, a * [0.5, 1.5, -2.0], rtol=1e-7)


def test_an_i64_constant_beyond_i32_is_refused_by_name():
    text = """func.func @f(%a: tensor<2xi64>) -> tensor<2xi64> {
  %c = arith.constant dense<[1, 4294967296]> : tensor<2xi64>
  %r = arith.addi %a, %c : tensor<2xi64>
  return %r : tensor<2xi64>
}"""
    with pytest.raises(CompileError, match=r"m\.mlir:2:3: error: 'arith\.constant' holds "
                                           r"4294967296, .*--iree-input-demote-i64-to-i32"):
        compile_str(text, CompileOptions(demote_i64_to_i32=True), source_name="m.mlir")


def test_vulkan_without_f64_names_the_flag(tmp_path):
    result = compile_cli(tmp_path, "--iree-hal-target-backends=vulkan-spirv")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "shaderFloat64" in result.stderr and "--iree-input-demote-f64-to-f32" in result.stderr
    result = compile_cli(tmp_path, "--iree-hal-target-backends=vulkan-spirv",
                         "--iree-input-demote-f64-to-f32")
    assert result.returncode == 0, result.stderr


STABLEHLO = """func.func @main(%a: tensor<4xi64>) -> tensor<4xi64> {
  %c = stablehlo.constant dense<[1, 2, 3, -9223372036854775808]> : tensor<4xi64>
  %0 = stablehlo.maximum %a, %c : tensor<4xi64>
  return %0 : tensor<4xi64>
}"""


@pytest.mark.parametrize("options, dtype", [
    ({}, np.int32),  # IREE's default: StableHLO input demotes i64
    ({"demote_i64_to_i32": False}, np.int64),
    ({"input_type": "none"}, np.int64),  # ... and only StableHLO input
    ({"input_type": "none", "demote_i64_to_i32": True}, np.int32),
])
def test_stablehlo_demotes_i64_by_default(options, dtype):
    import pyree.runtime as rt
    module = rt.load_module(compile_str(STABLEHLO, CompileOptions(**options)), device="local-task")
    got = module["main"](np.array([5, -1, 3, -7], dtype)).to_host()
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, [5, 2, 3, -7])


def test_a_bitcast_that_changes_size_is_refused_by_name():
    text = """func.func @f(%a: tensor<4xf64>) -> tensor<4xi64> {
  %r = arith.bitcast %a : tensor<4xf64> to tensor<4xi64>
  return %r : tensor<4xi64>
}"""
    with pytest.raises(CompileError, match=r"m\.mlir:2:3: error: 'arith\.bitcast' is invalid "
                                           r"after --iree-input-demote-f64-to-f32"):
        compile_str(text, CompileOptions(demote_f64_to_f32=True), source_name="m.mlir")


INNER_F64 = """func.func @f(%a: tensor<5xf32>) -> tensor<5xf32> {
  %e = arith.extf %a : tensor<5xf32> to tensor<5xf64>
  %p = math.powf %e, %e : tensor<5xf64>
  %s = arith.addf %p, %e : tensor<5xf64>
  %r = arith.truncf %s : tensor<5xf64> to tensor<5xf32>
  return %r : tensor<5xf32>
}"""
INNER_F64_ARITH = INNER_F64.replace("math.powf %e, %e", "arith.mulf %e, %e")


def kernels(text: str, **options) -> str:
    return compile_str(text, CompileOptions(compile_to="executable-sources", **options)).decode()


def test_f64_inside_a_function_runs_in_f32_where_a_target_lacks_it():
    """As IREE demotes f64 by default: torch-mlir computes a LayerNorm's statistics in f64,
    which the baseline Vulkan target (no shaderFloat64) and cuda's math functions (f32 only)
    cannot run. The signature has no f64, so nothing the caller sees changes; llvm-cpu, and
    cuda's f64 arithmetic, keep f64; the flag set to false keeps the error."""
    assert "f64" not in kernels(INNER_F64, target_backends=["vulkan-spirv"])
    assert "f64" not in kernels(INNER_F64, target_backends=["cuda"])
    assert "f64" in kernels(INNER_F64, target_backends=["llvm-cpu"])
    assert "f64" in kernels(INNER_F64_ARITH, target_backends=["cuda"])
    with pytest.raises(CompileError, match="'pow' on f64 is not supported by the cuda backend"):
        compile_str(INNER_F64, CompileOptions(target_backends=["cuda"], demote_f64_to_f32=False))
    with pytest.raises(CompileError, match="shaderFloat64"):
        compile_str(INNER_F64_ARITH, CompileOptions(target_backends=["vulkan-spirv"],
                                                    demote_f64_to_f32=False))


@pytest.mark.vulkan
def test_f64_inside_runs_in_f32_on_vulkan():
    import pyree.runtime as rt
    a = np.array([0.5, 1.25, 2.0, 3.5, 0.0], np.float32)
    vmfb = compile_str(INNER_F64, CompileOptions(target_backends=["vulkan-spirv"]))
    got = rt.load_module(vmfb, device="vulkan")["f"](a).to_host()
    np.testing.assert_allclose(got, (a.astype(np.float64) ** a + a).astype(np.float32), rtol=2e-6)
