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

from pyree.compiler import tools
from pyree.compiler.errors import CompileError
from pyree.compiler.options import TARGET_BACKENDS, CompileOptions, InputType
from pyree.compiler.tools import CompilerToolError, query_available_targets
from pyree.compiler.version import __version__

__all__ = ["CompileError", "CompileOptions", "CompilerOptions", "CompilerToolError",
           "DEFAULT_TESTING_BACKENDS", "DEFAULT_TESTING_DRIVER", "InputType", "OutputFormat",
           "TARGET_BACKENDS", "compile_file", "compile_str", "compile_torch", "import_onnx",
           "import_torch", "query_available_targets", "tools", "__version__"]

_LAZY = {"import_onnx": "importers.onnx", "import_torch": "importers.torch",
         "compile_torch": "pipeline"}


def __getattr__(name: str):
    """The names loaded on first use: the importers here, IREE's tools names from ``tools``."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"pyree.compiler.{_LAZY[name]}"), name)
    if name in tools.__all__:
        return getattr(tools, name)
    raise AttributeError(f"module 'pyree.compiler' has no attribute {name!r}")
