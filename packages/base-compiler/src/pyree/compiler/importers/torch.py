"""PyTorch nn.Module -> linalg-on-tensors MLIR text.

The shape follows iree-turbine's ``aot.export(module, *args).compile(...)``: trace with
``torch.export`` on example arguments (static shapes from them), import the frozen program with
torch-mlir's FX importer (weights become ``dense_resource`` blobs), lower to linalg-on-tensors,
then compile. ``import_torch`` stops at the MLIR text (turbine's ``save_mlir``);
``pipeline.compile_torch`` is the whole chain in one call.

Needs ``pip install pyree-base-compiler[torch]`` (torch-mlir and torch).
"""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.extras import require


def import_torch(module, *example_args, function_name: str = "main",
                 dynamic_shapes=None) -> str:
    """MLIR text of ``module`` (an ``nn.Module`` or a ``torch.export.ExportedProgram``) called
    on ``example_args``, as one function ``function_name``. ``dynamic_shapes`` is
    torch.export's (``{"x": {0: torch.export.Dim("batch", max=64)}}``): those dims become
    ``?`` and one module serves every size. Tracing errors are torch.export's own exceptions
    (they point into the model's code); a lowering failure is a CompileError."""
    require("torch", "torch", "importing PyTorch modules")
    require("torch_mlir", "torch", "importing PyTorch modules")
    from torch_mlir import fx
    from torch_mlir.compiler_utils import TorchMlirCompilerError

    try:
        imported = fx.export_and_import(module, *example_args, output_type="linalg-on-tensors",
                                        func_name=function_name, hooks=_weights_hooks(),
                                        dynamic_shapes=dynamic_shapes,
                                        decomposition_table=_decompositions())
    except TorchMlirCompilerError as err:
        # Its message is a page (a repro command for torch-mlir developers); keep the diagnostics.
        lines = [line for line in str(err).splitlines()
                 if line.strip() and not line.startswith(("$ torch-mlir-opt", "Add '", "For Torch"))]
        raise CompileError("torch-mlir could not lower the module to linalg-on-tensors: "
                           + "\n".join(lines)) from None
    return str(imported)


def _decompositions() -> dict:
    """torch-mlir's decomposition table, plus PyTorch's own decomposition of ``aten.gelu``:
    torch-mlir's lowering of its tanh form takes sqrt(2/pi) as 0.797724 (pi as 22/7), a
    relative error up to 1e-3 in the negative tail that PyTorch's constants do not have."""
    import torch
    from torch._decomp import get_decompositions
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    return {**get_decomposition_table(), **get_decompositions([torch.ops.aten.gelu])}


def _weights_hooks():
    """torch-mlir hooks that hand each weight's bytes to its ``dense_resource`` blob directly.

    torch-mlir's FX importer copies every weight through a Python list (``tensor.tolist()``,
    then ``np.array``), most of a large model's import time. The hook fills the
    importer's own per-tensor cache with the attribute it would have built from that list (same
    blob name, type and bytes), so the default path finds it there and makes the same op; a
    tensor without storage (a fake tensor) or one element (a splat) is left to that path."""
    import numpy as np
    import torch
    from torch._subclasses.fake_tensor import FakeTensor
    from torch_mlir.extras import fx_importer as fxi
    from torch_mlir.ir import DenseResourceElementsAttr

    class Hooks(fxi.FxImporterHooks):
        def resolve_literal(self, gni, literal, info):
            npy_dtype = fxi.TORCH_DTYPE_TO_NPY_TYPE.get(getattr(literal, "dtype", None))
            if (not isinstance(literal, torch.Tensor) or isinstance(literal, FakeTensor)
                    or npy_dtype is None or literal.numel() <= 1):
                return None
            cached = gni._cc._py_attr_tracker.track(literal)  # what _make_vtensor_literal_op reads
            if cached.is_empty:
                data = literal.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
                array = np.asarray(data.numpy()).view(npy_dtype).reshape(tuple(literal.shape))
                shape = "_".join(str(d) for d in literal.shape)
                cached.value = DenseResourceElementsAttr.get_from_buffer(
                    array, f"torch_tensor_{shape}_{literal.dtype}",
                    fxi.create_mlir_tensor_type(literal))
            return None

    return Hooks()
