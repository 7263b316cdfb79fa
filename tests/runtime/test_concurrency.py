"""One loaded module called from 8 threads at once on the CPU drivers: every result equals, bit for
bit, the single-threaded result for the same input (tests/stress.py), for a static command list,
a large argument with a transient arena, and host control flow."""

from __future__ import annotations

import pyree.runtime as rt
import pytest
from concurrency_cases import PROGRAMS, inputs
from pyree.compiler import CompileOptions, compile_str
from stress import hammer


@pytest.fixture(scope="module")
def cpu_modules() -> dict[str, bytes]:
    options = CompileOptions(target_backends=["llvm-cpu"])
    return {name: compile_str(p.mlir, options) for name, p in PROGRAMS.items()}


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_eight_threads_get_the_single_threaded_answers(cpu_modules, device, name):
    module = rt.load_module(cpu_modules[name], device=device)
    program = PROGRAMS[name]
    assert hammer(module, program.function, inputs(program, 6), threads=8, calls=25) == []


def test_hammer_reports_answers_that_follow_another_threads_input(cpu_modules):
    """The check itself: a function that sometimes answers with the previous caller's input (as
    the cuda driver's shared staging did) is reported, as is an exception in a thread."""
    module = rt.load_module(cpu_modules["mlp"], device="local-task")
    real, last, calls = module["mlp"], [], [0]

    def racy(x):
        calls[0] += 1
        if calls[0] == 13:
            raise RuntimeError("thirteenth call")
        if last and calls[0] % 5 == 0:
            x = last[0]
        last[:] = [x]
        return real(x)

    class Racy:
        device = module.device

        def __getitem__(self, name):
            return racy

    problems = hammer(Racy(), "mlp", inputs(PROGRAMS["mlp"], 6), threads=4, calls=20)
    assert any("differs from the single-threaded one" in p for p in problems), problems
    assert any("RuntimeError: thirteenth call" in p for p in problems), problems
