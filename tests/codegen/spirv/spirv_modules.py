"""Helpers for the vulkan-spirv codegen tests and the vulkan driver's: modules compiled for
vulkan-spirv, the SPIR-V out of them, and spirv-val."""

from __future__ import annotations

import os
import struct
import subprocess

import numerics_cases as C
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler._fb.ExecutableFormat import ExecutableFormat
from pyree.compiler._fb.Module import Module, ModuleT
from tooling import require_tool

TRAILER = 48  # "PYRETRL1" + u64 data offset + SHA-256
# The target the math tests compile for: the device's (PYREE_VULKAN_TARGET, e.g.
# hopper-h100-linux on the H100, whose shaders then keep subnormals), lavapipe's by default.
DEVICE_TARGET = os.environ.get("PYREE_VULKAN_TARGET", "cpu-lavapipe-linux")


def vulkan_vmfb(mlir: str, triple: str = "") -> bytes:
    """``mlir`` compiled for vulkan-spirv (``triple``: a --pyree-vulkan-target, "" the baseline)."""
    return compile_str(mlir, CompileOptions(target_backends=["vulkan-spirv"], vulkan_target=triple))


def compile_case(name: str, triple: str = "") -> bytes:
    """The numerics table's case ``name`` (tests/numerics_cases.py) compiled for vulkan-spirv."""
    return vulkan_vmfb(C.CASES[name]().mlir, triple)


def export_shapes(name: str, triple: str) -> list[tuple[list, list]]:
    """(grid size, workgroup size) of each export of case ``name``'s one executable."""
    (_, executable), = spirv_binaries(compile_case(name, triple))
    return [(list(e.gridSize), list(e.blockSize)) for e in executable.exports]


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
