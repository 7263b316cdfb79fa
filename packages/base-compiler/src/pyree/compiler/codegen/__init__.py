"""Per-target code generation. A backend is a module with

    compile_executable(kernels: list[Kernel], options: CompileOptions, builder: ModuleBuilder)
        -> pyree.compiler._fb.Executable.ExecutableT

whose export k compiles kernels[k]. Payload bytes go through builder.add_data().
"""

import importlib

_BACKEND_MODULES = {
    "llvm-cpu": "pyree.compiler.codegen.llvm_cpu",
    "cuda": "pyree.compiler.codegen.cuda",
    "rocm": "pyree.compiler.codegen.rocm",
    "vulkan-spirv": "pyree.compiler.codegen.spirv",
}


def backend(name: str):
    """The codegen module for a --pyree-hal-target-backends name (validated by the caller)."""
    return importlib.import_module(_BACKEND_MODULES[name])
