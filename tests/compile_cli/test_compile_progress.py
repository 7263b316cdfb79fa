"""Progress lines: pyree-compile prints them once a compile has run PROGRESS_AFTER seconds (or
from the start with --pyree-progress, never with --no-pyree-progress), short compiles stay
silent; the Python API prints them when asked (progress=True, extra_args=["--pyree-progress"]) or
hands them to a callable. Within code generation, every backend reports each tenth of its
kernels done."""

import re
from pathlib import Path

import pytest
from generated import matmul_chain
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.progress import kernel_progress
from pyree.compiler.tools import compile as compile_tool
from tooling import require_lld

ADD = Path(__file__).parent.parent / "data" / "add.mlir"
STAGES = ["parsing", "lowering to the tensor program", "forming dispatch regions",
          "1 dispatch regions, 1 distinct kernels", "codegen for llvm-cpu: 1 kernels",
          "codegen for llvm-cpu: 1/1 kernels", "writing the module", "wrote"]


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


def test_codegen_reports_each_tenth_of_the_kernels(tmp_path, capsys):
    source = tmp_path / "chain.mlir"
    source.write_text(matmul_chain(24))
    assert compile_tool.main([str(source), "-o", str(tmp_path / "m.vmfb"), "--pyree-progress"]) == 0
    done = [int(m.group(1)) for m in map(re.compile(r"codegen for llvm-cpu: (\d+)/24 kernels$").match,
                                         stage_lines(capsys.readouterr().err)) if m]
    assert done[-1] == 24 and len(done) >= 5
    tenths = [k * 10 // 24 for k in done]
    assert tenths == sorted(set(tenths))  # one line per tenth crossed, in order


def test_a_line_for_each_tenth_crossed():
    lines = []
    advance = kernel_progress(lines.append, "cuda", 37)
    for _ in range(37):
        advance(1)
    assert lines == [f"codegen for cuda: {k}/37 kernels" for k in (4, 8, 12, 15, 19, 23, 26, 30,
                                                                    34, 37)]
    lines.clear()
    advance = kernel_progress(lines.append, "rocm", 3, "kernels as LLVM IR")
    advance(2)
    advance(1)
    assert lines == ["codegen for rocm: 2/3 kernels as LLVM IR", "codegen for rocm: 3/3 kernels as LLVM IR"]
    kernel_progress(None, "llvm-cpu", 5)(5)  # nobody listening: nothing to do


@pytest.mark.parametrize("ask", [{"extra_args": ["--pyree-progress"]},
                                 {"extra_args": ["--mlir-timing"]},
                                 {"options": CompileOptions(progress=True)}])
def test_the_api_prints_the_lines_when_asked(ask, capsys):
    assert compile_str(ADD.read_text(), ask.get("options"), extra_args=ask.get("extra_args", ()))
    err = capsys.readouterr().err
    lines = [line.split("] ", 1)[1] for line in err.splitlines()]
    assert err.startswith("pyree.compiler: [") and lines[0] == "parsing <string> (0.2 kB)"
    assert "codegen for llvm-cpu: 1/1 kernels" in lines


@pytest.mark.parametrize("ask", [{}, {"extra_args": ["--no-pyree-progress"]},
                                 {"options": CompileOptions(progress=False)}])
def test_the_api_is_silent_unless_asked(ask, capsys):
    assert compile_str(ADD.read_text(), ask.get("options"), extra_args=ask.get("extra_args", ()))
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("backend, last", [
    ("llvm-cpu", "codegen for llvm-cpu: 1/1 kernels"),
    ("cuda", "codegen for cuda: 1/1 kernels"),
    ("vulkan-spirv", "codegen for vulkan-spirv: 1/1 kernels"),
    ("rocm", "codegen for rocm: LLVM compiles them as one gfx908 code object")])
def test_every_backend_reports_its_kernels(backend, last, monkeypatch):
    if backend == "rocm":
        require_lld()
    monkeypatch.setenv("PYREE_PTXAS", "")  # the cubin's own line is not this test's
    lines = []
    compile_str(ADD.read_text(), CompileOptions(target_backends=[backend], progress=lines.append))
    codegen = lines[lines.index(f"codegen for {backend}: 1 kernels") + 1:-1]
    assert codegen[-1] == last and lines[-1] == "writing the module"
    assert codegen[0] == ("codegen for rocm: 1/1 kernels as LLVM IR" if backend == "rocm" else last)


def test_each_line_is_one_write(monkeypatch):
    """A progress line and its newline go out in one write, as the interrupt line does, so that
    a line another thread prints never runs on from an unfinished one."""
    import sys

    from pyree.compiler.progress import StageLines
    from pyree.compiler.tools import interrupt

    class Recorder:
        def __init__(self):
            self.writes = []

        def write(self, text):
            self.writes.append(text)
            return len(text)

        def flush(self):
            pass

    recorder = Recorder()
    monkeypatch.setattr(sys, "stderr", recorder)
    StageLines(0.0)("codegen for llvm-cpu: 6/48 kernels")
    interrupt._say("pyree-compile")
    assert len(recorder.writes) == 2
    assert recorder.writes[0].endswith("6/48 kernels\n")
    assert recorder.writes[1] == "pyree-compile: interrupted\n"
