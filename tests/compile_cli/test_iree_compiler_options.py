"""IREE's ``iree.compiler.tools`` names under pyree.compiler.tools: CompilerOptions (IREE's
fields and defaults, passed as ``**options.__dict__``), OutputFormat, the testing constants, a
star import; IREE keywords pyree cannot honour are refused by name, unknown ones are TypeErrors.
Every module built here runs against numpy."""

import numpy as np
import pyree.compiler.tools as tools
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, InputType

rng = np.random.default_rng()
MUL = """func.func @mul(%a: tensor<7xf32>, %b: tensor<7xf32>) -> tensor<7xf32> {
  %0 = arith.mulf %a, %b : tensor<7xf32>
  return %0 : tensor<7xf32>
}"""


def _check_mul(vmfb: bytes) -> None:
    a, b = rng.standard_normal(7).astype(np.float32), rng.standard_normal(7).astype(np.float32)
    a[:3] = [np.nan, -0.0, np.inf]
    got = rt.load_module(vmfb, device="local-sync")["mul"](a, b).to_host()
    np.testing.assert_array_equal(got, (a.astype(np.float64) * b).astype(np.float32))


def test_compiler_options_dict_is_what_compile_str_takes(tmp_path):
    options = tools.CompilerOptions(target_backends=["llvm-cpu"], input_type="NONE",
                                    optimize=False, strip_debug_ops=True,
                                    output_mlir_debuginfo=False)
    assert options.input_type is InputType.NONE
    assert options.output_format is tools.OutputFormat.FLATBUFFER_BINARY
    _check_mul(tools.compile_str(MUL, **options.__dict__))
    options.output_file = str(tmp_path / "mul.vmfb")
    assert tools.compile_file(_write(tmp_path, MUL), **options.__dict__) is None
    _check_mul((tmp_path / "mul.vmfb").read_bytes())


def test_defaults_are_irees():
    options = tools.CompilerOptions()
    assert options.target_backends == () and options.input_type is InputType.AUTO
    assert (options.optimize, options.enable_benchmark, options.output_file) == (True, False, None)
    assert tools.DEFAULT_TESTING_BACKENDS == ["llvm-cpu"]
    assert tools.DEFAULT_TESTING_DRIVER == "local-task"
    with pytest.raises(CompileError, match="no target backend given"):
        tools.compile_str(MUL, **options.__dict__)   # IREE refuses an empty list too


def test_names_parse_as_irees_do():
    assert tools.OutputFormat.parse("flatbuffer-binary") is tools.OutputFormat.FLATBUFFER_BINARY
    assert tools.OutputFormat.parse("MLIR_TEXT") is tools.OutputFormat.MLIR_TEXT
    assert str(tools.OutputFormat.FLATBUFFER_TEXT) == "flatbuffer-text"
    assert tools.CompilerOptions(input_type="stablehlo-xla").input_type is InputType.STABLEHLO_XLA
    with pytest.raises(ValueError, match="expected one of: FLATBUFFER_BINARY"):
        tools.CompilerOptions(output_format="elf")
    with pytest.raises(ValueError, match="For input_type= argument"):
        tools.CompilerOptions(input_type="caffe")


@pytest.mark.parametrize("keywords, message", [
    ({"output_format": "mlir-text"}, "output_format=mlir-text is not supported"),
    ({"output_format": tools.OutputFormat.FLATBUFFER_TEXT},
     "output_format=flatbuffer-text is not supported: .*pyree-dump-module "
     "--output=flatbuffer-json"),
    ({"enable_tflite_bindings": True}, "enable_tflite_bindings=True is not supported"),
    ({"enable_benchmark": True}, "enable_benchmark=True is not supported"),
])
def test_what_pyree_cannot_make_is_refused_by_name(keywords, message):
    with pytest.raises(tools.CompilerToolError, match=message):
        tools.compile_str(MUL, target_backends=["llvm-cpu"], **keywords)


def test_a_misspelt_keyword_is_a_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'target_backend'"):
        tools.compile_str(MUL, target_backend=["llvm-cpu"])


def test_star_import_and_top_level_names():
    names: dict = {}
    exec("from pyree.compiler.tools import *", names)
    assert {"CompilerOptions", "OutputFormat", "compile_str", "compile_file", "InputType",
            "CompilerToolError", "query_available_targets"} <= set(names)
    import pyree.compiler as ireec  # iree.compiler re-exports iree.compiler.tools' names

    assert ireec.CompilerOptions is tools.CompilerOptions and ireec.tools is tools


def _write(tmp_path, text: str) -> str:
    path = tmp_path / "m.mlir"
    path.write_text(text)
    return str(path)
