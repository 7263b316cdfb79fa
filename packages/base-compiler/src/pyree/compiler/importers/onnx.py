"""ONNX model -> linalg-on-tensors MLIR text (what IREE's ``iree-import-onnx`` plus its
torch input conversion do), through torch-mlir:

    onnx_rewrites (types, run_time_inputs, functions,
                   nodes, fold)                     -> ONNX that torch-mlir converts right
    onnx_importer (ModelInfo, NodeImporter)         -> torch dialect with torch.operator "onnx.*"
    torch-onnx-to-torch-backend-pipeline            -> torch backend contract
    torch-backend-to-linalg-on-tensors-backend-pipeline -> func/arith/tensor/linalg

torch-mlir runs in a worker process (``onnx_apart``): it aborts or segfaults on some models, and
the caller's process must survive that. Needs ``pip install pyree-base-compiler[onnx]``
(torch-mlir and onnx; not torch).
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import tempfile
from pathlib import Path

from pyree.compiler.errors import CompileError
from pyree.compiler.extras import require
from pyree.compiler.importers import onnx_apart, unsigned
from pyree.compiler.importers.onnx_rewrites import fold, functions, nodes, run_time_inputs, types


def import_onnx(model, *, opset_version: int | None = None, data_prop: bool = True,
                data_dir: str | Path | None = None) -> str:
    """Imports ``model`` (a path to an ``.onnx`` file, an ``onnx.ModelProto`` or its serialized
    bytes) and returns linalg-on-tensors MLIR text. The function is named after the ONNX graph,
    as in IREE.

    ``opset_version`` upgrades the model first; ``data_prop`` lets shape inference propagate
    constant shapes; ``data_dir`` is where a file's external data lives (default: its folder).
    """
    onnx = require("onnx", "onnx", "importing ONNX")
    require("torch_mlir", "onnx", "importing ONNX")
    if isinstance(model, (bytes, bytearray, memoryview)):
        try:
            model = onnx.load_from_string(bytes(model))
        except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and kin
            raise CompileError(f"the bytes given are not an ONNX model: {e}") from None
    if not isinstance(model, onnx.ModelProto):
        if not isinstance(model, (str, os.PathLike)):
            raise CompileError(f"import_onnx takes a path, an onnx.ModelProto or its bytes, not "
                               f"{type(model).__name__}")
        model = Path(model)
        if not model.is_file():
            raise CompileError(f"cannot read ONNX file '{model}': no such file")
    job = functools.partial(import_here, opset_version=opset_version, data_prop=data_prop,
                            data_dir=data_dir)
    return onnx_apart.run(job, model)


def import_here(model, *, opset_version, data_prop, data_dir, journal=None,
                first: int | None = None) -> str:
    """``import_onnx`` in this process (the worker's side); ``journal`` records each step.
    ``first`` keeps only the graph's first nodes (onnx_apart's search for a crashing node)."""
    import onnx

    journal = journal or onnx_apart.Journal(None)
    journal.step("reading the model")
    proto = _load(onnx, model, opset_version, data_prop, data_dir)
    journal.loaded(proto)
    if first is not None:
        proto = onnx_apart.first_nodes(proto, first)
    types.refuse_missing_types(proto)
    expand: set[str] = set()
    while True:
        journal.step("rewriting the graph for torch-mlir")
        model, checks = run_time_inputs.specialise_run_time_inputs(proto)
        model = functions.expand_functions(model, expand)
        model = fold.fold_shape_arithmetic(nodes.rewrite_nodes(model))
        journal.step("importing the graph into torch-mlir")
        module = _to_torch(model)
        journal.step("torch-mlir's torch-onnx-to-torch-backend-pipeline")
        _run_pipeline(module, "torch-onnx-to-torch-backend-pipeline")
        left = _unconverted(module)
        more = {op for op in left if functions.has_function(proto, op)} - expand
        if not more:
            break
        expand |= more  # again, with these ops replaced by their ONNX function bodies
    if left:
        raise CompileError("the ONNX model uses ops that torch-mlir cannot convert: "
                           + ", ".join(left) + ". Check the model's opset (--opset-version "
                           "upgrades it) or replace these ops before importing.")
    name, arguments, results = _unsigned_types(module)
    journal.step("torch-mlir's torch-backend-to-linalg-on-tensors-backend-pipeline")
    _run_pipeline(module, "torch-backend-to-linalg-on-tensors-backend-pipeline")
    text = run_time_inputs.add_checks(module.operation.get_asm(), checks)
    return unsigned.restore(text, name, arguments, results)


def _unsigned_types(module) -> tuple[str, list, list]:
    """The public function's name, and the unsigned element type of each of its arguments and
    results (``!torch.vtensor<[4],ui8>``), else None, before the lowering makes them signless
    (importers/unsigned.py)."""
    def of(t) -> str | None:
        match = re.search(r",(ui\d+)>$", str(t))
        return match.group(1) if match and match.group(1) in unsigned.UNSIGNED else None
    for op in module.body.operations:
        if op.operation.name == "func.func" and "sym_visibility" not in op.attributes:
            signature = op.attributes["function_type"].value
            return (op.attributes["sym_name"].value, [of(t) for t in signature.inputs],
                    [of(t) for t in signature.results])
    return "", [], []


def _load(onnx, model, opset_version, data_prop, data_dir):
    """A shape-inferred ModelProto. Files go through torch-mlir's own loader (external data,
    protos over 2 GB, opset upgrade), with its temporary files in a private folder."""
    if isinstance(model, onnx.ModelProto):
        try:
            if opset_version:
                model = onnx.version_converter.convert_version(model, opset_version)
            onnx.checker.check_model(model)
            return onnx.shape_inference.infer_shapes(model, data_prop=data_prop)
        except Exception as err:  # noqa: BLE001 - onnx raises several unrelated types
            raise CompileError(f"invalid ONNX model: {first_line(err)}") from None
    from torch_mlir.tools.import_onnx.__main__ import load_onnx_model

    with tempfile.TemporaryDirectory(prefix="pyree-import-onnx-") as temp_dir:
        args = argparse.Namespace(input_file=str(model), temp_dir=temp_dir, data_dir=data_dir,
                                  opset_version=opset_version, clear_domain=False,
                                  data_prop=data_prop, keep_temps=False)
        try:
            return load_onnx_model(args)
        except Exception as err:  # noqa: BLE001 - protobuf, onnx checker and shape inference
            raise CompileError(f"'{model}' is not a valid ONNX model: {first_line(err)}") \
                from None


def _to_torch(proto):
    """The model in torch-mlir's torch dialect, one ``torch.operator`` per node (but for
    MeanVarianceNormalization, which torch-mlir's importer expands itself)."""
    from torch_mlir.dialects import torch as torch_d
    from torch_mlir.extras import onnx_importer
    from torch_mlir.ir import Context

    context = Context()
    torch_d.register_dialect(context)
    try:
        info = onnx_importer.ModelInfo(proto)
        module = info.create_module(context=context)
        onnx_importer.NodeImporter.define_function(info.main_graph, module.operation).import_all()
    except onnx_importer.OnnxImportError as err:
        raise CompileError(f"cannot import the ONNX model: {err}") from None
    return module


