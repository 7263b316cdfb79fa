"""Command-line tools of the compiler distribution (``pyree-compile``), and IREE's
``iree.compiler.tools`` names, which IREE's Python docs call as ``ireec.tools.compile_str(...)``:
the same functions as ``pyree.compiler``'s, loaded on first use."""

_IREE_NAMES = ("compile_file", "compile_str", "CompilerToolError", "InputType",
               "query_available_targets")


def __getattr__(name: str):
    if name in _IREE_NAMES:
        import pyree.compiler

        return getattr(pyree.compiler, name)
    raise AttributeError(f"module 'pyree.compiler.tools' has no attribute {name!r}")
