"""pyree.compiler: MLIR in, a self-contained .vmfb module out.

    from pyree.compiler import compile_str, CompileOptions
    vmfb = compile_str(mlir_text, CompileOptions(target_backends=["llvm-cpu"]))

The pipeline (xDSL, llvmlite) is imported on first use, so that importing a single stage such
as ``pyree.compiler.kernel`` stays light.
"""

from pyree.compiler.errors import CompileError
from pyree.compiler.options import TARGET_BACKENDS, CompileOptions

__all__ = ["CompileError", "CompileOptions", "TARGET_BACKENDS", "compile_file", "compile_str"]


def __getattr__(name: str):
    if name in ("compile_file", "compile_str"):
        from pyree.compiler import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'pyree.compiler' has no attribute {name!r}")