def _run_pipeline(module, pipeline: str) -> None:
    """Runs one of torch-mlir's pass pipelines in place. torch-mlir's own
    ``run_pipeline_with_repro_report`` imports torch and writes a repro file to /tmp on failure;
    here a failure is one CompileError carrying MLIR's diagnostics."""
    from torch_mlir.ir import MLIRError
    from torch_mlir.passmanager import PassManager

    diagnostics: list[str] = []

    def collect(diag) -> bool:
        diagnostics.append(f"{diag.location}: {diag.message}")
        return True  # handled: not printed to stderr

    with module.context as ctx:
        # As torch-mlir does: some passes report errors without failing (torch-mlir#3506),
        # so errors go to a handler rather than only into the MLIRError.
        ctx.emit_error_diagnostics = True
        handler = ctx.attach_diagnostic_handler(collect)
        try:
            PassManager.parse(f"builtin.module({pipeline})").run(module.operation)
        except MLIRError as err:
            detail = "\n".join(dict.fromkeys(diagnostics)) or str(err)
            raise CompileError(f"torch-mlir's {pipeline} failed on the ONNX model:\n{detail}") \
                from None
        finally:
            handler.detach()


def _unconverted(module) -> dict[str, None]:
    """The ONNX ops that torch-mlir could not convert (they stay ``torch.operator``), in order,
    named rather than left for the next pipeline to fail on with an MLIR dump."""
    from torch_mlir.ir import StringAttr, WalkResult

    left: dict[str, None] = {}

    def visit(op):
        if op.name == "torch.operator":
            left[StringAttr(op.attributes["name"]).value.removeprefix("onnx.")] = None
        return WalkResult.ADVANCE

    module.operation.walk(visit)
    return left


def first_line(err: BaseException) -> str:
    """The first line of a framework's exception message (some run to pages)."""
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0]
