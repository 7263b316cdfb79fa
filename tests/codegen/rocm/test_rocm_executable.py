"""CPU-only: the rocm target's executable (AMDGPU via llvmlite, linked by ld.lld) on several chips:
each template links into a code object, the IR is AMDGPU-shaped, whole programs make modules
the runtime's reader accepts.

Nothing here runs on an AMD GPU: there is none on the machines this project is built and tested
on. The code objects (hsaco) are checked structurally by ``hsaco_reader`` (ELF header, kernel symbols
and descriptors, the AMDGPU metadata note); the rocm driver runs the cuda target's kernels on an
NVIDIA GPU through the HIP-on-CUDA shim (tests/drivers/rocm/hip_on_cuda/).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from codegen.cuda import kernel_zoo as zoo
from hsaco_reader import check_hsaco, check_module, lld  # noqa: F401
from tooling import require_module

require_module("xdsl")  # the compiler

from pyree.compiler import CompileError, CompileOptions, compile_str  # noqa: E402
from pyree.compiler.codegen.rocm import generate_hsaco, generate_ir, resolve_target  # noqa: E402
from pyree.compiler.codegen.rocm.targets import CHIPS  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "data"
CHIPS_TESTED = ["gfx908", "gfx942", "gfx1100"]


# ---- kernel templates --------------------------------------------------------------------------
TEMPLATES = {"elementwise": [zoo.add, lambda: zoo.add((64, 1024)), lambda: zoo.add(dtype="f16"),
                             zoo.chain],
             "reduction": [zoo.row_sum, lambda: zoo.row_sum(op="max"), zoo.col_sum],
             "matmul": [zoo.matmul, lambda: zoo.matmul(dtype="f16", acc_dtype="f32")]}


@pytest.mark.parametrize("chip", CHIPS_TESTED)
@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_templates_link_into_a_code_object(chip, template):
    kernels = [make() for make in TEMPLATES[template]]
    hsaco, launches = generate_hsaco(kernels, resolve_target(chip))
    check_hsaco(hsaco, chip, launches, kernels)


@pytest.mark.parametrize("chip", CHIPS_TESTED)
def test_ir_is_amdgpu_shaped(chip):
    kernels = [zoo.add(), zoo.row_sum()]
    ir, launches = generate_ir(kernels, resolve_target(chip))
    assert 'target triple = "amdgcn-amd-amdhsa"' in ir
    assert '!"amdhsa_code_object_version", i32 500' in ir
    assert ir.count("define amdgpu_kernel void") == 2
    for name, _ in launches:
        assert f"@{name}(ptr addrspace(1)" in ir
    for block in {launch.block[0] for _, launch in launches}:
        assert f'"amdgpu-flat-work-group-size"="1,{block}"' in ir
    assert "llvm.amdgcn.workgroup.id.x" in ir and "llvm.amdgcn.workitem.id.x" in ir
    assert "llvm.amdgcn.s.barrier" in ir and 'fence syncscope("workgroup")' in ir
    assert "addrspace(3) global" in ir and "nvvm" not in ir
    wave = CHIPS[chip][1]
    assert "and i32 %t" in ir and f", {wave - 1}\n" in ir  # lane within the wave
    assert ("llvm.amdgcn.mbcnt.hi" in ir) == (wave == 64)


# ---- whole programs through compile_str ----------------------------------------------------------
@pytest.mark.parametrize("chip", CHIPS_TESTED)
def test_mlp_module(chip):
    vmfb = compile_str((DATA / "mlp.mlir").read_text(),
                       CompileOptions(target_backends=["rocm"], rocm_target=chip))
    assert check_module(vmfb, chip) >= 2
    # the runtime's reader accepts the module (it verifies every DataRef and export)
    require_module("pyree.runtime.module.reader").read_module(vmfb)


@pytest.mark.parametrize("chip", CHIPS_TESTED)
def test_jax_mlp_module(chip):
    require_module("jax")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "frontends"))
    from programs import jax_programs
    (program,) = [p for p in jax_programs() if p.name == "jax_mlp"]
    vmfb = compile_str(program.mlir, CompileOptions(target_backends=["rocm"], rocm_target=chip))
    assert check_module(vmfb, chip) >= 3


def test_without_ld_lld_the_error_says_what_to_install(monkeypatch):
    import pyree.compiler.codegen.rocm.hsaco as hsaco
    monkeypatch.delenv("PYREE_LLD", raising=False)
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(hsaco.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(CompileError, match="ld.lld.*apt-get install lld-22.*ziglang.*PYREE_LLD"):
        compile_str((DATA / "add.mlir").read_text(), CompileOptions(target_backends=["rocm"]))
