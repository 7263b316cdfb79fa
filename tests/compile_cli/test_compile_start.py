"""What pyree-compile's start leaves out (issue 31 item 6, compile time within IREE's): the
dialects a torch-mlir model does not use (scf, cf, affine and the memref it imports, check,
StableHLO and CHLO with their lowering rules), and ml_dtypes (bf16's numpy type: half a second
to import in its 0.7), are imported only for a text that uses them --
checked through the real CLI under ``python -X importtime`` -- and such a text compiles the same
in a process that has compiled another first."""

import subprocess
import sys

import numpy as np
import pyree.runtime as rt
from pyree.compiler import CompileOptions, compile_str

LINALG = """
#map = affine_map<(d0) -> (d0)>
func.func @main(%a: tensor<5xf32>, %b: tensor<5xf32>) -> tensor<5xf32> {
  %e = tensor.empty() : tensor<5xf32>
  %s = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
      ins(%a, %b : tensor<5xf32>, tensor<5xf32>) outs(%e : tensor<5xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %t = arith.mulf %x, %y : f32
    linalg.yield %t : f32
  } -> tensor<5xf32>
  return %s : tensor<5xf32>
}
"""
LATER = ("xdsl.dialects.scf", "xdsl.dialects.cf", "xdsl.dialects.affine", "xdsl.dialects.memref",
         "pyree.compiler.input.dialects.check", "pyree.compiler.input.dialects.stablehlo",
         "pyree.compiler.input.stablehlo", "ml_dtypes")
CPU = CompileOptions(target_backends=["llvm-cpu"], llvmcpu_target_cpu="generic")


def test_a_linalg_program_imports_no_other_dialect(tmp_path):
    source = tmp_path / "mul.mlir"
    source.write_text(LINALG)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "pyree.compiler.tools.compile",
                           str(source), "-o", str(tmp_path / "mul.vmfb"),
                           "--iree-hal-target-backends=llvm-cpu"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "xdsl.dialects.linalg" in imported and "pyree.compiler.input.parser" in imported
    assert sorted(m for m in imported if m.startswith(LATER)) == []


def _run(mlir: str, *args):
    module = rt.load_module(compile_str(mlir, CPU), device="local-sync")
    return module.main(*args)


def test_programs_of_the_later_dialects_compile_after_a_linalg_one():
    a = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(_run(LINALG, a, a), a * a)
    stablehlo = """
    func.func @main(%a: tensor<5xf32>) -> tensor<5xf32> {
      %0 = stablehlo.add %a, %a : tensor<5xf32>
      %1 = chlo.erf %0 : tensor<5xf32> -> tensor<5xf32>
      return %1 : tensor<5xf32>
    }"""
    from math import erf
    np.testing.assert_allclose(_run(stablehlo, a), [erf(2 * x) for x in a], rtol=1e-6, atol=1e-6)
    loop = """
    func.func @main(%a: tensor<5xf32>) -> tensor<5xf32> {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %true = arith.constant true
      cf.assert %true, "always"
      %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %a) -> (tensor<5xf32>) {
        %n = arith.addf %acc, %a : tensor<5xf32>
        scf.yield %n : tensor<5xf32>
      }
      %j = affine.apply affine_map<(d0) -> (d0 + 1)>(%c1)
      return %r : tensor<5xf32>
    }"""
    np.testing.assert_array_equal(_run(loop, a), 4 * a)
    checked = """
    func.func @main() {
      %0 = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
      check.expect_almost_eq_const(%0, dense<[1.0, 2.0]> : tensor<2xf32>) : tensor<2xf32>
      return
    }"""
    rt.load_module(compile_str(checked, CPU), device="local-sync").main()
    bf16 = """
    func.func @main(%a: tensor<3xbf16>) -> tensor<3xbf16> {
      %c = arith.constant dense<[0xFF80, 1.5, -2.5]> : tensor<3xbf16>
      %0 = arith.addf %a, %c : tensor<3xbf16>
      return %0 : tensor<3xbf16>
    }"""
    import ml_dtypes
    x = np.array([1.0, 2.0, 3.0], ml_dtypes.bfloat16)
    np.testing.assert_array_equal(np.asarray(_run(bf16, x), np.float32), [-np.inf, 3.5, 0.5])
