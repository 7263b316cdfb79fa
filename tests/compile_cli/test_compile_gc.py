"""A compile keeps the objects of its finished stages out of Python's full collections
(``gc.freeze``) while code generation runs, and leaves the process's collector as it found it:
the objects given back at the end, also after an error, and a caller's own frozen objects
left frozen. The module bytes do not depend on it."""

import gc

import pyree.compiler.codegen.llvm_cpu as llvm_cpu
import pytest
from pyree.compiler import CompileError, CompileOptions, compile_str

MLIR = """
func.func @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %s = arith.addf %a, %b : tensor<8xf32>
  %t = math.exp %s : tensor<8xf32>
  return %t : tensor<8xf32>
}
"""
CPU = CompileOptions(target_backends=["llvm-cpu"], llvmcpu_target_cpu="generic")


@pytest.fixture
def seen(monkeypatch):
    """gc.get_freeze_count() as llvm-cpu code generation starts, one per compile."""
    counts = []
    targets_of = llvm_cpu.targets_of  # (the first thing llvm-cpu's compile_executable asks)

    def spy(*args, **kwargs):
        counts.append(gc.get_freeze_count())
        return targets_of(*args, **kwargs)

    monkeypatch.setattr(llvm_cpu, "targets_of", spy)
    return counts


def test_code_generation_runs_with_the_program_frozen_and_the_end_gives_it_back(seen):
    assert gc.get_freeze_count() == 0
    first = compile_str(MLIR, CPU)
    assert seen[0] > 0 and gc.get_freeze_count() == 0
    gc.disable()
    try:  # the same bytes with the collector off throughout
        assert compile_str(MLIR, CPU) == first
    finally:
        gc.enable()


def test_an_error_gives_the_objects_back_too(seen, monkeypatch):
    def fail(*args, **kwargs):
        raise CompileError("no code today")

    monkeypatch.setattr(llvm_cpu, "targets_of", fail)
    with pytest.raises(CompileError, match="no code today"):
        compile_str(MLIR, CPU)
    assert gc.get_freeze_count() == 0


def test_a_callers_frozen_objects_stay_frozen(seen):
    kept = [object() for _ in range(3)]
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        compile_str(MLIR, CPU)
        # (frozen objects that die leave the count: it may fall, never rise nor reach 0)
        assert seen[0] <= before and 0 < gc.get_freeze_count() <= before
    finally:
        gc.unfreeze()
    assert kept
