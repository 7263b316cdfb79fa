"""pyree-compile: flags (pyree and IREE spellings) -> CompileOptions, exit codes, messages."""

import subprocess
import sys
from pathlib import Path

import pytest
from pyree.compiler import pipeline
from pyree.compiler.errors import CompileError
from pyree.compiler.options import TARGET_BACKENDS
from pyree.compiler.tools.compile import main

ADD = Path(__file__).parent.parent / "data" / "add.mlir"


@pytest.fixture
def calls(monkeypatch):
    """Replaces the pipeline: records (source, options) and returns fake module bytes."""
    seen = []

    def compile_file(path, options):
        seen.append((str(path), options))
        return b"MODULE"

    def compile_str(text, options, source_name="<string>"):
        seen.append((source_name, options, text))
        return b"MODULE"

    monkeypatch.setattr(pipeline, "compile_file", compile_file)
    monkeypatch.setattr(pipeline, "compile_str", compile_str)
    return seen


@pytest.mark.parametrize("flags, backends", [
    ([], ["llvm-cpu"]),
    (["--pyree-hal-target-backends=cuda"], ["cuda"]),
    (["--iree-hal-target-backends=llvm-cpu,vulkan-spirv"], ["llvm-cpu", "vulkan-spirv"]),
    (["--pyree-hal-target-backends", "rocm", "--iree-hal-target-backends=cuda"], ["rocm", "cuda"]),
    (["--iree-hal-target-device=hip"], ["rocm"]),
    (["--iree-hal-target-device=vulkan", "--iree-hal-target-device=local"],
     ["vulkan-spirv", "llvm-cpu"]),
    (["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu"], ["llvm-cpu"]),
])
def test_backend_flags(flags, backends, calls, tmp_path):
    out = tmp_path / "m.vmfb"
    assert main([str(ADD), "-o", str(out), *flags]) == 0
    (path, options), = calls
    assert path == str(ADD) and options.target_backends == backends
    assert out.read_bytes() == b"MODULE"


@pytest.mark.parametrize("flag, field, value", [
    ("--pyree-llvmcpu-target-cpu=znver4", "llvmcpu_target_cpu", "znver4"),
    ("--iree-llvmcpu-target-cpu=generic", "llvmcpu_target_cpu", "generic"),
    ("--pyree-llvmcpu-variants=generic,x86-64-v3", "llvmcpu_variants", ["generic", "x86-64-v3"]),
    ("--pyree-llvmcpu-variants=none", "llvmcpu_variants", []),
    ("--pyree-cuda-target=sm_90", "cuda_target", "sm_90"),
    ("--iree-cuda-target=ampere", "cuda_target", "ampere"),
    ("--pyree-vulkan-target=rdna3-7900-windows", "vulkan_target", "rdna3-7900-windows"),
    ("--iree-vulkan-target=valhall-mali", "vulkan_target", "valhall-mali"),
    ("--pyree-print-ir-after-all", "print_ir_after_all", True),
    ("--pyree-print-ir-after=fold-views,fuse-regions", "print_ir_after", ["fold-views,fuse-regions"]),
    ("--mlir-print-ir-after=collapse-loops", "print_ir_after", ["collapse-loops"]),
    ("--iree-input-type=stablehlo", "input_type", "stablehlo"),
    ("--pyree-input-type=tosa", "input_type", "tosa"),
    ("--iree-input-demote-f64-to-f32", "demote_f64_to_f32", True),
    ("--pyree-input-demote-f64-to-f32=false", "demote_f64_to_f32", False),
    ("--iree-input-demote-i64-to-i32=false", "demote_i64_to_i32", False),
    ("--pyree-input-demote-i64-to-i32", "demote_i64_to_i32", True),
    ("--iree-input-promote-bf16-to-f32=1", "promote_bf16_to_f32", True),
])
def test_target_flags(flag, field, value, calls, tmp_path):
    assert main([str(ADD), f"--output-file={tmp_path / 'm.vmfb'}", flag]) == 0
    assert getattr(calls[0][1], field) == value


def test_defaults(calls, tmp_path):
    main([str(ADD), "-o", str(tmp_path / "m.vmfb")])
    options = calls[0][1]
    # no one CPU chosen: the default variants (generic x86-64 among them), so that a module
    # built anywhere loads on any x86-64 deploy host and runs the best code it can.
    assert (options.llvmcpu_target_cpu, options.llvmcpu_variants, options.cuda_target,
            options.print_ir_after_all) == ("", None, "sm_80", False)
    # i64 demotion follows the input type (on for StableHLO), f64's the targets (None: where a
    # target lacks f64, pipeline.py), bf16 promotion off.
    assert (options.input_type, options.demote_f64_to_f32, options.demote_i64_to_i32,
            options.promote_bf16_to_f32) == ("auto", None, None, False)


