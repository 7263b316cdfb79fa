"""Importers: models from other frameworks -> linalg-on-tensors MLIR text, through torch-mlir.

Optional extras (``pip install pyree-base-compiler[onnx]`` / ``[torch]``): nothing here is
imported by ``pyree.compiler`` until an importer is called, and each importer imports its
framework inside the call, so the core compiler never loads torch or onnx.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from pyree.compiler.errors import CompileError


def require(module: str, extra: str, what: str) -> ModuleType:
    """Imports ``module`` or raises a CompileError that names the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise CompileError(
            f"{what} needs the '{err.name or module}' package, which is not installed: "
            f"pip install pyree-base-compiler[{extra}]") from None


def first_line(err: BaseException) -> str:
    """The first line of a framework's exception message (some run to pages)."""
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0]
