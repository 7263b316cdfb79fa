"""Optional extras (``pyree-base-compiler[torch]``, ``[onnx]``, ``[tosa]``): their packages are
imported on first use, so the core compiler never loads them. The importers and the TOSA input
conversion both need this, and neither is the other's home."""

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
