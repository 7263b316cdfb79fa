"""The code generators are siblings over a common floor (issue 28): no backend imports another,
``codegen/common/`` imports no backend, and every registered backend is one ``BACKEND`` object
whose name, artefacts and target resolution the compiler reads."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pyree.compiler import CompileOptions
from pyree.compiler.codegen import NAMES, PACKAGES, PORTABLE, backend
from pyree.compiler.options import TARGET_BACKENDS

CODEGEN = Path(__file__).resolve().parents[2] / "packages/base-compiler/src/pyree/compiler/codegen"
BACKENDS = sorted(PACKAGES.values())


def _imported_packages(folder: Path) -> set[str]:
    """The codegen packages (backends and common) that the modules under ``folder`` import."""
    found = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                parts = name.split(".")
                if parts[:3] == ["pyree", "compiler", "codegen"] and len(parts) > 3:
                    found.add(parts[3])
    return found


@pytest.mark.parametrize("package", BACKENDS)
def test_no_backend_imports_another(package):
    assert _imported_packages(CODEGEN / package) & set(BACKENDS) <= {package}


def test_common_imports_no_backend():
    assert _imported_packages(CODEGEN / "common") & set(BACKENDS) == set()


def test_backends_registered_once():
    assert TARGET_BACKENDS == NAMES == (*PACKAGES, PORTABLE)
    for name in PACKAGES:
        target = backend(name)
        assert target.name == name
        assert [a.kind for a in target.artefacts][-1] == "binaries"
        assert {a.kind for a in target.artefacts} <= {"intermediates", "binaries"}
        assert target.resolve_target(CompileOptions(target_backends=[name])) is not None
    assert [name for name in PACKAGES if backend(name).implicit_gemm] == ["cuda"]
