"""No call returns or reads memory it did not write: the verifier's per-call zero fills
(module/coverage.py), through read_module and real calls on both CPU drivers, and the checks that
hold a CPU library's exports to the kernels it defines and the compiler's records of them."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler._fb.Branch import BranchT

from .module_factory import (
    ARG,
    BARRIER,
    BRANCH,
    F32,
    I1,
    RESULT,
    TRANSIENT,
    N,
    arith_builder,
    command,
    copy,
    fill,
    function,
    ref,
    tensor,
)
from .module_mutations import _pack, _unpack
from .run_mutants import POISON, _poison

MLP = (Path(__file__).parents[1] / "data" / "mlp.mlir").read_text()
DEVICES = ["local-sync", "local-task"]


@pytest.fixture(scope="module")
def mlp() -> bytes:
    return compile_str(MLP, CompileOptions(target_backends=["llvm-cpu"]))


def _clears(data: bytes, name: str) -> list[tuple]:
    tree = rt.read_module(data).tree
    f = next(f for f in tree.functions if f.name == name)
    return [(c.kind, c.index, c.offset, c.length) for c in f.clears]


def _rewritten(data: bytes, edit) -> bytes:
    tree, segment = _unpack(data)
    edit(tree)
    return _pack(tree, segment)


def test_a_compiled_module_needs_no_clears(mlp):
    """Its library records every export, so its dispatches' writes are proven."""
    assert _clears(mlp, "mlp") == []


@pytest.mark.parametrize("device", DEVICES)
def test_a_result_no_command_writes_comes_back_zero_not_stale(mlp, device, rng):
    """The dispatch that writes the result became a barrier: the call clears the result first,
    so the poisoned buffer the pool hands it never shows."""
    def drop_last_dispatch(tree):
        commands = tree.functions[0].commands
        last = max(i for i, c in enumerate(commands) if c.kind == 0)
        commands[last].kind, commands[last].dispatch = BARRIER, None

    hostile = _rewritten(mlp, drop_last_dispatch)
    assert _clears(hostile, "mlp") == [(RESULT, 0, 0, 37 * 11 * 4)]
    module = rt.load_module(hostile, device=device)
    for _ in range(3):
        _poison(module, module["mlp"])
        result = np.asarray(module.mlp(rng.standard_normal((37, 53)).astype(np.float32)))
        assert POISON not in result.tobytes()
        assert not result.any()


@pytest.mark.parametrize("device", DEVICES)
def test_the_clears_end_in_a_barrier_before_the_first_command(mlp, device):
    """A driver may run a command buffer's commands out of order where no barrier stands
    between them (Vulkan): the clears' fills came after the dispatch that wrote the same bytes
    on NVIDIA's Vulkan driver, and 3-11% of a convolution's calls were wrong."""
    def drop_last_dispatch(tree):
        commands = tree.functions[0].commands
        last = max(i for i, c in enumerate(commands) if c.kind == 0)
        commands[last].kind, commands[last].dispatch = BARRIER, None

    module = rt.load_module(_rewritten(mlp, drop_last_dispatch), device=device)
    first = module["mlp"]._plan.program.steps[0]
    kinds = [kind for kind, *_ in first.contents]
    assert kinds[:3] == ["fill", "barrier", "dispatch"], kinds


