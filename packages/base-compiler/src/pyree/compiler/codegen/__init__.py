"""Per-target code generation: one package per target, each exporting one ``BACKEND``
(``interface.py``), registered here once. The options (the names the flags accept), the pipeline
(properties such as implicit-GEMM support) and the executable dump all read this registry.

The registry names packages rather than importing them, so that reading the options imports no
backend (nor llvmlite).
"""

import importlib

# --iree-hal-target-backends name -> the package under codegen/ that defines its BACKEND, in
# --iree-hal-list-target-backends order.
PACKAGES = {
    "llvm-cpu": "llvm_cpu",
    "cuda": "cuda",
    "rocm": "rocm",
    "vulkan-spirv": "spirv",
}

# IREE's portable reference backend: pyree builds it as llvm-cpu's code for the baseline x86-64
# CPU (options.resolve_targets turns the name into llvm-cpu).
PORTABLE = "vmvx"

NAMES = (*PACKAGES, PORTABLE)


def backend(name: str):
    """The Backend for a --iree-hal-target-backends name (validated by the caller)."""
    return importlib.import_module(f"{__name__}.{PACKAGES[name]}").BACKEND
