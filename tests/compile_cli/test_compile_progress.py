"""pyree-compile's stage lines: printed once a compile has run PROGRESS_AFTER seconds (or from
the start with --pyree-progress, never with --no-pyree-progress); short compiles stay silent."""

from pathlib import Path

import pytest
from pyree.compiler.tools import compile as compile_tool

ADD = Path(__file__).parent.parent / "data" / "add.mlir"
STAGES = ["parsing", "lowering to the tensor program", "forming dispatch regions",
          "1 dispatch regions, 1 distinct kernels", "codegen for llvm-cpu: 1 kernels",
          "writing the module", "wrote"]


def stage_lines(err: str) -> list[str]:
    return [line.split("] ", 1)[1] for line in err.splitlines() if line.startswith("pyree-compile: [")]


def test_progress_flag_prints_every_stage(tmp_path, capsys):
    out = tmp_path / "add.vmfb"
    assert compile_tool.main([str(ADD), "-o", str(out), "--pyree-progress"]) == 0
    lines = stage_lines(capsys.readouterr().err)
    assert [line for line, stage in zip(lines, STAGES) if line.startswith(stage)] == lines
    assert len(lines) == len(STAGES)
    assert lines[0] == f"parsing {ADD} (0.2 kB)" and lines[-1].startswith(f"wrote {out} (")


@pytest.mark.parametrize("flags, printed", [([], True), (["--no-pyree-progress"], False)])
def test_long_compiles_print_unless_told_not_to(flags, printed, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(compile_tool, "PROGRESS_AFTER", 0.0)  # every compile counts as long
    assert compile_tool.main([str(ADD), "-o", str(tmp_path / "m.vmfb"), *flags]) == 0
    assert bool(stage_lines(capsys.readouterr().err)) == printed


def test_short_compiles_are_silent(tmp_path, capsys):
    assert compile_tool.main([str(ADD), "-o", str(tmp_path / "m.vmfb")]) == 0
    assert capsys.readouterr().err == ""