def test_a_demotion_flag_takes_only_a_boolean(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([str(ADD), "-o", str(tmp_path / "m.vmfb"), "--iree-input-demote-f64-to-f32=maybe"])
    assert exit_info.value.code == 2
    assert "expected true or false, got 'maybe'" in capsys.readouterr().err


def test_stdin_in_stdout_out(calls, monkeypatch, capsysbinary):
    monkeypatch.setattr(sys, "stdin", type("In", (), {"read": lambda self: "MLIR TEXT"})())
    assert main(["-"]) == 0
    assert calls[0][0] == "<stdin>" and calls[0][2] == "MLIR TEXT"
    assert capsysbinary.readouterr().out == b"MODULE"


@pytest.mark.parametrize("flag, wanted", [
    ("--pyree-hal-target-backends=metal", "unknown target backend 'metal'; available backends: "
     + ", ".join(TARGET_BACKENDS)),
    ("--iree-hal-target-device=tpu", "unknown target device 'tpu'"),
    ("--no-such-flag", "unrecognized arguments: --no-such-flag"),
])
def test_usage_errors_exit_2(flag, wanted, calls, capsys):
    with pytest.raises(SystemExit) as info:
        main([str(ADD), flag])
    err = capsys.readouterr().err
    assert info.value.code == 2 and wanted in err and not calls
    assert err.count("\n") == 1 and err.startswith("pyree-compile: error: ")  # no usage page


def test_compile_error_is_one_message_exit_1(monkeypatch, capsys):
    def fail(path, options):
        raise CompileError("unsupported op 'scf.for'", "model.mlir:5:3")

    monkeypatch.setattr(pipeline, "compile_file", fail)
    assert main([str(ADD), "-o", "unused.vmfb"]) == 1
    err = capsys.readouterr().err
    assert err == "model.mlir:5:3: error: unsupported op 'scf.for'\n"


def test_internal_error_is_reported_without_traceback(monkeypatch, capsys):
    def crash(path, options):
        raise KeyError("boom")

    monkeypatch.setattr(pipeline, "compile_file", crash)
    assert main([str(ADD)]) == 1
    err = capsys.readouterr().err
    assert "internal compiler error: KeyError" in err and "Traceback" not in err


def test_unwritable_output(calls, tmp_path, capsys):
    assert main([str(ADD), "-o", str(tmp_path / "missing-dir" / "m.vmfb")]) == 1
    assert "missing-dir" in capsys.readouterr().err


def test_help_and_version(capsys):
    for flag in ("--help", "--version"):
        with pytest.raises(SystemExit) as info:
            main([flag])
        assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--pyree-hal-target-backends" in out and "pyree-compile 0." in out


# ---- through the real pipeline -----------------------------------------------------------------

def _pyree_compile(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile", *args],
                          input=stdin, capture_output=True, text=True, timeout=120, check=False)


def test_real_compile_writes_a_module(tmp_path, capsys):
    out = tmp_path / "add.vmfb"
    assert main([str(ADD), "-o", str(out), "--iree-hal-target-backends=llvm-cpu",
                 "--pyree-print-ir-after-all"]) == 0
    data = out.read_bytes()
    assert data[4:8] == b"PYRE" and data[-48:-40] == b"PYRETRL1"
    assert "func @add(%lhs: tensor<4xf32>, %rhs: tensor<4xf32>)" in capsys.readouterr().err


def test_real_bad_input_from_stdin_exits_1_without_traceback():
    text = ("func.func @f(%a: tensor<?xf32>, %p: tensor<f32>) -> tensor<?xf32> {\n"
            "  %r = stablehlo.pad %a, %p, low = [1], high = [0], interior = [0] : "
            "(tensor<?xf32>, tensor<f32>) -> tensor<?xf32>\n  return %r : tensor<?xf32>\n}\n")
    result = _pyree_compile("-", "-o", "-", "--no-pyree-progress", stdin=text)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(
        "<stdin>:2:3: error: 'stablehlo.pad' with dynamic dimensions is not supported yet")
    assert "Traceback" not in result.stderr
