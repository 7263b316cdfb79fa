"""pyree.compiler: MLIR in, a self-contained .vmfb module out.

    from pyree.compiler import compile_str, compile_file, CompileOptions
    vmfb = compile_str(mlir_text, target_backends=["llvm-cpu"])          # as iree.compiler's
    vmfb = compile_str(mlir_text, CompileOptions(target_backends=["llvm-cpu"]))
    vmfb = compile_str(mlir_text, **CompilerOptions(target_backends=["vmvx"]).__dict__)  # IREE's
    compile_file("m.mlir", target_backends=["cuda"], input_type="stablehlo",
                 extra_args=["--iree-cuda-target=sm_90"], output_file="m.vmfb")   # -> None

``extra_args`` are pyree-compile's flags (docs/FLAGS.md), parsed by the same table.

Models from other frameworks come in through torch-mlir (optional extras):

    mlir_text = import_onnx("model.onnx")                    # pyree-base-compiler[onnx]
    mlir_text = import_torch(nn_module, example_input)       # pyree-base-compiler[torch]
    vmfb = compile_torch(nn_module, example_input, target_backends=["llvm-cpu"])

The pipeline (xDSL, llvmlite) and the importers (torch-mlir, onnx, torch) are imported on first
use, so that importing a single stage such as ``pyree.compiler.kernel`` stays light and the core
compiler never loads torch or onnx.
"""

__version__ = "0.1.0"

from pyree.compiler.errors import CompileError
from pyree.compiler.options import TARGET_BACKENDS, CompileOptions, InputType

# IREE's names for the same things (iree.compiler re-exports iree.compiler.tools).
CompilerToolError = CompileError


def query_available_targets() -> list[str]:
    """The target backends this compiler builds for (IREE's ``query_available_targets``)."""
    return list(TARGET_BACKENDS)


__all__ = ["CompileError", "CompileOptions", "CompilerOptions", "CompilerToolError",
           "DEFAULT_TESTING_BACKENDS", "DEFAULT_TESTING_DRIVER", "InputType", "OutputFormat",
           "TARGET_BACKENDS", "compile_file", "compile_str", "compile_torch", "import_onnx",
           "import_torch", "query_available_targets", "tools"]

_LAZY = {"compile_file": "pipeline", "compile_str": "pipeline", "import_onnx": "importers.onnx",
         "import_torch": "importers.torch", "compile_torch": "pipeline",
         **dict.fromkeys(("CompilerOptions", "DEFAULT_TESTING_BACKENDS", "DEFAULT_TESTING_DRIVER",
                          "OutputFormat"), "compiler_options")}


def __getattr__(name: str):
    """The lazy names, and the ``tools`` subpackage: IREE's quickstart calls
    ``ireec.tools.compile_str`` after ``import iree.compiler as ireec`` alone."""
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(f"pyree.compiler.{_LAZY[name]}"), name)
    if name == "tools":
        return importlib.import_module("pyree.compiler.tools")
    raise AttributeError(f"module 'pyree.compiler' has no attribute {name!r}")
