"""Files the compiler writes are replaced whole (pyree/compiler/output_file.py): a reader of the
old file keeps reading it, an error or Ctrl-C leaves the old file and no stray file, and the
new file keeps the old one's permissions."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from pyree.compiler import CompileError, compile_str

ADD = Path(__file__).parent.parent / "data" / "add.mlir"
PARAMETER_MLIR = """util.global private @w = dense<[1.5, -2.0, 3.25, 0.5]> : tensor<4xf32>
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = util.global.load @w : tensor<4xf32>
  %y = arith.addf %x, %w : tensor<4xf32>
  return %y : tensor<4xf32>
}"""


def _compile(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile",
                           "--no-pyree-progress", *args], capture_output=True, text=True,
                          timeout=300)


def test_compile_replaces_the_output_under_its_reader(tmp_path):
    out = tmp_path / "m.vmfb"
    old = os.urandom(100_000)
    out.write_bytes(old)
    out.chmod(0o640)
    with open(out, "rb") as reader:  # e.g. a server that mapped the last build
        proc = _compile(str(ADD), "-o", str(out))
        assert proc.returncode == 0, proc.stderr
        assert reader.read() == old
        assert os.fstat(reader.fileno()).st_ino != out.stat().st_ino
    assert out.read_bytes() == compile_str(ADD.read_text(), source_name=str(ADD))
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.vmfb"]


def test_an_unwritable_output_is_one_error_line_and_no_file(tmp_path):
    out = tmp_path / "missing" / "m.vmfb"
    proc = _compile(str(ADD), "-o", str(out))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"pyree-compile: error: {out}: cannot create a file in {out.parent}: "
        f"No such file or directory"]
    assert not out.parent.exists()


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, OSError(28, "No space left on device")])
def test_a_write_stopped_half_way_leaves_the_old_files(tmp_path, monkeypatch, interrupt):
    """Ctrl-C (or a full disk) while the module and its parameter file are written: both old
    files stay as they were and nothing else is left in the folder."""
    out, params = tmp_path / "m.vmfb", tmp_path / "w.irpa"
    out.write_bytes(b"old module")
    params.write_bytes(b"old parameters")

    def fsync(fd):
        raise interrupt

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(KeyboardInterrupt if interrupt is KeyboardInterrupt else CompileError):
        compile_str(PARAMETER_MLIR, output_file=out,
                    extra_args=[f"--iree-opt-export-parameters={params}",
                                "--iree-opt-minimum-parameter-export-size=0"])
    assert out.read_bytes() == b"old module" and params.read_bytes() == b"old parameters"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.vmfb", "w.irpa"]


def test_a_symlink_is_written_through_and_a_device_written_directly(tmp_path):
    target = tmp_path / "builds" / "m.vmfb"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "latest.vmfb"
    link.symlink_to(target)
    compile_str(ADD.read_text(), output_file=link)
    assert link.is_symlink() and target.read_bytes()[4:8] == b"PYRE"
    assert sorted(p.name for p in target.parent.iterdir()) == ["m.vmfb"]
    proc = _compile(str(ADD), "-o", os.devnull)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
