"""Helpers for the vulkan tests: SPIR-V out of a compiled module, and spirv-val."""

from __future__ import annotations

import struct
import subprocess

from pyree.compiler._fb.ExecutableFormat import ExecutableFormat
from pyree.compiler._fb.Module import Module, ModuleT
from tooling import require_tool

TRAILER = 48  # "PYRETRL1" + u64 data offset + SHA-256


def spirv_binaries(vmfb: bytes) -> list[tuple[bytes, object]]:
    """(SPIR-V bytes, SpirvExecutableT) for every spirv executable of the module file."""
    (data_offset,) = struct.unpack_from("<Q", vmfb, len(vmfb) - TRAILER + 8)
    module = ModuleT.InitFromObj(Module.GetRootAs(vmfb, 0))
    out = []
    for ex in module.executables or []:
        if ex.format == ExecutableFormat.spirv:
            ref = ex.spirv.code
            out.append((vmfb[data_offset + ref.offset:data_offset + ref.offset + ref.length], ex.spirv))
    return out


def validate(code: bytes, tmp_path, env: str = "vulkan1.2") -> str:
    """spirv-val's complaint, or "" when the binary is valid for ``env``. $SPIRV_VAL picks another
    build (Debian 12's predates SPV_KHR_cooperative_matrix)."""
    spirv_val = require_tool("spirv-val", env="SPIRV_VAL")  # Debian: spirv-tools
    path = tmp_path / "shader.spv"
    path.write_bytes(code)
    proc = subprocess.run([spirv_val, "--target-env", env, str(path)], capture_output=True, text=True)
    return "" if proc.returncode == 0 else proc.stdout + proc.stderr
