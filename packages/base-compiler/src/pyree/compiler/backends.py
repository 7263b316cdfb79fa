"""The target backends this compiler builds for, registered once: each
``--iree-hal-target-backends`` name and the package under ``codegen/`` that defines its
``BACKEND`` (``codegen/interface.py``).

It lies below both its readers: the options validate names against it without importing a
backend (nor llvmlite), and ``codegen.backend(name)`` imports the package it names.
"""

# --iree-hal-target-backends name -> its package under codegen/, in
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
