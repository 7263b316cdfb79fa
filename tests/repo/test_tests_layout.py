"""The tests mirror the layers (issue 28): every code generator registered in
``pyree.compiler.codegen`` has ``tests/codegen/<package>/`` and every driver (each
``packages/hal-<name>``, and ``local``: the runtime's local-sync and local-task over
``drivers/local/``) has ``tests/drivers/<name>/``, nothing else sits beside them, and each
folder's test files are named ``test_<name>_<topic>.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyree.compiler.codegen import PACKAGES

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = sorted(PACKAGES.values())
DRIVERS = sorted([p.name.removeprefix("hal-") for p in (ROOT / "packages").glob("hal-*")] + ["local"])


def _folders(path: Path) -> set[str]:
    return {p.name for p in path.iterdir() if p.is_dir() and p.name != "__pycache__"}


def test_codegen_tests_are_one_folder_per_registered_backend():
    assert _folders(ROOT / "tests/codegen") == set(BACKENDS)


def test_driver_tests_are_one_folder_per_driver():
    assert (ROOT / "packages/base-runtime/src/pyree/runtime/drivers/local").is_dir()
    assert _folders(ROOT / "tests/drivers") == set(DRIVERS)


@pytest.mark.parametrize("folder", [f"codegen/{b}" for b in BACKENDS] + [f"drivers/{d}" for d in DRIVERS])
def test_test_files_are_named_after_their_folder(folder):
    name = folder.split("/")[1]
    files = [p.name for p in (ROOT / "tests" / folder).glob("test_*.py")]
    assert files and all(f.startswith(f"test_{name}_") for f in files), files
