"""The tools on a module from pyree.compiler (rather than a hand-built one): MLIR text in, results
checked against numpy in float64, at an odd shape, with an f32 and an i32 result."""

import numpy as np
import pytest
from pyree.compiler import compile_str
from tool_process import run_tool

MLIR = """
func.func @muladd(%a: tensor<37x53xf32>, %b: tensor<37x53xf32>)
    -> (tensor<37x53xf32>, tensor<37x53xi32>) {
  %0 = arith.mulf %a, %b : tensor<37x53xf32>
  %1 = arith.addf %0, %a : tensor<37x53xf32>
  %2 = arith.fptosi %1 : tensor<37x53xf32> to tensor<37x53xi32>
  return %1, %2 : tensor<37x53xf32>, tensor<37x53xi32>
}
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("compiled") / "muladd.vmfb"
    path.write_bytes(compile_str(MLIR))
    return str(path)


def test_run_module_on_a_compiled_module(compiled, tmp_path):
    rng = np.random.default_rng()
    a, b = (
        (rng.standard_normal((37, 53)) * 4).astype(np.float32),
        rng.standard_normal((37, 53)).astype(np.float32),
    )
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    out = tmp_path / "out.npy"
    proc = run_tool(
        "run_module",
        f"--module={compiled}",
        f"--input=@{tmp_path / 'a.npy'}",
        f"--input=@{tmp_path / 'b.npy'}",
        f"--output=@{out}",
        f"--output=+{out}",
    )
    assert proc.returncode == 0, proc.stderr
    expected = a.astype(np.float64) * b + a
    with open(out, "rb") as f:
        real, whole = np.load(f), np.load(f)
    np.testing.assert_allclose(real, expected, rtol=1e-5, atol=1e-5)
    assert whole.dtype == np.int32
    np.testing.assert_array_equal(whole, np.trunc(real).astype(np.int32))


def test_dump_module_on_a_compiled_module(compiled):
    proc = run_tool("dump_module", compiled)
    assert proc.returncode == 0, proc.stderr
    assert "@muladd(37x53xf32, 37x53xf32) -> (37x53xf32, 37x53xi32)" in proc.stdout
    assert "producer: pyree-compile" in proc.stdout and ": cpu" in proc.stdout


def test_an_input_too_large_for_host_memory_is_a_clear_error(tmp_path):
    shape = "100000x100000x100"
    path = tmp_path / "big.vmfb"
    path.write_bytes(compile_str(f"""
    func.func @big(%a: tensor<{shape}xf32>) -> tensor<{shape}xf32> {{
      %r = arith.addf %a, %a : tensor<{shape}xf32>
      return %r : tensor<{shape}xf32>
    }}"""))
    proc = run_tool("run_module", f"--module={path}", "--function=big", f"--input={shape}xf32=1")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: out of host memory:") and "TiB" in proc.stderr
    assert "Traceback" not in proc.stderr
