"""Compiler options: one dataclass that the CLI, the Python API and every backend read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# The --pyree-hal-target-backends names (IREE's spellings). Each maps to a codegen package.
TARGET_BACKENDS = ("llvm-cpu", "cuda", "rocm", "vulkan-spirv")


@dataclass
class CompileOptions:
    target_backends: list[str] = field(default_factory=lambda: ["llvm-cpu"])
    # --pyree-llvmcpu-target-cpu: "host" (the build machine's CPU), "generic" (baseline x86-64),
    # or an LLVM CPU name ("skylake-avx512", "znver4", ...).
    llvmcpu_target_cpu: str = "host"
    # --pyree-cuda-target: sm_<N>, a code name or a product name; the cuda backend resolves it.
    cuda_target: str = "sm_80"
    # --pyree-rocm-target-chip: a gfx name or an AMD product name, optionally with :sramecc+/- and
    # :xnack+/- features; the rocm backend resolves it (codegen/rocm/targets.py).
    rocm_target: str = "gfx908"
    # --iree-rocm-link-bc: math as calls to AMD's device libraries (ocml), linked from
    # --iree-rocm-bc-dir (empty: $ROCM_PATH/amdgcn/bitcode, /opt/rocm/..., Debian's); off, pyree
    # composes math from basic arithmetic itself (codegen/rocm/device_libs.py).
    rocm_link_bc: bool = False
    rocm_bc_dir: str = ""
    # --pyree-vulkan-target: a target triple from IREE's Vulkan guide; the backend resolves it.
    vulkan_target: str = ""
    # --pyree-input-type: auto (detect from the op names), none, stablehlo or tosa
    # (input/input_types.py).
    input_type: str = "auto"
    # --pyree-input-demote-f64-to-f32 / -demote-i64-to-i32 / -promote-bf16-to-f32: rewrite those
    # element types before lowering (input/demotion.py); the functions' signatures change too.
    # IREE's defaults: f64 and bf16 off; i64 on for StableHLO input only (None: that default).
    demote_f64_to_f32: bool = False
    demote_i64_to_i32: bool | None = None
    promote_bf16_to_f32: bool = False
    # --pyree-print-ir-after-all: print each stage's IR to this stream (stderr in the CLI).
    print_ir_after_all: bool = False
    # Called with a short line as each stage starts ("parsing m.mlir (94.0 MB)", "codegen for
    # llvm-cpu: 40 kernels"); pyree-compile prints them for long compiles (--pyree-progress).
    progress: Callable[[str], None] | None = None
