"""The ``ptxas`` fixture of the cuda codegen tests."""

from __future__ import annotations

import pytest
from tooling import require_tool


@pytest.fixture
def ptxas() -> str:
    """The compiler assembles cubins with the same ptxas (``$PYREE_PTXAS`` or the PATH's)."""
    return require_tool("ptxas", env="PYREE_PTXAS")
