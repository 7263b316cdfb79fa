"""The compiler's stages in data-flow order, from MLIR text to module bytes.

    input     MLIR text -> xDSL IR -> tensor program (pyree.compiler.input)
    flow      fuse ops into dispatch regions; outline each region as a kernel (pyree.compiler.flow)
    host      plan buffers; emit each function's commands (pyree.compiler.host)
    codegen   compile every kernel for every target backend (pyree.compiler.codegen.*)
    module    FlatBuffer + data segment + digest (pyree.compiler.module_writer)
"""

from __future__ import annotations

import gc
import re
import sys
from collections.abc import Sequence
from dataclasses import replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pyree.compiler import printing
from pyree.compiler.backends import PACKAGES
from pyree.compiler.codegen import backend, executable_files
from pyree.compiler.codegen.interface import scatter_dtypes
from pyree.compiler.compiler_options import check_keywords
from pyree.compiler.errors import CompileError
from pyree.compiler.flags import parse_extra_args
from pyree.compiler.flow.kernels import KernelTable, outline
from pyree.compiler.flow.passes import PASS_NAMES, flow_passes, run_flow
from pyree.compiler.host.constants import add_constants
from pyree.compiler.host.linearize import linearize
from pyree.compiler.host.planning import plan_function
from pyree.compiler.host.program import emit_function
from pyree.compiler.input import lower_to_tensor_program, parse_mlir
from pyree.compiler.input.demotion import demote_types, f64_at_boundary, f64_math_inside
from pyree.compiler.input.input_types import convert_input
from pyree.compiler.module_writer import ModuleBuilder
from pyree.compiler.options import COMPILE_TO_STAGES, CompileOptions, resolve_targets
from pyree.compiler.output_file import write_output
from pyree.compiler.parameters.export import export_parameters
from pyree.compiler.parameters.load_time import hoist_parameter_expressions
from pyree.compiler.progress import reporter
from pyree.compiler.tensor_program import (
    Function,
    Generic,
    Program,
    sources_of,
    walk_ops,
)


def compile_file(path: str | Path, options: CompileOptions | None = None, *,
                 target_backends: Sequence[str] | str | None = None,
                 input_type: str | None = None, extra_args: Sequence[str] = (),
                 output_file: str | Path | None = None, **iree_keywords) -> bytes | None:
    """``compile_str`` on the text of the file at ``path``."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise CompileError(f"cannot read input file: {e}", str(path)) from None
    return compile_str(text, options, str(path), target_backends=target_backends,
                       input_type=input_type, extra_args=extra_args, output_file=output_file,
                       **iree_keywords)


def compile_str(source: str | bytes, options: CompileOptions | None = None,
                source_name: str = "<string>", *,
                target_backends: Sequence[str] | str | None = None,
                input_type: str | None = None, extra_args: Sequence[str] = (),
                output_file: str | Path | None = None, **iree_keywords) -> bytes | None:
    """Compiles MLIR text into module bytes, as IREE's ``iree.compiler.compile_str`` does.

    ``options`` (a CompileOptions, never modified) is the starting point; ``target_backends``,
    ``input_type`` (a name or an ``InputType``) and ``extra_args`` (pyree-compile's flags, e.g.
    ``["--iree-llvmcpu-target-cpu=host"]``) override its fields; backends from
    ``target_backends`` and ``extra_args`` add up, as IREE's do. With ``output_file`` the bytes
    are written there and None is returned. ``--compile-to`` makes the bytes a stage's IR text.
    IREE's other keywords (``output_format``, ``optimize``, ...: ``**CompilerOptions().__dict__``)
    are checked by compiler_options.check_keywords.
    """
    check_keywords(iree_keywords)
    options = _options(options, target_backends, input_type, extra_args)
    if isinstance(source, bytes):
        try:
            source = source.decode()
        except UnicodeDecodeError as e:
            raise CompileError(f"the input is not UTF-8 text: {e}", source_name) from None
    data = _compile(source, options, source_name)
    if output_file is None:
        return data
    try:
        write_output(output_file, data)
    except OSError as e:
        raise CompileError(f"cannot write {output_file}: {e.strerror or e}") from None
    return None


def compile_torch(module, *example_args, function_name: str = "main",
                  target_backends: list[str] | tuple[str, ...] = ("llvm-cpu",),
                  dynamic_shapes=None, **options) -> bytes:
    """``import_torch`` then ``compile_str``: the ``.vmfb`` bytes of ``module``. ``options``
    are CompileOptions fields (``llvmcpu_target_cpu="generic"``, ``cuda_target="sm_90"``...).
    The importer is loaded here, on first use, as the importers' docstring promises."""
    from pyree.compiler.importers.torch import import_torch

    compile_options = CompileOptions(target_backends=list(target_backends), **options)
    text = import_torch(module, *example_args, function_name=function_name,
                        dynamic_shapes=dynamic_shapes)
    return compile_str(text, compile_options, source_name=f"<torch {type(module).__name__}>")


