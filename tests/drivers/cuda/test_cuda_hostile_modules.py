"""On an NVIDIA GPU: the module fuzz test for the cuda target (tests/runtime/hostile_runs.py).
Hostile rewrites of real cuda modules, re-stamped, are loaded and run in child processes; none
may crash, hang (beyond a host-program loop it rewrote) or return a byte the call did not write.
The sweep that found 5 segfaults and 6 hangs here: a dispatch with one binding fewer and its
layout shortened to match, a cubin cut to 64 bytes, a grid of 2^31-1 blocks. The base modules
come from PYREE_CUDA_MODULE_DIR (hostile_*.vmfb, made by build_modules.py on a CPU machine) or
are compiled here; PYREE_HOSTILE_MUTANTS and PYREE_HOSTILE_SEED make a longer sweep."""

from __future__ import annotations

import os
from pathlib import Path

import pyree.runtime as rt
import pytest
from runtime.hostile_runs import MUTANTS, base_sources, compile_bases, fuzz
from runtime.module_mutations import _pack, _unpack

pytestmark = pytest.mark.cuda


@pytest.fixture(scope="module")
def bases() -> dict[str, bytes]:
    folder = os.environ.get("PYREE_CUDA_MODULE_DIR")
    if folder:
        return {name: (Path(folder) / f"hostile_{name}.vmfb").read_bytes() for name in base_sources()}
    from pyree.compiler import CompileOptions
    return compile_bases(CompileOptions(target_backends=["cuda"], cuda_target="sm_90"))


@pytest.mark.parametrize("device", ["cuda", "cuda://0?command_buffer=direct"])
def test_hostile_modules_neither_crash_hang_nor_leak(bases, device, tmp_path):
    failed, counts = fuzz(device, bases, tmp_path)
    assert not failed, "\n".join(failed)
    assert counts.get("ok", 0) > MUTANTS // 10 and counts.get("refused", 0) > MUTANTS // 10, counts


def test_a_dispatch_short_of_the_kernels_parameters_is_refused(bases):
    """One binding fewer, and the export's layout shortened to match: the kernel's own
    parameter list (cuFuncGetParamInfo) says it takes more."""
    tree, segment = _unpack(bases["mlp"])
    dispatch = next(c.dispatch for c in tree.functions[0].commands if c.kind == 0)
    dispatch.bindings.pop()
    export = tree.executables[0].cuda.exports[dispatch.kernel]
    export.bindings.pop()
    with pytest.raises(rt.DriverError, match=f"kernel '{export.name.decode()}' takes 4 "
                                             "parameters, the dispatch gives 3 bindings and 0 "
                                             "push constants"):
        rt.load_module(_pack(tree, segment), device="cuda")


def test_a_cubin_cut_short_is_refused_before_the_driver_sees_it(bases):
    tree, segment = _unpack(bases["mlp"])
    cuda = tree.executables[0].cuda
    if not cuda.cubin.length:
        pytest.fail("the module has no cubin: build it with ptxas on the PATH (PYREE_PTXAS)")
    cuda.cubin.length = 64
    with pytest.raises(rt.DriverError, match=r"the CUDA executable's cubin sm_90a? is refused: .*cut "
                                             r"short"):
        rt.load_module(_pack(tree, segment), device="cuda")
