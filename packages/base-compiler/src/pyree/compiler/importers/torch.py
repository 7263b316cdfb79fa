"""PyTorch nn.Module -> linalg-on-tensors MLIR text.

The shape follows iree-turbine's ``aot.export(module, *args).compile(...)``: trace with
``torch.export`` on example arguments (static shapes from them), import the frozen program with
torch-mlir's FX importer (weights become ``dense_resource`` blobs), lower to linalg-on-tensors,
then compile. ``import_torch`` stops at the MLIR text (turbine's ``save_mlir``);
``pipeline.compile_torch`` is the whole chain in one call.

Needs ``pip install pyree-base-compiler[torch]`` (torch-mlir and torch).
"""

from __future__ import annotations

import re

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
    import torch
    from torch_mlir import fx
    from torch_mlir.compiler_utils import TorchMlirCompilerError

    # Exported here (as torch-mlir would) to read the export's ranges (``_dim_bounds``).
    program = module if isinstance(module, torch.export.ExportedProgram) else \
        torch.export.export(module, example_args, dynamic_shapes=dynamic_shapes, strict=False)
    try:
        imported = fx.export_and_import(program, output_type="linalg-on-tensors",
                                        func_name=function_name, hooks=_weights_hooks(),
                                        decomposition_table=_decompositions())
    except TorchMlirCompilerError as err:
        # Its message is a page (a repro command for torch-mlir developers); keep the diagnostics.
        lines = [line for line in str(err).splitlines()
                 if line.strip() and not line.startswith(("$ torch-mlir-opt", "Add '", "For Torch"))]
        raise CompileError("torch-mlir could not lower the module to linalg-on-tensors: "
                           + "\n".join(lines)) from None
    return _with_bounds(str(imported), _dim_bounds(program), function_name)


def _dim_bounds(program) -> dict[tuple[int, int], tuple[str, int, int | None]]:
    """(argument, dim) -> (symbol, min, max or None) of each dynamic dim of the program's inputs
    that is a bare torch.export symbol (``Dim("seq", min=1, max=512)``): its
    ``range_constraints``."""
    inputs = [n for n in program.graph.nodes if n.op == "placeholder"
              and n.name in program.graph_signature.user_inputs]
    out = {}
    for a, node in enumerate(inputs):
        for d, dim in enumerate(getattr(node.meta.get("val"), "shape", ())):
            expr = getattr(getattr(dim, "node", None), "expr", None)
            bounds = program.range_constraints.get(expr) if expr is not None else None
            if bounds is not None and bounds.lower.is_integer:
                high = int(bounds.upper) if bounds.upper.is_integer else None
                out[a, d] = (str(expr), max(int(bounds.lower), 0), high)
    return out


def _with_bounds(text: str, bounds: dict, function_name: str) -> str:
    """``text`` with the bounds of its function's dynamic dims stated at the top of its body as
    IREE states them, ``util.assume.int`` of each ``tensor.dim``, and dims that are one
    torch.export symbol asserted equal: torch-mlir's linalg output drops both, which decide its
    shape guards (a sequence of at least 1 makes ``8 * seq / (8 * seq)`` exactly 1; a mask's
    sequence is the input's) and which the runtime checks each call against."""
    head = re.search(rf"func\.func @{re.escape(function_name)}\((.*?)\)[^\n]*\{{\n", text)
    if head is None or not bounds:
        return text
    types = re.findall(r"(%[\w.]+): (tensor<[^>]*>)", head.group(1))
    lines, first = [], {}
    for (a, d), (symbol, low, high) in sorted(bounds.items()):
        if a >= len(types):
            continue
        name, type_ = types[a]
        upper = "" if high is None else f", umax = {high}"
        lines += [f"    %pyree_dim_index_{a}_{d} = arith.constant {d} : index",
                  f"    %pyree_dim_{a}_{d} = tensor.dim {name}, %pyree_dim_index_{a}_{d} : {type_}",
                  f"    %pyree_bound_{a}_{d} = util.assume.int %pyree_dim_{a}_{d}"
                  f"<umin = {low}{upper}> : index"]
        if symbol in first:
            a0, d0 = first[symbol]
            lines += [f"    %pyree_same_{a}_{d} = arith.cmpi eq, %pyree_dim_{a0}_{d0}, "
                      f"%pyree_dim_{a}_{d} : index",
                      f"    cf.assert %pyree_same_{a}_{d}, \"argument {a} dim {d} must equal "
                      f"argument {a0} dim {d0} (torch.export symbol {symbol})\""]
        first.setdefault(symbol, (a, d))
    return text[:head.end()] + "".join(line + "\n" for line in lines) + text[head.end():]


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
