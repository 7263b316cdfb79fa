"""What a test needs from the host: an external tool (gcc, flatc, spirv-val, ptxas) or an optional
Python package (an importer, a driver's bindings).

On a developer's machine a missing one skips the test. In CI (``CI=true``) it fails it instead:
there a missing tool means the image is broken, and a skip would report untested code as passing.
Tests that need a GPU are not routed here: the ``cuda`` and ``vulkan`` device tests skip on hosts
without the hardware, in CI too.
"""

from __future__ import annotations

import importlib
import os
import shutil
from types import ModuleType
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def missing(reason: str) -> NoReturn:
    """Skips the calling test, or fails it under CI."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: a missing tool fails the test instead of skipping it)",
                    pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def require_tool(name: str, env: str = "") -> str:
    """The path of executable ``name`` (``$env`` overrides it when set), else skip/fail."""
    path = (os.environ.get(env) if env else None) or shutil.which(name)
    if not path:
        missing(f"{name} is not installed" + (f" (nor ${env} set)" if env else ""))
    return path


def require_module(name: str) -> ModuleType:
    """``pytest.importorskip`` that fails under CI."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        missing(f"the Python module {name} is not installed ({e})")


def require_lld() -> list[str]:
    """The argv that runs ld.lld, with which the rocm target links its code objects."""
    from pyree.compiler.codegen.rocm.hsaco import lld_command
    from pyree.compiler.errors import CompileError

    try:
        return lld_command()
    except CompileError as e:
        missing(str(e))
