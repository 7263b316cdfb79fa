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
    # --pyree-vulkan-target: a target triple from IREE's Vulkan guide; the backend resolves it.
    vulkan_target: str = ""
    # --pyree-print-ir-after-all: print each stage's IR to this stream (stderr in the CLI).
    print_ir_after_all: bool = False
    # Called with a short line as each stage starts ("parsing m.mlir (94.0 MB)", "codegen for
    # llvm-cpu: 40 kernels"); pyree-compile prints them for long compiles (--pyree-progress).
    progress: Callable[[str], None] | None = None
