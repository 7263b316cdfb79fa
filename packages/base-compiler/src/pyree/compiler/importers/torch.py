"""PyTorch nn.Module -> linalg-on-tensors MLIR text.

The shape follows iree-turbine's ``aot.export(module, *args).compile(...)``: trace with
``torch.export`` on example arguments (static shapes from them), import the frozen program with
torch-mlir's FX importer (weights become ``dense_resource`` blobs), lower to linalg-on-tensors,
then compile. ``import_torch`` stops at the MLIR text (turbine's ``save_mlir``);
``pipeline.compile_torch`` is the whole chain in one call.

Needs ``pip install pyree-base-compiler[torch]`` (torch-mlir and torch).
"""

from __future__ import annotations

import dataclasses
import re

from pyree.compiler.errors import CompileError
from pyree.compiler.extras import require
from pyree.compiler.importers import torch_missing_ops, torch_scans, torch_semantics, unsigned
from pyree.compiler.importers.torch_small_ints import widen_small_ints


def import_torch(module, *example_args, function_name: str = "main",
                 dynamic_shapes=None, parameter_scope: str | None = None) -> str:
    """MLIR text of ``module`` (an ``nn.Module`` or a ``torch.export.ExportedProgram``) called
    on ``example_args``, as one function ``function_name``. ``dynamic_shapes`` is
    torch.export's (``{"x": {0: torch.export.Dim("batch", max=64)}}``): those dims become
    ``?`` and one module serves every size. With ``parameter_scope`` every tensor of the
    module's ``state_dict`` is a parameter ``scope::name`` (``#stream.parameter.named``, as
    iree-turbine externalizes them) instead of a constant in the module: any safetensors or
    IRPA file with those names fills it at load (docs/PARAMETERS.md). Tracing errors are
    torch.export's own exceptions (they point into the model's code); a lowering failure is a
    CompileError."""
    require("torch", "torch", "importing PyTorch modules")
    require("torch_mlir", "torch", "importing PyTorch modules")
    import torch
    from torch_mlir import fx
    from torch_mlir.compiler_utils import TorchMlirCompilerError

    # Exported here (as torch-mlir would) to read the export's ranges (``_dim_bounds``).
    if isinstance(module, torch.export.ExportedProgram):
        program = module  # the caller's: left as it is
    else:
        program = torch.export.export(module, example_args, dynamic_shapes=dynamic_shapes,
                                      strict=False)
        _lift_non_persistent_buffers(program)
    _refuse_data_dependent_shapes(program)
    program = widen_small_ints(program, caller_owned=isinstance(module, torch.export.ExportedProgram))
    named = {} if parameter_scope is None else _state_dict_keys(module)
    # torch-mlir's own first step, taken here so that what it leaves can be mended (a new
    # program: the caller's is not changed)
    program = program.run_decompositions(_decompositions())
    _lift_listed_constants(program)
    _drop_input_mutations(program)
    try:
        imported = _lowered(fx.export_and_import(program, output_type="raw",
                                                 func_name=function_name,
                                                 hooks=_weights_hooks(named),
                                                 decomposition_table={}))
    except TorchMlirCompilerError as err:
        # Its message is a page (a repro command for torch-mlir developers); keep the diagnostics.
        lines = [line for line in str(err).splitlines()
                 if line.strip() and not line.startswith(("$ torch-mlir-opt", "Add '", "For Torch"))]
        raise CompileError("torch-mlir could not lower the module to linalg-on-tensors: "
                           + "\n".join(lines)) from None
    except (AssertionError, KeyError, NotImplementedError, RuntimeError, TypeError,
            ValueError) as err:  # torch-mlir's FX importer on a graph form it does not take
        first = (str(err).strip().splitlines() or [""])[0]
        raise CompileError(f"torch-mlir's importer cannot take the exported program: "
                           f"{type(err).__name__}: {first}") from err
    text = _with_bounds(str(imported), _dim_bounds(program), function_name)
    text = unsigned.restore(text, function_name, *_unsigned_types(program))
    return text if parameter_scope is None else externalize(text, parameter_scope, named)


def _lowered(module):
    """torch-mlir's lowering of an imported program to linalg-on-tensors (its
    ``export_and_import(output_type="linalg-on-tensors")``: the same two pipelines), with pyree's
    scans (``torch_scans``) carried through each."""
    from torch_mlir.compiler_utils import OutputType, lower_mlir_module, run_pipeline_with_repro_report

    module = torch_scans.calls_for_ops(module)
    run_pipeline_with_repro_report(
        module, "builtin.module(func.func(torch-match-quantized-custom-ops), "
        "torchdynamo-export-to-torch-backend-pipeline{ extra-library=})",
        "Lowering TorchFX IR -> Torch Backend IR")
    return lower_mlir_module(False, OutputType.LINALG_ON_TENSORS, torch_scans.scans_for_calls(module))


