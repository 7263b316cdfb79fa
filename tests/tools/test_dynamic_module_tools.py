"""A module compiled from MLIR with run-time (``?``) dims, through the tools and the Python
reflection: pyree-dump-module and ``Function`` show ``?`` for arguments and results, which
symbol each ``?`` is and each result dim's formula; pyree-run-module takes zero-size inputs
(``--input=0x3xf32=``) and answers as numpy does."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tool_process import assert_clean_error, run_tool

SOURCE = """
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @f(%a: tensor<?x3xf32>, %b: tensor<?x3xf32>) -> (tensor<?x3xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x3xf32>
  %e = tensor.empty(%m) : tensor<?x3xf32>
  %s = linalg.add ins(%a, %b : tensor<?x3xf32>, tensor<?x3xf32>) outs(%e : tensor<?x3xf32>) -> tensor<?x3xf32>
  %zero = arith.constant 0.0 : f32
  %r0 = tensor.empty(%m) : tensor<?xf32>
  %r1 = linalg.fill ins(%zero : f32) outs(%r0 : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.generic {indexing_maps = [#map, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<?x3xf32>) outs(%r1 : tensor<?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %z = arith.addf %x, %o : f32
    linalg.yield %z : f32
  } -> tensor<?xf32>
  return %s, %r : tensor<?x3xf32>, tensor<?xf32>
}
func.func @tail(%a: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = tensor.dim %a, %c0 : tensor<?xf32>
  %m = arith.subi %n, %c1 : index
  %s = tensor.extract_slice %a[1] [%m] [1] : tensor<?xf32> to tensor<?xf32>
  %e = tensor.empty(%m) : tensor<?xf32>
  %r = linalg.negf ins(%s : tensor<?xf32>) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
func.func @static(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %r = arith.negf %a : tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}
"""


@pytest.fixture(scope="module")
def dynamic_path(tmp_path_factory) -> str:
    from pyree.compiler import CompileOptions, compile_str
    path = tmp_path_factory.mktemp("dynamic") / "dynamic.vmfb"
    path.write_bytes(compile_str(SOURCE, CompileOptions(target_backends=["llvm-cpu"])))
    return str(path)


def test_dump_module_shows_run_time_dims_of_arguments_and_results(dynamic_path):
    proc = run_tool("dump_module", dynamic_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    f = lines.index("  @f(?x3xf32, ?x3xf32) -> (?x3xf32, ?xf32)")
    assert lines[f + 1:f + 4] == ["    symbol s0 >= 0 (from argument 0 dim 0)",
                                  "    result 0: [s0, 3] f32, 12 * s0 B",
                                  "    result 1: [s0] f32, 4 * s0 B"]
    tail = lines.index("  @tail(?xf32) -> (?xf32)")
    assert lines[tail + 1:tail + 3] == ["    symbol s0 >= 0 (from argument 0 dim 0)",
                                        "    result 0: [s0 - 1] f32, 4 * s0 - 4 B"]


def test_python_reflection_of_a_dynamic_function(dynamic_path):
    import pyree.runtime as rt
    module = rt.load_module(dynamic_path, device="local-task")
    f, tail = module["f"], module["tail"]
    assert [str(t) for t in f.argument_types] == ["?x3xf32", "?x3xf32"]
    assert [str(t) for t in f.result_types] == ["?x3xf32", "?xf32"]
    assert [t.shape for t in f.result_types] == [(-1, 3), (-1,)]
    # what ? leaves out: both arguments' and both results' leading dims are one size
    assert f.symbols == [rt.SizeSymbol("s0", 0, None, 1)]
    assert f.argument_dims == [("s0", 3), ("s0", 3)]
    assert f.result_dims == [("s0", 3), ("s0",)]
    assert tail.result_dims == [("s0 - 1",)]
    assert json.loads(f.reflection["iree.abi"])["r"] == [["ndarray", "f32", 2, None, 3],
                                                          ["ndarray", "f32", 1, None]]
    assert f.reflection["iree.abi.declaration"].endswith(
        "-> (%output0: tensor<?x3xf32>, %output1: tensor<?xf32>)")
    static = module["static"]  # nothing past its types
    assert static.symbols == [] and static.argument_dims == [(2, 3)] == static.result_dims


def test_run_module_takes_zero_size_inputs(dynamic_path):
    proc = run_tool("run_module", f"--module={dynamic_path}", "--function=f",
                    "--input=0x3xf32=", "--input=0x3xf32=")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1:] == ["result[0]: hal.buffer_view", "0x3xf32=",
                                            "result[1]: hal.buffer_view", "0xf32="]
    proc = run_tool("run_module", f"--module={dynamic_path}", "--function=tail", "--input=1xf32=5")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "0xf32="
    proc = run_tool("run_module", f"--module={dynamic_path}", "--function=tail", "--input=0xf32=")
    assert_clean_error(proc, 1, "function 'tail' at s0=0: result 0 dim 0 `s0 - 1` is -1, which "
                                "is negative")


def test_run_module_answers_at_any_size(dynamic_path, tmp_path):
    rng = np.random.default_rng()
    for m in (1, 7):
        a, b = (rng.integers(-99, 99, (m, 3)).astype(np.float32) / 4 for _ in range(2))
        out = [tmp_path / f"{m}_{i}.npy" for i in range(2)]
        text = [" ".join(str(v) for v in x.flat) for x in (a, b)]
        proc = run_tool("run_module", f"--module={dynamic_path}", "--function=f",
                        f"--input={m}x3xf32={text[0]}", f"--input={m}x3xf32={text[1]}",
                        f"--output=@{out[0]}", f"--output=@{out[1]}")
        assert proc.returncode == 0, proc.stderr
        np.testing.assert_array_equal(np.load(out[0]), a + b)
        np.testing.assert_allclose(np.load(out[1]), a.sum(1, dtype=np.float64), rtol=1e-6)
