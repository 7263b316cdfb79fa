"""Per-target code generation. A backend is a module with

    compile_executable(kernels: list[Kernel], options: CompileOptions, builder: ModuleBuilder)
        -> pyree.compiler._fb.Executable.ExecutableT

whose export k compiles kernels[k]. Payload bytes go through builder.add_data().
"""

import importlib

from pyree.compiler.errors import CompileError

_BACKEND_MODULES = {
    "llvm-cpu": "pyree.compiler.codegen.llvm_cpu",
    "cuda": "pyree.compiler.codegen.cuda",
    "vulkan-spirv": "pyree.compiler.codegen.spirv",
}


def backend(name: str):
    """The codegen module for a --pyree-hal-target-backends name (validated by the caller)."""
    if name not in _BACKEND_MODULES:
        raise CompileError(f"target backend '{name}' is not implemented yet; available: "
                           + ", ".join(_BACKEND_MODULES))
    return importlib.import_module(_BACKEND_MODULES[name])