def _refuse_data_dependent_shapes(program) -> None:
    """A result whose size depends on tensor contents (``x[x > 0]``, ``nonzero``,
    ``masked_select``: torch.export's unbacked sizes ``u0``) is refused by name at the model's
    line: torch-mlir's lowering of a boolean mask's ``aten.index`` never returned."""
    import torch
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    for node in program.graph.nodes:
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor) or not free_unbacked_symbols(val):
            continue
        lines = [line.strip() for line in node.meta.get("stack_trace", "").splitlines()
                 if line.strip().startswith("File ")]
        where = f" ({lines[-1]})" if lines else ""
        raise CompileError(f"'{node.target}'{where} gives a tensor of shape {list(val.shape)}, "
                           "a size computed from tensor contents (a data-dependent shape), "
                           "which pyree does not support: each size must follow from the "
                           "argument shapes (mask with torch.where instead of indexing by it)")


def _unsigned_types(program) -> tuple[list, list]:
    """The unsigned element type (``unsigned.UNSIGNED``) of each user input and output of
    ``program`` that PyTorch types unsigned, else None (importers/unsigned.py)."""
    import torch
    names = {torch.uint8: "ui8", **{getattr(torch, f"uint{b}"): f"ui{b}" for b in (16, 32, 64)
                                    if hasattr(torch, f"uint{b}")}}

    def of(node) -> str | None:
        val = getattr(node, "meta", {}).get("val")
        return names.get(getattr(val, "dtype", None))
    signature = program.graph_signature
    inputs = [n for n in program.graph.nodes if n.op == "placeholder"
              and n.name in signature.user_inputs]
    (output,) = [n for n in program.graph.nodes if n.op == "output"]
    returned = [a for a in output.args[0] if getattr(a, "name", None) in signature.user_outputs]
    return [of(n) for n in inputs], [of(n) for n in returned]


def _lift_non_persistent_buffers(program) -> None:
    """Puts each non-persistent buffer (``register_buffer(..., persistent=False)``: Hugging
    Face's rotary ``inv_freq``, GPT-2's causal ``bias``, BERT's ``position_ids``) into the
    program's state_dict, where torch-mlir's importer looks for every buffer: torch.export keeps
    them among its constants, and the importer failed with "Could not find state mapping for
    buffer" on most Hugging Face language models. Each becomes a persistent buffer of the
    program (torch.export's verifier allows no non-persistent one in the state_dict); it stays
    a constant of the module, not a parameter (``_state_dict_keys`` reads the module's own
    ``state_dict``, which has no such buffer)."""
    from torch.export.graph_signature import InputKind
    state, constants = program.state_dict, getattr(program, "constants", {})
    specs = program.graph_signature.input_specs
    for i, spec in enumerate(specs):
        if spec.kind == InputKind.BUFFER and spec.persistent is False and spec.target in constants:
            state[spec.target] = constants.pop(spec.target)
            specs[i] = dataclasses.replace(spec, persistent=True)


def _drop_input_mutations(program) -> None:
    """Arguments ``forward`` updates in place (``x.add_(1)``) are not results: torch.export
    lists their new values as outputs ahead of the user's, which shifted every result the
    function returns. The arguments reach the module by value (numpy arrays, device copies),
    so an update of one has nowhere to go; the function returns what ``forward`` returns."""
    from torch.export.graph_signature import OutputKind
    signature = program.graph_signature
    keep = [k for k, spec in enumerate(signature.output_specs)
            if spec.kind != OutputKind.USER_INPUT_MUTATION]
    if len(keep) == len(signature.output_specs):
        return
    (output,) = [n for n in program.graph.nodes if n.op == "output"]
    output.args = (tuple(output.args[0][k] for k in keep),)
    signature.output_specs = [signature.output_specs[k] for k in keep]
    program.graph.eliminate_dead_code()
    program.graph_module.recompile()


def _lift_listed_constants(program) -> None:
    """Each weight, buffer or constant that a list argument names directly (torchvision's Swin
    indexes its bias table by a buffer: ``index(table, [relative_position_index])``) read
    through a copy instead: torch-mlir's importer puts such a placeholder's tensor itself into
    the list, then refuses it ("Heterogeneous lists are not supported: expected vtensor, got
    <class 'torch.Tensor'>")."""
    import torch
    graph = program.graph_module.graph
    frozen = {n for n in graph.nodes if n.op == "placeholder"
              and n.name not in program.graph_signature.user_inputs}
    def named(a) -> bool:
        return isinstance(a, torch.fx.Node) and a in frozen

    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or not any(
                isinstance(arg, (list, tuple)) and any(map(named, arg)) for arg in node.args):
            continue
        args = list(node.args)
        for i, arg in enumerate(args):
            if isinstance(arg, (list, tuple)) and any(map(named, arg)):
                items = []
                for a in arg:
                    if named(a):
                        with graph.inserting_before(node):
                            copy = graph.call_function(torch.ops.aten.clone.default, (a,))
                        copy.meta["val"] = a.meta.get("val")
                        a = copy
                    items.append(a)
                args[i] = type(arg)(items)
        node.args = tuple(args)
        changed = True
    if changed:
        program.graph_module.recompile()