def _options(options: CompileOptions | None, target_backends, input_type,
             extra_args: Sequence[str]) -> CompileOptions:
    values = parse_extra_args(extra_args) if extra_args else {}
    if target_backends is not None:
        named = CompileOptions(target_backends=target_backends).target_backends
        values["target_backends"] = list(dict.fromkeys(named + values.get("target_backends", [])))
    if input_type is not None:
        values.setdefault("input_type", input_type)
    return replace(options or CompileOptions(), **values)


class _Stop(Exception):
    """Raised by ``_stage`` at the --compile-to stage, carrying that stage's text."""

    def __init__(self, text: str):
        self.text = text


def _compile(text: str, options: CompileOptions, source_name: str) -> bytes:
    options = resolve_targets(options)
    stop = _check_compile_to(options.compile_to)
    options = replace(options, progress=reporter(options.progress))  # backends see a callable
    frozen = _Frozen()
    try:
        return _run_stages(text, options, source_name, stop, frozen)
    except _Stop as s:
        return s.text.encode()
    finally:
        frozen.release()


class _Frozen:
    """The objects built by the stages so far (the parsed module, then the planned program and
    its kernels) kept out of Python's full collections while later stages build more
    (``gc.freeze``), and given back to them when the compile ends. A full collection walks
    every tracked object; code generation, which builds each part's LLVM IR as Python objects,
    set off several, each over a large model's whole program (BENCHMARKS.md, issue 31 item 6).
    Forked code-generation workers inherit the frozen objects, which their collections then
    leave untouched (no copy-on-write of pages they only read). Only when and what Python
    collects changes, never a result. A process that has frozen objects itself (a server
    before it forks) is left as it is."""

    def __init__(self):
        self.ours = gc.get_freeze_count() == 0

    def freeze(self) -> None:
        if self.ours:
            gc.freeze()

    def release(self) -> None:
        if self.ours:
            gc.unfreeze()


def _f64_out_of_reach(module, options: CompileOptions) -> bool:
    """The default of ``--iree-input-demote-f64-to-f32``: whether f64 computed inside the
    module's functions (torch-mlir computes LayerNorm's statistics in f64, HF's ALiBi a pow)
    needs what a target lacks, f64 at all or its math functions. Then it runs in f32, as IREE
    demotes f64 by default; an f64 argument, result or global keeps f64 (and its error)."""
    targets = [backend(name) for name in options.target_backends]
    lacking = not all(t.float64(options) for t in targets)
    lacking_math = not all(t.float64_math(options) for t in targets)
    if not lacking and not (lacking_math and f64_math_inside(module)):
        return False
    return not f64_at_boundary(module)


def _run_stages(text: str, options: CompileOptions, source_name: str, stop: str,
                frozen: _Frozen) -> bytes:
    report = options.progress or (lambda line: None)
    after_pass = _printer(options)
    report(f"parsing {source_name} ({size_text(len(text))})")
    text, input_type = convert_input(text, source_name, options.input_type)
    module = parse_mlir(text, source_name)
    demote_i64 = options.demote_i64_to_i32
    demote_f64 = options.demote_f64_to_f32
    if demote_f64 is None:
        demote_f64 = _f64_out_of_reach(module, options)
    demote_types(module, demote_f64,
                 input_type == "stablehlo" if demote_i64 is None else demote_i64,
                 options.promote_bf16_to_f32)
    frozen.freeze()
    report("lowering to the tensor program")
    backends = [backend(name) for name in options.target_backends]
    program = lower_to_tensor_program(module, scatter_atomics=all(
        b.scatter_atomics for b in backends), scatter_dtypes=scatter_dtypes(backends),
        line_walks=all(b.line_walks for b in backends),
        dispatch_cost=max(b.dispatch_cost for b in backends))
    _stage(options, stop, "tensor program", lambda: printing.format_program(program))
    program = export_parameters(program, options)
    report("forming dispatch regions")
    gpu = all(name != "llvm-cpu" for name in options.target_backends)
    implicit = all(backend(name).implicit_gemm for name in options.target_backends)
    strict = "llvm-cpu" in options.target_backends and not options.llvmcpu_reassociate_fp_reductions
    # cuda's TF32 modes put f32 GEMMs on the tensor-core template, which gathers patches too
    tensor_f32 = implicit and options.cuda_f32_matmul != "strict"
    attention = all(b.fused_attention for b in backends)
    takers = [b.run_time_attention(options) for b in backends]
    run_time_attention = None if not attention or None in takers else (
        lambda kernel: all(take(kernel) for take in takers))
    small_sides = all(b.small_sides_tiled for b in backends)
    program = run_flow(program, flow_passes(gpu, implicit, strict, tensor_f32, attention,
                                            run_time_attention, small_sides), after_pass)
    if options.const_expr_hoisting:
        program = hoist_parameter_expressions(program)
    _stage(options, stop, "dispatch regions", lambda: printing.format_program(program))
    _check_run_time_sizes(program, options.target_backends)

    builder = ModuleBuilder(program.name, _producer())
    table = KernelTable()
    initializer = [program.initializer] if program.initializer is not None else []
    constant_index = add_constants(program.functions + initializer, builder)
    sources: dict[int, dict[str, None]] = {}  # kernel ordinal -> its regions' source ops
    for function in program.functions + initializer:
        ordinals = {}
        for op in walk_ops(function.ops):
            if isinstance(op, Generic):
                ordinals[op] = table.add(outline(op, _kernel_name(function.name, len(table.kernels), op)))
                sources.setdefault(ordinals[op], {}).update(dict.fromkeys(sources_of(op)))
        steps = linearize(function)
        plan = plan_function(function, steps, constant_index)
        emitted = emit_function(function, steps, plan, ordinals)
        if function is program.initializer:
            builder.module.initializer = emitted
        else:
            builder.module.functions.append(emitted)
    _stage(options, stop, "kernels", lambda: printing.format_kernels(table.kernels))
    for ordinal, kernel in enumerate(table.kernels):
        builder.add_kernel_info(kernel.name, list(sources[ordinal]))
    if options.dump_executables_to:
        report("writing executable files")
    dump = executable_files.start(table.kernels, options, program.name)
    regions = sum(isinstance(op, Generic) for f in program.functions for op in walk_ops(f.ops))
    report(f"{regions} dispatch regions, {len(table.kernels)} distinct kernels")

    frozen.freeze()
    for name in options.target_backends:
        report(f"codegen for {name}: {len(table.kernels)} kernels")
        builder.module.executables.append(
            backend(name).compile_executable(table.kernels, options, builder, dump(name)))
    report("writing the module")
    return builder.finish()




