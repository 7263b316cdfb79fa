"""pyree.compiler.compile_str / compile_file called as IREE's iree.compiler ones are:
target_backends=, input_type= (names or InputType), extra_args= (pyree-compile's flags, one
table), output_file= (returns None); the CompileOptions form still works; every module built
here is run against numpy."""

import enum
from pathlib import Path

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, CompileOptions, InputType, compile_file, compile_str

ADD = Path(__file__).parent.parent / "data" / "add.mlir"
rng = np.random.default_rng()
# A shape no tile divides, with the values that must pass through unchanged.
ODD = """func.func @add(%a: tensor<3x37xf32>, %b: tensor<3x37xf32>) -> tensor<3x37xf32> {
  %0 = arith.addf %a, %b : tensor<3x37xf32>
  return %0 : tensor<3x37xf32>
}"""


def _check_add(vmfb: bytes, shape=(3, 37)) -> None:
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)
    a.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    b.flat[:4] = [0.0, 1.0, -1.0, -0.0]
    got = rt.load_module(vmfb, device="local-sync")["add"](a, b).to_host()
    want = (a.astype(np.float64) + b).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got.flat[3])


def test_iree_keyword_form():
    _check_add(compile_str(ODD, target_backends=["llvm-cpu"], input_type="auto"))
    _check_add(compile_str(ODD.encode(), target_backends=("llvm-cpu",),
                           input_type=InputType.NONE))

    class IreeInputType(enum.Enum):  # iree.compiler's InputType is a plain Enum of names
        NONE = "none"

    _check_add(compile_str(ODD, target_backends=["llvm-cpu"], input_type=IreeInputType.NONE))


def test_iree_tools_namespace():
    """IREE's docs call ``iree.compiler.tools.compile_str``; the same names work under
    pyree.compiler.tools, and a compile error is catchable as IREE's CompilerToolError."""
    import pyree.compiler as pc
    import pyree.compiler.tools as tools

    _check_add(tools.compile_str(ODD, target_backends=["llvm-cpu"]))
    assert tools.compile_file is pc.compile_file and tools.InputType is InputType
    assert "llvm-cpu" in tools.query_available_targets()
    with pytest.raises(tools.CompilerToolError, match="bad.mlir"):
        tools.compile_str("func.func @f(", target_backends=["llvm-cpu"], source_name="bad.mlir")


def test_a_string_names_one_backend_or_a_comma_list():
    assert CompileOptions(target_backends="llvm-cpu").target_backends == ["llvm-cpu"]
    assert CompileOptions(target_backends="llvm-cpu, cuda").target_backends == ["llvm-cpu", "cuda"]
    _check_add(compile_str(ODD, target_backends="llvm-cpu"))


def test_options_form_still_works_and_is_not_modified():
    options = CompileOptions(target_backends=["llvm-cpu"])
    _check_add(compile_str(ODD, options, extra_args=["--iree-llvmcpu-target-cpu=host"]))
    assert options.llvmcpu_target_cpu == ""  # the caller's object is left as it was


def test_compile_file_with_output_file_returns_none(tmp_path):
    out = tmp_path / "add.vmfb"
    assert compile_file(ADD, target_backends=["llvm-cpu"], output_file=out) is None
    _check_add(out.read_bytes(), shape=(4,))
    assert compile_file(str(ADD), output_file=str(out)) is None
    _check_add(out.read_bytes(), shape=(4,))


def test_extra_args_are_the_cli_flags():
    text = compile_str(ODD, extra_args=["--compile-to=executable-sources",
                                        "--iree-opt-level=O3", "--mlir-disable-threading"])
    assert text.decode().startswith("kernel @add_dispatch_0_addf_3x37_f32")
    # backends from target_backends and extra_args add up, as IREE's flags do
    both = compile_str(ODD, target_backends=["llvm-cpu"],
                       extra_args=["--iree-hal-target-backends=vulkan-spirv"])
    plain = compile_str(ODD, target_backends=["llvm-cpu"])
    assert len(both) > len(plain)
    _check_add(both)
    # the flag wins over the keyword for a single value, as the later IREE flag would
    torch_refused = ["--iree-input-type=torch"]
    with pytest.raises(CompileError, match="--iree-input-type=torch is not supported"):
        compile_str(ODD, input_type="auto", extra_args=torch_refused)


@pytest.mark.parametrize("kwargs, message", [
    ({"extra_args": ["--no-such-flag"]}, "unrecognized flags in extra_args: --no-such-flag"),
    ({"extra_args": "--iree-opt-level=O3"}, "extra_args must be a list of flags"),
    ({"extra_args": ["--iree-opt-level=O9"]}, "invalid choice: 'O9'"),
    ({"extra_args": ["--iree-hal-target-backends=metal"]}, "unknown target backend 'metal'"),
    ({"target_backends": ["tpu"]}, "unknown target backend 'tpu'"),
    ({"input_type": InputType.ONNX}, "import ONNX models with pyree-import-onnx"),
    ({"input_type": "mhlo_legacy"}, "unknown input type 'mhlo_legacy'"),
])
def test_bad_arguments_are_compile_errors(kwargs, message):
    with pytest.raises(CompileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        compile_str(ODD, **kwargs)
