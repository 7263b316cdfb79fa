"""The module fuzz test on the CPU drivers: hostile rewrites of real compiled modules (their
FlatBuffer: bindings, exports, symbols, library references, commands, workgroup counts, push
constants, constants, signatures; re-stamped) are loaded and run on local-task and local-sync in
child processes. None may crash, hang (beyond a host-program loop it rewrote) or return a byte
the call did not write; each is refused or runs to a result or a clean error
(hostile_runs.py)."""

from __future__ import annotations

import pytest
from control_flow_cases import MLIR as CONTROL_FLOW
from pyree.compiler import CompileOptions, compile_str

from .hostile_runs import failures, make_mutants, run_all

MUTANTS = 240
SEED = 26

# elementwise, reductions, a constant and a transient arena; results written by copies and fills
ARITH = """
func.func @arith(%a: tensor<37x53xf32>, %b: tensor<53xf32>) -> (tensor<37x53xf32>, tensor<37xf32>, tensor<53xf32>) {
  %w = arith.constant dense<0.5> : tensor<37x53xf32>
  %e = tensor.empty() : tensor<37x53xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a, %b, %w : tensor<37x53xf32>, tensor<53xf32>, tensor<37x53xf32>) outs(%e : tensor<37x53xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32, %o: f32):
    %t = arith.addf %x, %y : f32
    %u = arith.mulf %t, %z : f32
    linalg.yield %u : f32
  } -> tensor<37x53xf32>
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<37xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<37xf32>) -> tensor<37xf32>
  %r = linalg.reduce ins(%s : tensor<37x53xf32>) outs(%f1 : tensor<37xf32>) dimensions = [1]
    (%x: f32, %y: f32) { %t = arith.maximumf %x, %y : f32
      linalg.yield %t : f32 }
  return %s, %r, %b : tensor<37x53xf32>, tensor<37xf32>, tensor<53xf32>
}
"""


@pytest.fixture(scope="module")
def bases() -> dict[str, bytes]:
    cpu = CompileOptions(target_backends=["llvm-cpu"])
    from pathlib import Path
    mlp = (Path(__file__).parents[1] / "data" / "mlp.mlir").read_text()
    return {name: compile_str(text, cpu)
            for name, text in (("mlp", mlp), ("arith", ARITH), ("control_flow", CONTROL_FLOW))}


@pytest.mark.parametrize("device", ["local-task", "local-sync"])
def test_hostile_modules_neither_crash_hang_nor_leak(bases, device, tmp_path):
    records = make_mutants(bases, MUTANTS, SEED, tmp_path)
    results = run_all(device, tmp_path, MUTANTS)
    assert not failures(records, tmp_path, results), "\n".join(failures(records, tmp_path, results))
    ran = sum(any(o == "ok" for o in outcomes) for outcomes in results.values())
    refused = sum(outcomes[0].startswith("refused") for outcomes in results.values())
    assert ran > MUTANTS // 10 and refused > MUTANTS // 10, (ran, refused)
