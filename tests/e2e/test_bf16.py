"""bf16 (and f16) wherever f32 works: the front end, the CPU drivers, the runtime CLI, and the cuda
target (compile-only here: PTX converts with cvt.rn.bf16.f32, ptxas assembles it). References are
ml_dtypes' bf16 arithmetic (bit-exact) and float64 math (to a tolerance)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyree.runtime as rt
import pytest
from dtype_cases import (
    BF16,
    BF16_F64,
    BF16_OPS,
    TOLERANCE,
    bf16_expected,
    bf16_inputs,
    math_expected,
    math_inputs,
    math_program,
    ptx_of,
    reduce_program,
    relative_error,
    same_bits,
)
from pyree.compiler import CompileOptions, compile_str
from tooling import require_tool


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_bf16_ops_casts_and_constants_are_bit_exact(device):
    inputs = bf16_inputs(np.random.default_rng())
    outs = rt.load_module(compile_str(BF16_OPS), device=device)["bf"](*inputs)
    for k, (actual, want) in enumerate(zip(outs, bf16_expected(*inputs))):
        actual = np.asarray(actual.to_host())
        assert same_bits(actual, want), (k, actual, want)


def test_bf16_to_and_from_f64():
    rng = np.random.default_rng()
    a = bf16_inputs(rng)[0]
    d = rng.standard_normal(a.shape) * 1e3
    d.reshape(-1)[:4] = [np.nan, -np.inf, 1e300, 1.0 + 2.0 ** -8 + 2.0 ** -40]
    td, ed = rt.load_module(compile_str(BF16_F64), device="local-task")["bf64"](a, d)
    # f64 -> bf16 rounds through f32, as PyTorch, XLA and IREE (MLIR's arith expansion) round;
    # ml_dtypes rounds once since 0.7, so the reference names the two steps: the last value is
    # the case where they differ (1.0078125 in one step, 1.0 in two)
    with np.errstate(over="ignore"):
        want = d.astype(np.float32).astype(BF16)
        assert same_bits(np.asarray(td.to_host()), want)
    assert float(want.reshape(-1)[3]) == 1.0
    assert same_bits(np.asarray(ed.to_host()), a.astype(np.float64))


def test_a_folded_f64_constant_rounds_to_bf16_as_the_kernels_do():
    """Constant folding (numpy at compile time) takes the kernels' two steps, not ml_dtypes' one."""
    source = """
func.func @c() -> tensor<3xbf16> {
  %d = arith.constant dense<[0x3FF0100000001000, 0x3FF0100000000000, 0xC7EFFFFFF0000000]> : tensor<3xf64>
  %e = tensor.empty() : tensor<3xbf16>
  %t = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
      iterator_types = ["parallel"]} ins(%d : tensor<3xf64>) outs(%e : tensor<3xbf16>) {
  ^bb0(%x: f64, %o: bf16):
    %y = arith.truncf %x : f64 to bf16
    linalg.yield %y : bf16
  } -> tensor<3xbf16>
  return %t : tensor<3xbf16>
}"""
    got = np.asarray(rt.load_module(compile_str(source), device="local-sync")["c"]().to_host())
    d = np.array([1.0 + 2.0 ** -8 + 2.0 ** -40, 1.0 + 2.0 ** -8, -(2.0 ** 128 - 2.0 ** 100)])
    with np.errstate(over="ignore"):
        assert same_bits(got, d.astype(np.float32).astype(BF16))
    assert got.astype(np.float32).tolist() == [1.0, 1.0, -np.inf]


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_math_reductions_and_matmuls_in_16_bit_floats(dtype):
    inputs = math_inputs(np.random.default_rng(), dtype)
    outs = rt.load_module(compile_str(math_program(dtype)), device="local-task")["f"](*inputs)
    for name, actual, want in zip(["matmul", "exp", "tanh", "erf", "sum"], outs,
                                  math_expected(*inputs)):
        actual = np.asarray(actual.to_host())
        assert actual.dtype == inputs[0].dtype, name
        assert relative_error(actual, want) <= TOLERANCE[dtype], name


def test_run_module_reads_and_prints_bf16(tmp_path):
    module = tmp_path / "add.vmfb"
    module.write_bytes(compile_str("""
    func.func @add(%a: tensor<2x3xbf16>, %b: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
      %s = arith.addf %a, %b : tensor<2x3xbf16>
      return %s : tensor<2x3xbf16>
    }"""))
    proc = subprocess.run(
        [sys.executable, "-m", "pyree.runtime.tools.run_module", f"--module={module}",
         "--function=add", "--input=2x3xbf16=1.5", "--input=2x3xbf16=[1 2 3][4 5 -inf]"],
        capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "2x3xbf16=[2.5 3.5 4.5][5.5 6.5 -inf]" in proc.stdout


def test_bf16_constants_fold_like_ml_dtypes():
    out = rt.load_module(compile_str("""
    func.func @f() -> bf16 {
      %a = arith.constant 1.0 : bf16
      %b = arith.constant 0x3B80 : bf16
      %s = arith.addf %a, %b : bf16
      return %s : bf16
    }"""))["f"]()
    want = BF16.type(1.0) + np.array(0x3B80, np.uint16).view(BF16)[()]  # 1 + 2**-8: a tie, to even
    assert same_bits(np.asarray(out.to_host()), np.array(want))


@pytest.mark.parametrize("arch", ["", "sm_90"])  # "": the default, sm_80
@pytest.mark.parametrize("program", ["bf16_ops", "math_f16", "math_bf16", "reduce_bf16"])
def test_cuda_converts_bf16_and_ptxas_assembles(program, arch, tmp_path):
    ptxas = require_tool("ptxas", env="PYREE_PTXAS")
    kind, _, dtype = program.partition("_")
    source = {"bf16": BF16_OPS, "math": math_program(dtype), "reduce": reduce_program(dtype)}[kind]
    ptx = ptx_of(compile_str(source, CompileOptions(target_backends=["cuda"], cuda_target=arch)))
    assert f".target {arch or 'sm_80'}" in ptx
    if kind != "reduce":  # the sum adds in bf16 (fma.rn.bf16), converting nothing
        assert ("cvt.rn.bf16.f32" in ptx) == (dtype != "f16")
    (tmp_path / "k.ptx").write_text(ptx)
    proc = subprocess.run([ptxas, f"-arch={arch or 'sm_80'}", str(tmp_path / "k.ptx"),
                           "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
