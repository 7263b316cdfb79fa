"""The export itself: before any folding, every constant of at least the minimum size becomes a
parameter Constant of the target's scope, and its bytes go to the target file; and the archive
of zero splats for ``--iree-opt-splat-parameters``.

Exporting before the flow stage keeps the file's tensors the model's own weights, in their own
layout: a model whose weights change (fine-tuned, re-quantized) needs only a new file, never a
recompile, and no compile-time fold can bake a weight into the module. (Small constants, under
the threshold, stay inline and fold as before.) Constants loaded from one ``util.global`` share
an array and so one key: the global's name; other keys are ``constant_N``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from pyree.compiler.kernel import itemsize
from pyree.compiler.options import CompileOptions
from pyree.compiler.parameters import ExportTarget, Tensor, write_file
from pyree.compiler.parameters.irpa import Splat, write_irpa
from pyree.compiler.tensor_program import Constant, Function, Program, map_blocks, walk_ops


def export_parameters(program: Program, options: CompileOptions) -> Program:
    """``program`` with its large constants turned into parameters, written to the file that
    ``options.export_parameters`` names (if any); then the splat archive of every parameter it
    reads, if ``options.splat_parameters`` names one."""
    if options.export_parameters:
        program = _export(program, ExportTarget.parse(options.export_parameters),
                          options.minimum_parameter_export_size)
    if options.splat_parameters:
        _write_splats(program, options.splat_parameters)
    return program


def _export(program: Program, target: ExportTarget, minimum: int) -> Program:
    keys: dict[int, str] = {}  # id(array) -> key
    tensors: list[Tensor] = []
    constants = [op for f in program.functions for op in walk_ops(f.ops)
                 if isinstance(op, Constant) and op.data is not None]
    taken = {op.name for op in constants if op.name}
    for op in constants:
        if op.data.nbytes >= minimum and id(op.data) not in keys:
            keys[id(op.data)] = key = op.name or _fresh_key(taken)
            tensors.append((key, op.result.dtype, op.result.shape,
                            np.ascontiguousarray(op.data).reshape(-1).view(np.uint8)))
    target.write(tensors)

    def externalize(function: Function) -> Function:
        return dataclasses.replace(function, ops=[
            dataclasses.replace(op, data=None, parameter=(target.scope, keys[id(op.data)]))
            if isinstance(op, Constant) and op.data is not None and id(op.data) in keys else op
            for op in function.ops])

    return Program([map_blocks(f, externalize) for f in program.functions], program.name)


def _write_splats(program: Program, path: str) -> None:
    """As IREE's ``--iree-opt-splat-parameters``: one zero splat per key (scopes are not
    recorded in the archive), written even when the module reads no parameter."""
    splats = {}
    for f in program.functions:
        for op in walk_ops(f.ops):
            if isinstance(op, Constant) and op.parameter is not None:
                splats[op.parameter[1]] = Splat(bytes(itemsize(op.result.dtype)),
                                                op.result.num_bytes)
    write_file(Path(path), lambda f: write_irpa(f, list(splats.items())))


def _fresh_key(taken: set[str]) -> str:
    n = 0
    while f"constant_{n}" in taken:
        n += 1
    taken.add(f"constant_{n}")
    return f"constant_{n}"
