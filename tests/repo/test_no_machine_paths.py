"""No script, test or package depends on one machine's folders: a benchmark that defaulted to a
developer's IREE venv (/work/iree-venv) crashed everywhere else (issue 27). Tools are found from
flags, the environment or PATH (bench/iree_install.py)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# a home or workspace folder of a particular machine, as a literal absolute path
MACHINE_PATH = re.compile(r"""["' =](/work/|/home/\w|/root/|/Users/\w)""")


def test_no_source_names_a_machine_folder():
    tracked = subprocess.run(["git", "ls-files", "*.py", "*.sh", "*.toml", ".ci/*"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    offenders = [f"{name}:{n}: {line.strip()}" for name in tracked
                 for n, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), 1)
                 if MACHINE_PATH.search(line) and name != "tests/repo/test_no_machine_paths.py"]
    assert offenders == []
