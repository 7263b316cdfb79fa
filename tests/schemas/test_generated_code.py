"""The vendored FlatBuffer code must be what flatc makes from schemas/*.fbs today."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("flatc") is None, reason="flatc not installed (flatbuffers-compiler)")
def test_vendored_schema_code_is_fresh():
    result = subprocess.run([sys.executable, str(ROOT / "schemas/generate.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
