"""Per-target code generation: one package per target, each exporting one ``BACKEND``
(``interface.py``). The registry of names is ``pyree.compiler.backends``; the options (the
names the flags accept), the pipeline (properties such as implicit-GEMM support) and the
executable dump all read it.
"""

import importlib

from pyree.compiler.backends import NAMES, PACKAGES, PORTABLE

__all__ = ["NAMES", "PACKAGES", "PORTABLE", "backend"]


def backend(name: str):
    """The Backend for a --iree-hal-target-backends name (validated by the caller)."""
    return importlib.import_module(f"{__name__}.{PACKAGES[name]}").BACKEND