def _state_dict_keys(module) -> dict:
    """(data pointer, shape, strides, dtype) of each state_dict tensor -> its first name."""
    import torch
    tensors = module.state_dict() if isinstance(module, torch.nn.Module) else module.state_dict
    keys: dict = {}
    for key, t in tensors.items():
        keys.setdefault(_identity(t), key)
    return keys


def _identity(t) -> tuple:
    return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), str(t.dtype))


# what a state_dict tensor's blob is named (resource keys are identifiers: the names go by index)
_PARAMETER_BLOB = "pyree_parameter_"


def externalize(text: str, scope: str, named: dict) -> str:
    """``text`` with each constant whose blob is a state_dict tensor (``_PARAMETER_BLOB`` k)
    read from a ``util.global`` parameter ``scope::name`` instead, and those blobs dropped."""
    names = list(dict.fromkeys(named.values()))
    types: dict[int, str] = {}

    def load(match) -> str:
        k = int(match.group(2))
        types[k] = match.group(3)
        return f"{match.group(1)}util.global.load @{_PARAMETER_BLOB}{k} : {match.group(3)}"

    text = re.sub(rf"(%\S+ = )arith\.constant dense_resource<{_PARAMETER_BLOB}(\d+)(?:_\d+)?> "
                  r": (tensor<[^>]*>)", load, text)
    if re.search(rf"dense_resource<{_PARAMETER_BLOB}", text.split("\n{-#")[0]):
        raise CompileError("a parameter of the module is used where pyree cannot read it from "
                           "a parameter file (not as a whole constant tensor)")
    text = drop_blobs(text, lambda name: name.startswith(_PARAMETER_BLOB))
    globals_ = "".join(f'  util.global private @{_PARAMETER_BLOB}{k} = '
                       f'#stream.parameter.named<"{scope}"::"{names[k]}"> : {t}\n'
                       for k, t in sorted(types.items()))
    head = re.search(r"^module( attributes \{.*\})? \{\n", text, re.M)
    return text[:head.end()] + globals_ + text[head.end():]


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
    """torch-mlir's decomposition table, plus PyTorch's own decomposition of ``aten.gelu``
    (torch-mlir's lowering of its tanh form takes sqrt(2/pi) as 0.797724, pi as 22/7: a
    relative error up to 1e-3 in the negative tail that PyTorch's constants do not have) and
    pyree's own where torch-mlir's lowering loses PyTorch's answer (``torch_semantics``) or
    refuses the op (``torch_missing_ops``, ``torch_scans``)."""
    import torch
    from torch._decomp import get_decompositions
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    return {**get_decomposition_table(), **get_decompositions([torch.ops.aten.gelu]),
            **torch_semantics.decompositions(), **torch_missing_ops.decompositions(),
            **torch_scans.decompositions()}


def drop_blobs(text: str, dropped) -> str:
    """``text`` without the ``dialect_resources`` blobs whose name ``dropped(name)`` is true."""
    body, sep, resources = text.partition("\n{-#")
    entries = re.findall(r"^\s*([\w.$-]+): (\"0x[0-9A-Fa-f]*\")", resources, re.M)
    kept = [f"      {name}: {blob}" for name, blob in entries if not dropped(name)]
    if not sep:
        return text
    if not kept:
        return body + "\n"
    return (body + "\n{-#\n  dialect_resources: {\n    builtin: {\n" + ",\n".join(kept)
            + "\n    }\n  }\n#-}\n")


def _weights_hooks(named: dict):
    """torch-mlir hooks that hand each weight's bytes to its ``dense_resource`` blob directly.

    torch-mlir's FX importer copies every weight through a Python list (``tensor.tolist()``,
    then ``np.array``), most of a large model's import time. The hook fills the
    importer's own per-tensor cache with the attribute it would have built from that list (same
    blob name, type and bytes), so the default path finds it there and makes the same op; a
    tensor without storage (a fake tensor) or one element (a splat) is left to that path.
    A tensor ``named`` lists (``_state_dict_keys``) gets the blob name ``externalize`` reads."""
    index = {key: k for k, key in enumerate(dict.fromkeys(named.values()))}
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
                key = named.get(_identity(literal))
                blob = f"torch_tensor_{shape}_{literal.dtype}" if key is None else \
                    f"{_PARAMETER_BLOB}{index[key]}"
                cached.value = DenseResourceElementsAttr.get_from_buffer(
                    array, blob, fxi.create_mlir_tensor_type(literal))
            return None

    return Hooks()
