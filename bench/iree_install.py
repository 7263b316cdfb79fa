"""Where a benchmark finds the IREE it compares against, on any machine: the script's flag, else
the environment (``IREE_COMPILE``, ``IREE_PYTHON``), else what is on PATH or importable here.
Missing, the script stops with one line saying how to get it, never a path of one machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

INSTALL = ("pip install iree-base-compiler iree-base-runtime (into this Python, or into a venv "
           "named with {how})")


def _missing(what: str, how: str) -> SystemExit:
    return SystemExit(f"{Path(sys.argv[0]).name}: {what} not found; "
                      + INSTALL.format(how=how))


def iree_compile(given: str = "") -> str:
    """The iree-compile executable."""
    found = given or os.environ.get("IREE_COMPILE") or shutil.which("iree-compile") \
        or _beside(iree_python(quiet=True), "iree-compile")
    if not found:
        raise _missing("iree-compile", "$IREE_COMPILE or --iree-compile")
    return found


def iree_python(given: str = "", quiet: bool = False) -> str:
    """A Python that imports ``iree.runtime``: ``given``, $IREE_PYTHON, or this one."""
    for candidate in (given, os.environ.get("IREE_PYTHON", ""), sys.executable):
        if candidate and subprocess.run([candidate, "-c", "import iree.runtime"],
                                        capture_output=True).returncode == 0:
            return candidate
    if quiet:
        return ""
    raise _missing("a Python with iree.runtime", "$IREE_PYTHON or --iree-python")


def _beside(python: str, tool: str) -> str:
    """``tool`` in the bin folder of ``python``'s virtual environment, if it is there."""
    path = Path(python).parent / tool if python else None
    return str(path) if path is not None and path.exists() else ""
