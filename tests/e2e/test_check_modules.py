"""The project's op tests, written in IREE's check format (tests/e2e/ops/*.mlir), compiled by
pyree-compile and run by pyree-check-module on both CPU drivers, as iree-check-module would."""

import subprocess
import sys
from pathlib import Path

import pytest

OPS = sorted((Path(__file__).parent / "ops").glob("*.mlir"))


def tool(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True)


@pytest.fixture(scope="module", params=OPS, ids=[p.stem for p in OPS])
def compiled(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("ops") / f"{request.param.stem}.vmfb"
    result = tool("pyree.compiler.tools.compile", str(request.param), "-o", str(out),
                  "--pyree-hal-target-backends=llvm-cpu")
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_op_checks_pass(compiled, device):
    result = tool("pyree.runtime.tools.check_module", f"--device={device}", f"--module={compiled}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[  FAILED  ]" not in result.stdout
    assert result.stdout.count("[       OK ]") >= 3


def test_a_wrong_expectation_fails_with_its_values(tmp_path):
    source = tmp_path / "wrong.mlir"
    source.write_text("""
    func.func @wrong() {
      %a = util.unfoldable_constant dense<[1.0, 2.0]> : tensor<2xf32>
      %r = arith.addf %a, %a : tensor<2xf32>
      check.expect_almost_eq_const(%r, dense<[2.0, 5.0]> : tensor<2xf32>) : tensor<2xf32>
      return
    }""")
    module = tmp_path / "wrong.vmfb"
    assert tool("pyree.compiler.tools.compile", str(source), "-o", str(module)).returncode == 0
    result = tool("pyree.runtime.tools.check_module", f"--module={module}")
    assert result.returncode == 1
    assert "[  FAILED  ] wrong" in result.stdout
    assert "2xf32=2 4" in result.stdout and "wrong.mlir:5" in result.stdout
    assert "Traceback" not in result.stderr
