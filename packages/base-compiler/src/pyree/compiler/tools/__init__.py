"""Command-line tools of the compiler distribution (``pyree-compile``), and IREE's
``iree.compiler.tools`` names, which IREE's Python docs call as ``ireec.tools.compile_str(...)``.
As in IREE, ``pyree.compiler`` re-exports these names, so this package lies below it and reads
them from the stages that define them, loading the pipeline on first use. IREE's tool-binary
helpers (``find_tool``, ``invoke_immediate``, ``TempFileSaver``, ...) have no counterpart: pyree
compiles in-process (docs/MIGRATING_FROM_IREE.md)."""

from pyree.compiler.errors import CompileError
from pyree.compiler.options import TARGET_BACKENDS, InputType

# IREE's name for the one error type.
CompilerToolError = CompileError


def query_available_targets() -> list[str]:
    """The target backends this compiler builds for (IREE's ``query_available_targets``)."""
    return list(TARGET_BACKENDS)


_LAZY = {"compile_file": "pipeline", "compile_str": "pipeline",
         **dict.fromkeys(("CompilerOptions", "DEFAULT_TESTING_BACKENDS", "DEFAULT_TESTING_DRIVER",
                          "OutputFormat"), "compiler_options")}

__all__ = ["CompilerToolError", "InputType", "query_available_targets", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"pyree.compiler.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'pyree.compiler.tools' has no attribute {name!r}")
