"""The llvm-cpu backend: kernels -> one x86-64 ELF shared object, called through cpu_kernel.h.

Each kernel becomes an exported symbol that runs a range of workgroup ids; the runtime needs no
LLVM, only the system's dynamic loader (and libm). The library also exports local-task's worker
loop (worker_loop.py), which runs those ranges on the runtime's threads. LLVM compiles the kernels
as ``PARTS`` modules on the machine's cores, whose objects are linked into the one library.
"""

from __future__ import annotations

import dataclasses
import functools

from pyree.compiler._fb.CpuExecutable import CpuExecutableT
from pyree.compiler._fb.CpuExport import CpuExportT
from pyree.compiler._fb.Executable import ExecutableT
from pyree.compiler._fb.ExecutableFormat import ExecutableFormat
from pyree.compiler.codegen.common.exports import binding_layouts, size_expr
from pyree.compiler.codegen.common.parallel import map_jobs
from pyree.compiler.codegen.interface import Artefact, Backend, Keep, keep_nothing
from pyree.compiler.codegen.llvm_cpu.entry import emit_export_record
from pyree.compiler.codegen.llvm_cpu.lowering import TEMPLATES, lower_parts
from pyree.compiler.codegen.llvm_cpu.object_file import compile_object, link_shared_object
from pyree.compiler.codegen.llvm_cpu.targets import CpuTarget, resolve_target
from pyree.compiler.codegen.llvm_cpu.worker_loop import emit_worker_loop
from pyree.compiler.kernel import Kernel
from pyree.compiler.module_writer import ModuleBuilder
from pyree.compiler.options import CompileOptions
from pyree.compiler.progress import kernel_progress
from pyree.compiler.sizes import is_static

# LLVM modules the kernels are compiled as: a fixed number, so that the library is the same on
# every build machine; sixteen keep up to sixteen cores busy and report progress in steps of at
# most a sixteenth (splitting costs no measurable compile time: each kernel is its own code).
PARTS = 16

FORM = "system_elf_x86_64"  # IREE's name for the format, which the dumped files carry


def target_of(options: CompileOptions) -> CpuTarget:
    target = resolve_target(options.llvmcpu_target_cpu, options.llvmcpu_target_cpu_features,
                            options.llvmcpu_target_triple)
    return dataclasses.replace(target, reassociate=options.llvmcpu_reassociate_fp_reductions)


def compile_executable(kernels: list[Kernel], options: CompileOptions,
                       builder: ModuleBuilder, keep: Keep = keep_nothing) -> ExecutableT:
    target = target_of(options)
    modules, lowered = lower_parts(kernels, target, PARTS)
    emit_worker_loop(modules[0])
    layouts = [binding_layouts(kernel) for kernel in kernels]
    for k, (low, layout) in enumerate(zip(lowered, layouts)):  # beside its kernel
        emit_export_record(modules[k % len(modules)], low.symbol, low.workgroup_count, layout)
    advance = kernel_progress(options.progress, "llvm-cpu", len(kernels))
    texts = [str(module) for module in modules]
    keep(f"{FORM}.codegen.ll", texts)
    listings = keep is not keep_nothing
    compiled = map_jobs(functools.partial(compile_object, target=target, listings=listings),
                        texts, lambda part: advance(len(range(part, len(kernels), len(modules)))))
    if listings:
        keep(f"{FORM}.optimized.ll", [optimized for _, optimized, _ in compiled])
        keep(f"{FORM}.s", [assembly for _, _, assembly in compiled])
    objects = [obj for obj, _, _ in compiled] if listings else compiled
    keep(f"{FORM}.o", objects)
    library = link_shared_object(objects)
    keep(f"{FORM}.so", library)

    cpu = CpuExecutableT()
    cpu.format = "elf-x86_64"
    cpu.targetCpu = target.cpu
    cpu.cpuFeatures = target.cpuinfo_flags
    cpu.library = builder.add_data(library)
    cpu.exports = []
    for low, layout in zip(lowered, layouts):
        export = CpuExportT()
        export.symbol = low.symbol
        if is_static(low.workgroup_count):
            export.workgroupCount = low.workgroup_count
        else:  # counted per dispatch from the push constants (no static bound)
            export.workgroupCount = 0
            export.workgroupCountExpr = size_expr(low.workgroup_count)
        export.bindings = layout
        cpu.exports.append(export)

    exe = ExecutableT()
    exe.name = "llvm_cpu"
    exe.format = ExecutableFormat.cpu
    exe.cpu = cpu
    return exe


BACKEND = Backend(
    name="llvm-cpu",
    resolve_target=target_of,
    templates=TEMPLATES,
    artefacts=(Artefact(f"{FORM}.codegen.ll", "intermediates"),
               Artefact(f"{FORM}.optimized.ll", "intermediates"),
               Artefact(f"{FORM}.s", "intermediates"),
               Artefact(f"{FORM}.o", "intermediates"),
               Artefact(f"{FORM}.so", "binaries")),
    compile_executable=compile_executable,
    run_time_sizes=True,
)
