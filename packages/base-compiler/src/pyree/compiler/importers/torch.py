"""PyTorch nn.Module -> linalg-on-tensors MLIR text, and the one-call compile.

The shape follows iree-turbine's ``aot.export(module, *args).compile(...)``: trace with
``torch.export`` on example arguments (static shapes from them), import the frozen program with
torch-mlir's FX importer (weights become ``dense_resource`` blobs), lower to linalg-on-tensors,
then compile. ``compile_torch`` is that chain in one call, with CompileOptions fields as
keywords; ``import_torch`` stops at the MLIR text (turbine's ``save_mlir``).

Needs ``pip install pyree-base-compiler[torch]`` (torch-mlir and torch).
"""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.importers import require
from pyree.compiler.options import CompileOptions


def import_torch(module, *example_args, function_name: str = "main") -> str:
    """MLIR text of ``module`` (an ``nn.Module`` or a ``torch.export.ExportedProgram``) called
    on ``example_args``, as one function ``function_name``. Tracing errors are torch.export's
    own exceptions (they point into the model's code); a lowering failure is a CompileError."""
    require("torch", "torch", "importing PyTorch modules")
    require("torch_mlir", "torch", "importing PyTorch modules")
    from torch_mlir import fx
    from torch_mlir.compiler_utils import TorchMlirCompilerError

    try:
        imported = fx.export_and_import(module, *example_args, output_type="linalg-on-tensors",
                                        func_name=function_name)
    except TorchMlirCompilerError as err:
        # Its message is a page (a repro command for torch-mlir developers); keep the diagnostics.
        lines = [line for line in str(err).splitlines()
                 if line.strip() and not line.startswith(("$ torch-mlir-opt", "Add '", "For Torch"))]
        raise CompileError("torch-mlir could not lower the module to linalg-on-tensors: "
                           + "\n".join(lines)) from None
    return str(imported)


def compile_torch(module, *example_args, function_name: str = "main",
                  target_backends: list[str] | tuple[str, ...] = ("llvm-cpu",), **options) -> bytes:
    """``import_torch`` then ``compile_str``: the ``.vmfb`` bytes of ``module``. ``options``
    are CompileOptions fields (``llvmcpu_target_cpu="generic"``, ``cuda_target="sm_90"``...)."""
    from pyree.compiler.pipeline import compile_str

    compile_options = CompileOptions(target_backends=list(target_backends), **options)
    text = import_torch(module, *example_args, function_name=function_name)
    return compile_str(text, compile_options, source_name=f"<torch {type(module).__name__}>")
