"""Running a tool as a user does (a subprocess) and judging its failure output."""

import os
import subprocess
import sys
from pathlib import Path


def run_tool(tool: str, *args: str, python_path: Path | None = None,
             env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()
             ) -> subprocess.CompletedProcess:
    """Runs ``python3 -m pyree.runtime.tools.<tool> args...``, capturing text output;
    ``python_path`` goes first on the tool's import path (e.g. for a fake driver entry point),
    ``env`` adds environment variables, ``prefix`` runs it under another command (taskset)."""
    env = {**os.environ, **(env or {})}
    if python_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(python_path), env.get("PYTHONPATH")]))
    return subprocess.run(
        [*prefix, sys.executable, "-m", f"pyree.runtime.tools.{tool}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def install_broken_driver(folder: Path) -> Path:
    """A distribution whose "pyree.runtime.drivers" entry point 'broken' cannot be imported, so the
    runtime lists that driver as unavailable; returns the folder to put on the import path."""
    info = folder / "pyree_broken_driver-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: pyree-broken-driver\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(
        "[pyree.runtime.drivers]\nbroken = pyree_no_such_module:driver\n"
    )
    return folder


def assert_clean_error(proc: subprocess.CompletedProcess, code: int, fragment: str) -> None:
    """A readable failure: the exit code and one ``error:`` paragraph naming the problem."""
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert fragment in lines[0], lines[0]
