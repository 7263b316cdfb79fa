"""Command-line tools of the compiler distribution (``pyree-compile``), and IREE's
``iree.compiler.tools`` names, which IREE's Python docs call as ``ireec.tools.compile_str(...)``:
the same objects as ``pyree.compiler``'s, loaded on first use. IREE's tool-binary helpers
(``find_tool``, ``invoke_immediate``, ``TempFileSaver``, ...) have no counterpart: pyree compiles
in-process (docs/MIGRATING_FROM_IREE.md)."""

__all__ = ["CompilerOptions", "CompilerToolError", "DEFAULT_TESTING_BACKENDS",
           "DEFAULT_TESTING_DRIVER", "InputType", "OutputFormat", "compile_file", "compile_str",
           "query_available_targets"]


def __getattr__(name: str):
    if name in __all__:
        import pyree.compiler

        return getattr(pyree.compiler, name)
    raise AttributeError(f"module 'pyree.compiler.tools' has no attribute {name!r}")
