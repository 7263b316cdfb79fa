"""--pyree-print-ir-after=NAME and --pyree-print-ir-after-all: the IR after each named flow pass
(flow/passes.py), through pyree-compile and through the Python API; an unknown name is a clear
error that lists the names. The modules built here are run against numpy."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, CompileOptions, compile_str
from pyree.compiler.flow.passes import PASS_NAMES, flow_passes

# matmul + bias + relu at odd sizes: three ops before fusion, one kernel after.
MLP = """
func.func @main(%x: tensor<5x7xf32>, %w: tensor<7x3xf32>, %b: tensor<5x3xf32>) -> tensor<5x3xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<5x3xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<5x3xf32>) -> tensor<5x3xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<5x7xf32>, tensor<7x3xf32>)
      outs(%acc : tensor<5x3xf32>) -> tensor<5x3xf32>
  %sum = arith.addf %mm, %b : tensor<5x3xf32>
  %relu = arith.maximumf %sum, %acc : tensor<5x3xf32>
  return %relu : tensor<5x3xf32>
}
"""

BRANCH = """
func.func @main(%p: tensor<i1>, %x: tensor<6xf32>) -> tensor<6xf32> {
  %c = tensor.extract %p[] : tensor<i1>
  %r = scf.if %c -> (tensor<6xf32>) {
    %n = arith.negf %x : tensor<6xf32>
    %e = math.exp %n : tensor<6xf32>
    scf.yield %e : tensor<6xf32>
  } else {
    %a = arith.addf %x, %x : tensor<6xf32>
    scf.yield %a : tensor<6xf32>
  }
  return %r : tensor<6xf32>
}
"""

HEADER = re.compile(r"^// -----// IR after (.+) //----- //$", re.M)


def headers(text: str) -> list[str]:
    return HEADER.findall(text)


def sections(text: str) -> dict[str, list[str]]:
    """Each printed IR under its header's name, in order."""
    out: dict[str, list[str]] = {}
    parts = HEADER.split(text)
    for name, body in zip(parts[1::2], parts[2::2]):
        out.setdefault(name, []).append(body)
    return out


def _compile_cli(tmp_path, *flags):
    source = tmp_path / "mlp.mlir"
    source.write_text(MLP)
    return subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile", str(source),
                           "-o", str(tmp_path / "mlp.vmfb"), "--no-pyree-progress", *flags],
                          capture_output=True, text=True, timeout=120, check=False)


def _check_mlp(vmfb) -> None:
    rng = np.random.default_rng()
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((5, 7), (7, 3), (5, 3)))
    want = np.maximum(x.astype(np.float64) @ w + b, 0.0)
    got = rt.load_module(vmfb, device="local-task")["main"](x, w, b).to_host()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_cli_prints_after_the_named_pass_each_time_it_runs(tmp_path):
    result = _compile_cli(tmp_path, "--pyree-print-ir-after=fuse-regions")
    assert result.returncode == 0, result.stderr
    assert headers(result.stderr) == ["fuse-regions", "fuse-regions"]  # before and after split-K
    first = sections(result.stderr)["fuse-regions"][0]
    assert first.count(" = generic ") == 1 and "func @main(" in first
    _check_mlp((tmp_path / "mlp.vmfb").read_bytes())


def test_cli_takes_comma_lists_and_repeats_and_prints_in_pipeline_order(tmp_path):
    result = _compile_cli(tmp_path, "--pyree-print-ir-after=collapse-loops,fold-views",
                          "--mlir-print-ir-after=split-reductions")
    assert result.returncode == 0, result.stderr
    assert headers(result.stderr) == ["fold-views", "collapse-loops", "split-reductions",
                                      "fold-views", "collapse-loops"]
    # before fusion: the matmul, the add and the max are three generics
    assert sections(result.stderr)["fold-views"][0].count(" = generic ") == 3


def test_cli_unknown_pass_name_is_a_clear_error(tmp_path):
    result = _compile_cli(tmp_path, "--pyree-print-ir-after=fuse-regions,fuse")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: unknown pass name in --pyree-print-ir-after: fuse; "
                                    "the flow passes, in order: " + ", ".join(PASS_NAMES))
    assert not (tmp_path / "mlp.vmfb").exists()


def test_cli_print_ir_after_all_prints_every_pass_between_the_stages(tmp_path):
    result = _compile_cli(tmp_path, "--pyree-print-ir-after-all")
    assert result.returncode == 0, result.stderr
    passes = [p.name for p in flow_passes(gpu=False, implicit_gemm=False)]
    assert headers(result.stderr) == ["tensor program", *passes, "dispatch regions", "kernels"]
    _check_mlp((tmp_path / "mlp.vmfb").read_bytes())


def test_api_takes_the_flag_in_extra_args_and_the_options_field(capsys):
    _check_mlp(compile_str(MLP, extra_args=["--pyree-print-ir-after=split-reductions"]))
    assert headers(capsys.readouterr().err) == ["split-reductions"]
    _check_mlp(compile_str(MLP, CompileOptions(print_ir_after=["widen-narrow-floats"])))
    assert headers(capsys.readouterr().err) == ["widen-narrow-floats"]
    compile_str(MLP, CompileOptions(print_ir_after="fold-channel-affine,rewrite-convolutions"))
    assert headers(capsys.readouterr().err) == ["fold-channel-affine", "rewrite-convolutions"]
    compile_str(MLP)
    assert headers(capsys.readouterr().err) == []


def test_api_unknown_pass_names_are_a_compile_error():
    with pytest.raises(CompileError, match="unknown pass names in --pyree-print-ir-after: "
                       "bogus, fuse; the flow passes, in order: scatter-argument-windows, "
                       "settle-empty-loops, split-arg-folds, fold-channel-affine, "):
        compile_str(MLP, CompileOptions(print_ir_after=["fuse", "bogus"]))


def test_a_control_flow_block_prints_as_a_function_of_its_own(capsys):
    """Blocks go through the passes before the function around them, as MLIR's function pass
    manager runs its nested pipeline per function."""
    vmfb = compile_str(BRANCH, extra_args=["--pyree-print-ir-after=fuse-regions"])
    first = sections(capsys.readouterr().err)["fuse-regions"]
    assert [re.match(r"\s*func @(\w+)", s).group(1) for s in first] == [
        "main_then", "main_then", "main_otherwise", "main_otherwise", "main", "main"]
    assert first[0].count(" = generic ") == 1  # exp(-x): one kernel
    x = np.random.default_rng().standard_normal(6).astype(np.float32)
    module = rt.load_module(vmfb, device="local-task")
    np.testing.assert_allclose(module["main"](np.array(True), x).to_host(), np.exp(-x),
                               rtol=1e-6)
    np.testing.assert_array_equal(module["main"](np.array(False), x).to_host(), x + x)


def test_implicit_gemm_targets_add_the_inline_patches_pass(capsys):
    compile_str(MLP, target_backends=["cuda"], extra_args=["--pyree-print-ir-after-all",
                                                           "--compile-to=flow"])
    names = headers(capsys.readouterr().err)
    assert names[-5:] == ["inline-patches", "fuse-attention", "split-unfused-products", "read-slabs",
                         "dispatch regions"]
    compile_str(MLP, target_backends=["vulkan-spirv"], extra_args=["--pyree-print-ir-after-all",
                                                                   "--compile-to=flow"])
    assert "inline-patches" not in headers(capsys.readouterr().err)
