"""The vendored FlatBuffer code must be what flatc makes from schemas/*.fbs today."""

import subprocess
import sys
from pathlib import Path

from tooling import require_tool

ROOT = Path(__file__).resolve().parents[2]


def test_vendored_schema_code_is_fresh():
    require_tool("flatc")  # Debian: flatbuffers-compiler
    result = subprocess.run([sys.executable, str(ROOT / "schemas/generate.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