def test_an_export_table_that_contradicts_the_librarys_record_is_refused(mlp):
    def halve_workgroups(tree):
        export = tree.executables[0].cpu.exports[1]
        export.workgroupCount = max(export.workgroupCount // 2, 0)

    def claim_a_read_is_a_write(tree):
        tree.executables[0].cpu.exports[0].bindings[0].access = 1

    for edit, claim in ((halve_workgroups, "declares 0 workgroups"),
                        (claim_a_read_is_a_write,
                         r"declares 1 workgroups and bindings \(access, bytes\) \[\(1, 7844\)")):
        with pytest.raises(rt.ModuleError, match=r"executable 0 \('llvm_cpu'\) export \d "
                                                 rf"\('pyree_k\d_mlp.*'\): {claim}.*but its kernel "
                                                 r"was compiled for"):
            rt.read_module(_rewritten(mlp, edit))


@pytest.mark.parametrize("symbol", ["abort", "free", "pyree_local_task_worker_v2"])
def test_a_cpu_export_naming_another_function_is_refused(mlp, symbol):
    def rename(tree):
        tree.executables[0].cpu.exports[0].symbol = symbol

    with pytest.raises(rt.ModuleError, match=rf"executable 0 \('llvm_cpu'\) library: export 0 "
                                             rf"names '{symbol}', which is not"):
        rt.load_module(_rewritten(mlp, rename), device="local-task")


def test_a_library_cut_short_is_refused_before_dlopen(mlp):
    def cut(tree):
        tree.executables[0].cpu.library.length -= 4096

    with pytest.raises(rt.ModuleError, match=r"executable 0 \('llvm_cpu'\) library: .*cut short"):
        rt.load_module(_rewritten(mlp, cut), device="local-sync")


def test_a_gpu_grid_larger_than_its_bindings_is_refused():
    cuda = compile_str(MLP, CompileOptions(target_backends=["cuda"]))

    def huge_grid(tree):
        tree.executables[0].cuda.exports[0].gridSize = [(1 << 31) - 1, 1, 1]

    with pytest.raises(rt.ModuleError, match=r"export 0: grid \(2147483647, 1, 1\) launches more "
                                             r"blocks than its bindings have bytes \(22576\)"):
        rt.read_module(_rewritten(cuda, huge_grid))


# -- the analysis, on hand-built functions over the gcc test kernels (no records) -------------

SIZE = N * 4


def _module(kernel_library, offset_constant, *functions) -> bytes:
    b = arith_builder(kernel_library, offset_constant)
    b.module.functions = list(functions)
    return b.finish()


def _branch(condition, target: int, if_zero: bool = False):
    b = BranchT()
    b.condition, b.conditionType, b.target, b.ifZero = condition, I1, target, if_zero
    return command(BRANCH, branch=b)


def test_dispatches_without_records_prove_nothing(arith_bytes):
    assert _clears(arith_bytes, "add") == [(RESULT, 0, 0, SIZE)]
    # two dispatches into the transient arena, read back: all of it is cleared
    assert _clears(arith_bytes, "add_scaled") == [(RESULT, 0, 0, SIZE), (TRANSIENT, 0, 0, 2 * SIZE)]
    assert _clears(arith_bytes, "fill_copy") == []  # a fill and a copy write both results


def test_both_arms_of_a_conditional_must_write(kernel_library, offset_constant):
    """0: if flag == 0 goto 3; 1: fill result; 2: goto 5 (past the end: return);
    3: [fill result]; 4: barrier."""
    flag, out = tensor(I1, 1), tensor(F32, 4)

    def program(other_arm_fills: bool):
        return [_branch(ref(ARG, 0, 1), 3, if_zero=True), fill(ref(RESULT, 0, 16), 7, 4),
                _branch(None, 5), fill(ref(RESULT, 0, 16), 9, 4) if other_arm_fills
                else command(BARRIER), command(BARRIER)]

    data = _module(kernel_library, offset_constant,
                   function("both", [flag], [out], program(True)),
                   function("one", [flag], [out], program(False)))
    assert _clears(data, "both") == []
    assert _clears(data, "one") == [(RESULT, 0, 0, 16)]
    for device in DEVICES:
        module = rt.load_module(data, device=device)
        for value, expected in ((1, 7), (0, 9)):
            assert np.asarray(module.both(np.array([value], bool))).view(np.uint32).tolist() \
                == [expected] * 4
        assert np.asarray(module.one(np.array([0], bool))).tolist() == [0.0] * 4


def test_a_loop_body_may_never_run(kernel_library, offset_constant):
    """0: if flag == 0 goto 3; 1: fill the first half; 2: goto 0; 3: return: the fill may run
    zero times, so the result is cleared; a fill before the loop proves it."""
    flag, out = tensor(I1, 1), tensor(F32, 4)

    def loop(at: int):
        return [_branch(ref(ARG, 0, 1), at + 3, if_zero=True), fill(ref(RESULT, 0, 8), 1, 4),
                _branch(None, at)]

    data = _module(kernel_library, offset_constant,
                   function("maybe", [flag], [out], loop(0)),
                   function("first", [flag], [out], [fill(ref(RESULT, 0, 16), 2, 4), *loop(1)]))
    assert _clears(data, "maybe") == [(RESULT, 0, 0, 16)]
    assert _clears(data, "first") == []


def test_a_function_past_the_work_budget_clears_everything_it_reads(kernel_library,
                                                                    offset_constant):
    """Thousands of one-byte writes: the analysis stops at its budget and clears every byte read
    or returned, quickly."""
    out = tensor(F32, 4)
    fills = [fill(ref(TRANSIENT, 0, 1, offset=2 * i), 1, 1) for i in range(4000)]
    fills.append(copy(ref(TRANSIENT, 0, 16), ref(RESULT, 0, 16)))
    data = _module(kernel_library, offset_constant,
                   function("many", [], [out], fills, transient=8000))
    start = time.perf_counter()
    assert _clears(data, "many") == [(RESULT, 0, 0, 16), (TRANSIENT, 0, 0, 16)]
    assert time.perf_counter() - start < 30

