"""Helpers for the cuda codegen tests: the cuda executable of a compiled module, and ptxas -v."""

from __future__ import annotations

import subprocess

from pyree.compiler._fb.Module import Module, ModuleT


def cuda_executable(vmfb: bytes):
    """The CudaExecutableT of a module compiled for the cuda target alone."""
    module = ModuleT.InitFromObj(Module.GetRootAs(vmfb, 0))
    (exe,) = module.executables
    return exe.cuda


def assemble_verbose(ptxas: str, ptx: str, arch: str, tmp_path) -> str:
    """ptxas -v's report (registers, spills, serialized wgmma) on ``ptx``, which must assemble."""
    src = tmp_path / "k.ptx"
    src.write_text(ptx)
    proc = subprocess.run([ptxas, f"-arch={arch}", "-v", str(src), "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr
