"""The compiler's stages in data-flow order, from MLIR text to module bytes.

    input     MLIR text -> xDSL IR -> tensor program (pyree.compiler.input)
    flow      fuse ops into dispatch regions; outline each region as a kernel (pyree.compiler.flow)
    host      plan buffers; emit each function's commands (pyree.compiler.host)
    codegen   compile every kernel for every target backend (pyree.compiler.codegen.*)
    module    FlatBuffer + data segment + digest (pyree.compiler.module_writer)
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pyree.compiler import printing
from pyree.compiler._fb.Constant import ConstantT
from pyree.compiler.codegen import backend
from pyree.compiler.errors import CompileError
from pyree.compiler.flow.convolution import rewrite_convolutions
from pyree.compiler.flow.kernels import KernelTable, outline
from pyree.compiler.flow.regions import form_dispatch_regions
from pyree.compiler.flow.split_reduction import split_reductions
from pyree.compiler.flow.tensor_program import (
    Constant,
    Function,
    Generic,
    Program,
    map_blocks,
    walk_ops,
)
from pyree.compiler.host.linearize import linearize
from pyree.compiler.host.planning import plan_function
from pyree.compiler.host.program import emit_function, tensor_type
from pyree.compiler.input import lower_to_tensor_program, parse_mlir
from pyree.compiler.input.demotion import demote_types
from pyree.compiler.input.input_types import convert_input
from pyree.compiler.module_writer import ModuleBuilder
from pyree.compiler.options import TARGET_BACKENDS, CompileOptions


def compile_file(path: str | Path, options: CompileOptions | None = None) -> bytes:
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise CompileError(f"cannot read input file: {e}", str(path)) from None
    return compile_str(text, options, source_name=str(path))


def compile_str(text: str, options: CompileOptions | None = None,
                source_name: str = "<string>") -> bytes:
    options = options or CompileOptions()
    _check_targets(options.target_backends)
    report = options.progress or (lambda line: None)
    report(f"parsing {source_name} ({size_text(len(text))})")
    text, input_type = convert_input(text, source_name, options.input_type)
    module = parse_mlir(text, source_name)
    demote_i64 = options.demote_i64_to_i32
    demote_types(module, options.demote_f64_to_f32,
                 input_type == "stablehlo" if demote_i64 is None else demote_i64,
                 options.promote_bf16_to_f32)
    report("lowering to the tensor program")
    program = lower_to_tensor_program(module)
    _dump(options, "tensor program", printing.format_program(program))
    report("forming dispatch regions")
    program = Program([map_blocks(f, _form_regions) for f in program.functions], program.name)
    _dump(options, "dispatch regions", printing.format_program(program))

    builder = ModuleBuilder(program.name, _producer())
    table = KernelTable()
    constant_index: dict = {}
    for function in program.functions:
        for op in walk_ops(function.ops):
            if isinstance(op, Constant) and op.data is not None and op.result not in constant_index:
                constant = ConstantT()
                constant.type = tensor_type(op.result)
                constant.data = builder.add_data(op.data)
                constant_index[op.result] = len(builder.module.constants)
                builder.module.constants.append(constant)
    for function in program.functions:
        ordinals = {}
        for op in walk_ops(function.ops):
            if isinstance(op, Generic):
                ordinals[op] = table.add(outline(op, _kernel_name(function.name, len(table.kernels), op)))
        steps = linearize(function)
        plan = plan_function(function, steps, constant_index)
        builder.module.functions.append(emit_function(function, steps, plan, ordinals))
    _dump(options, "kernels", printing.format_kernels(table.kernels))
    regions = sum(isinstance(op, Generic) for f in program.functions for op in walk_ops(f.ops))
    report(f"{regions} dispatch regions, {len(table.kernels)} distinct kernels")

    for name in options.target_backends:
        report(f"codegen for {name}: {len(table.kernels)} kernels")
        builder.module.executables.append(
            backend(name).compile_executable(table.kernels, options, builder))
    report("writing the module")
    return builder.finish()


def _form_regions(function: Function) -> Function:
    return split_reductions(form_dispatch_regions(rewrite_convolutions(function)))


def size_text(nbytes: int) -> str:
    """A size for a progress line: ``94.1 MB``, ``52.4 kB``."""
    return f"{nbytes / 1e6:.1f} MB" if nbytes >= 100_000 else f"{nbytes / 1e3:.1f} kB"


def _check_targets(targets: list[str]) -> None:
    if not targets:
        raise CompileError("no target backend given; use --pyree-hal-target-backends="
                           + "|".join(TARGET_BACKENDS))
    for name in targets:
        if name not in TARGET_BACKENDS:
            raise CompileError(f"unknown target backend '{name}'; known backends: "
                               + ", ".join(TARGET_BACKENDS))


def _kernel_name(function: str, ordinal: int, op: Generic) -> str:
    what = "_".join(part.split(".")[-1] for part in op.origin.split("+"))
    shape = "x".join(map(str, op.loop_ranges)) or "scalar"
    return re.sub(r"\W", "_", f"{function}_dispatch_{ordinal}_{what}_{shape}_{op.results[0].dtype}")


def _dump(options: CompileOptions, stage: str, text: str) -> None:
    if options.print_ir_after_all:
        print(f"// -----// IR after {stage} //----- //\n{text}", file=sys.stderr)


def _producer() -> str:
    try:
        return f"pyree-compile {version('pyree-base-compiler')}"
    except PackageNotFoundError:
        return "pyree-compile"
