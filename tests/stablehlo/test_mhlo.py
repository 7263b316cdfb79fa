"""MHLO, the dialect IREE's older docs use (the CUDA backend design doc's first example is an
``mhlo.add``), read as the StableHLO it became, through the real CLI and the Python API."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyree.runtime as rt
from pyree.compiler import compile_str

DESIGN_DOC_ADD = """func.func @add(%lhs: tensor<4xf32>, %rhs: tensor<4xf32>) -> tensor<4xf32> {
  %result = mhlo.add %lhs, %rhs : tensor<4xf32>
  return %result : tensor<4xf32>
}
"""

GENERIC = """module attributes {mhlo.num_partitions = 1 : i32} {
  func.func @main(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) -> tensor<3x5xf32> {
    %0 = "mhlo.dot_general"(%a, %b) {dot_dimension_numbers = #mhlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
    %z = mhlo.constant dense<0.0> : tensor<3x5xf32>
    %p = "mhlo.compare"(%0, %z) {comparison_direction = #mhlo<comparison_direction GT>} : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xi1>
    %r = "mhlo.select"(%p, %0, %z) : (tensor<3x5xi1>, tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
    return %r : tensor<3x5xf32>
  }
}
"""


def tool(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True)


def test_the_cuda_design_docs_example_through_the_cli(tmp_path):
    source, module = tmp_path / "add.mlir", tmp_path / "add.vmfb"
    source.write_text(DESIGN_DOC_ADD)
    assert tool("pyree.compiler.tools.compile", str(source), "-o", str(module)).returncode == 0
    run = tool("pyree.runtime.tools.run_module", f"--module={module}", "--function=add",
               "--input=4xf32=[1 2 3 -0.5]", "--input=4xf32=[2 2 2 0.5]")
    assert run.returncode == 0, run.stderr
    assert "4xf32=3 4 5 0" in run.stdout


def test_generic_mhlo_with_its_attributes():
    module = rt.load_module(compile_str(GENERIC), device="local-task")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(module.main(a, b)), np.maximum(a @ b, 0),
                               rtol=1e-5, atol=1e-6)


def test_an_unsupported_mhlo_op_is_refused_at_its_line(tmp_path):
    source = tmp_path / "bad.mlir"
    source.write_text(DESIGN_DOC_ADD.replace("mhlo.add %lhs, %rhs", "mhlo.cholesky %lhs, lower = true"))
    result = tool("pyree.compiler.tools.compile", str(source), "-o", str(tmp_path / "bad.vmfb"))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "bad.mlir:2:3" in result.stderr and "cholesky" in result.stderr