def _check_run_time_sizes(program: Program, targets: list[str]) -> None:
    """A function with dynamic dims needs targets that compile kernels sized at run time."""
    dynamic = [f for f in program.functions if f.symbols]
    lacking = [name for name in targets if not backend(name).run_time_sizes]
    if dynamic and lacking:
        raise CompileError(
            f"function @{dynamic[0].name} has dynamic dimensions, and the {lacking[0]} target "
            "cannot compile kernels sized at run time (targets that can: "
            f"{', '.join(n for n in PACKAGES if backend(n).run_time_sizes)}); give the "
            "function static shapes for this target", dynamic[0].location)


def size_text(nbytes: int) -> str:
    """A size for a progress line: ``94.1 MB``, ``52.4 kB``."""
    return f"{nbytes / 1e6:.1f} MB" if nbytes >= 100_000 else f"{nbytes / 1e3:.1f} kB"


def _kernel_name(function: str, ordinal: int, op: Generic) -> str:
    what = "_".join(part.split(".")[-1] for part in op.origin.split("+"))
    shape = "x".join(map(str, op.loop_ranges)) or "scalar"
    return re.sub(r"\W", "_", f"{function}_dispatch_{ordinal}_{what}_{shape}_{op.results[0].dtype}")


def _check_compile_to(phase: str) -> str:
    """The pyree stage at which --compile-to=``phase`` stops."""
    if phase not in COMPILE_TO_STAGES:
        raise CompileError(f"unknown --compile-to phase '{phase}'; known phases: "
                           + ", ".join(COMPILE_TO_STAGES))
    stage = COMPILE_TO_STAGES[phase]
    if stage is None:
        raise CompileError(
            f"--compile-to={phase} is not supported: pyree has no textual IR after "
            "executable-sources (its code generation goes straight to LLVM IR, PTX or SPIR-V); "
            "--iree-hal-dump-executable-files-to=DIR writes that code for each target, and "
            "pyree-dump-module shows a compiled module")
    return stage


def _stage(options: CompileOptions, stop: str, stage: str, text) -> None:
    """A stage is done: print its IR (--pyree-print-ir-after-all); stop if --compile-to says so."""
    if options.print_ir_after_all or stop == stage:
        ir = text()
        if options.print_ir_after_all:
            print(f"// -----// IR after {stage} //----- //\n{ir}", file=sys.stderr)
        if stop == stage:
            raise _Stop(ir)


def _printer(options: CompileOptions):
    """What prints a function after each flow pass that --pyree-print-ir-after(-all) names."""
    names = _print_after(options.print_ir_after)
    if not (names or options.print_ir_after_all):
        return None

    def after(name: str, function: Function) -> None:
        if options.print_ir_after_all or name in names:
            print(f"// -----// IR after {name} //----- //\n{printing.format_function(function)}",
                  file=sys.stderr)

    return after


def _print_after(names: Sequence[str] | str) -> set[str]:
    """--pyree-print-ir-after's pass names (a list, each item may be a comma list), checked."""
    given = {n.strip() for item in ([names] if isinstance(names, str) else names)
             for n in item.split(",") if n.strip()}
    unknown = sorted(given.difference(PASS_NAMES))
    if unknown:
        raise CompileError(f"unknown pass name{'s' if len(unknown) > 1 else ''} in "
                           f"--pyree-print-ir-after: {', '.join(unknown)}; the flow passes, in "
                           "order: " + ", ".join(PASS_NAMES))
    return given


def _producer() -> str:
    try:
        return f"pyree-compile {version('pyree-base-compiler')}"
    except PackageNotFoundError:
        return "pyree-compile"
