"""CPU-only: relabel.py turns cuda modules into rocm modules that the runtime's verifier accepts,
with the PTX as the code object and everything else (exports, constants, host programs) intact."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[2])]
from tooling import require_module  # noqa: E402

require_module("pyree.compiler")  # absent on a GPU host that runs prebuilt modules

import pyree.runtime as rt  # noqa: E402
import rocm_on_cuda_cases as cases  # noqa: E402
from pyree.compiler import CompileOptions, compile_str  # noqa: E402
from relabel import relabel  # noqa: E402

CUDA = CompileOptions(target_backends=["cuda"], cuda_target="sm_90")
MLP = (HERE.parents[2] / "data" / "mlp.mlir").read_text()


@pytest.mark.parametrize("name", ["add_37x53", "matmul_f32_37x53x29", "mlp"])
def test_relabelled_module_is_rocm_with_the_ptx_as_code_object(name):
    mlir = MLP if name == "mlp" else cases.CASES[name][0]
    cuda = rt.read_module(compile_str(mlir, CUDA))
    rocm = rt.read_module(relabel(compile_str(mlir, CUDA)))  # read_module verifies every offset
    assert [e.format for e in rocm.tree.executables] == [2]  # ExecutableFormat.rocm
    before, after = cuda.tree.executables[0].cuda, rocm.tree.executables[0].rocm
    assert rocm.tree.executables[0].cuda is None
    assert after.targetArch == before.targetArch == "sm_90"
    assert bytes(rocm.bytes_of(after.codeObject)) == bytes(cuda.bytes_of(before.ptx))
    assert bytes(rocm.bytes_of(after.codeObject)).startswith(b"//")  # PTX text, not the cubin
    assert [(e.name, list(e.gridSize), list(e.blockSize), e.sharedMemoryBytes,
             [(b.access, b.minLength) for b in e.bindings]) for e in after.exports] == \
           [(e.name, list(e.gridSize), list(e.blockSize), e.sharedMemoryBytes,
             [(b.access, b.minLength) for b in e.bindings]) for e in before.exports]
    moved = [bytes(rocm.bytes_of(c.data)) for c in rocm.tree.constants]
    assert moved == [bytes(cuda.bytes_of(c.data)) for c in cuda.tree.constants]
    assert bool(moved) == (name == "mlp")  # the MLP's weights are constants
    assert [len(f.commands) for f in rocm.tree.functions] == \
           [len(f.commands) for f in cuda.tree.functions]


def test_dump_module_reads_the_relabelled_file(tmp_path):
    path = tmp_path / "add.vmfb"
    path.write_bytes(relabel(compile_str(cases.CASES["add_37x53"][0], CUDA)))
    done = subprocess.run([sys.executable, "-m", "pyree.runtime.tools.dump_module", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert ": rocm" in done.stdout and "target: sm_90" in done.stdout
    assert "k0_main_dispatch_0_addf_37x53_f32: grid 8x1x1, block 256x1x1" in done.stdout


def test_damaged_code_object_keeps_a_valid_file():
    vmfb = relabel(compile_str(cases.CASES["add_37x53"][0], CUDA), edit_code=cases.damage)
    module = rt.read_module(vmfb)
    code = bytes(module.bytes_of(module.tree.executables[0].rocm.codeObject))
    assert b"\tpyree_damaged_instruction;\n\tret;" in code


def test_only_cuda_modules_are_relabelled():
    cpu = compile_str(cases.CASES["add_37x53"][0], CompileOptions(target_backends=["llvm-cpu"]))
    with pytest.raises(ValueError, match="not a cuda executable"):
        relabel(cpu)
