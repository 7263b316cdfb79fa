"""The llvm-cpu backend: kernels -> one x86-64 ELF shared object, called through cpu_kernel.h.

Each kernel becomes an exported symbol that runs a range of workgroup ids; the runtime needs no
LLVM, only the system's dynamic loader (and libm). The library also exports local-task's worker
loop (worker_loop.py), which runs those ranges on the runtime's threads. LLVM compiles the kernels
as ``PARTS`` modules on the machine's cores, whose objects are linked into the one library.
"""

from __future__ import annotations

import functools

from pyree.compiler._fb.CpuExecutable import CpuExecutableT
from pyree.compiler._fb.CpuExport import CpuExportT
from pyree.compiler._fb.Executable import ExecutableT
from pyree.compiler._fb.ExecutableFormat import ExecutableFormat
from pyree.compiler.codegen.exports import binding_layouts
from pyree.compiler.codegen.llvm_cpu.entry import emit_export_record
from pyree.compiler.codegen.llvm_cpu.lowering import lower_parts
from pyree.compiler.codegen.llvm_cpu.object_file import compile_object, link_shared_object
from pyree.compiler.codegen.llvm_cpu.target import resolve_target
from pyree.compiler.codegen.llvm_cpu.worker_loop import emit_worker_loop
from pyree.compiler.codegen.parallel import map_jobs
from pyree.compiler.kernel import Kernel
from pyree.compiler.module_writer import ModuleBuilder
from pyree.compiler.options import CompileOptions
from pyree.compiler.progress import kernel_progress

# LLVM modules the kernels are compiled as: a fixed number, so that the library is the same on
# every build machine; sixteen keep up to sixteen cores busy and report progress in steps of at
# most a sixteenth (splitting costs no measurable compile time: each kernel is its own code).
PARTS = 16


def compile_executable(kernels: list[Kernel], options: CompileOptions,
                       builder: ModuleBuilder) -> ExecutableT:
    target = resolve_target(options.llvmcpu_target_cpu, options.llvmcpu_target_cpu_features,
                            options.llvmcpu_target_triple)
    modules, lowered = lower_parts(kernels, target, PARTS)
    emit_worker_loop(modules[0])
    layouts = [binding_layouts(kernel) for kernel in kernels]
    for k, (low, layout) in enumerate(zip(lowered, layouts)):  # beside its kernel
        emit_export_record(modules[k % len(modules)], low.symbol, low.workgroup_count, layout)
    advance = kernel_progress(options.progress, "llvm-cpu", len(kernels))
    objects = map_jobs(functools.partial(compile_object, target=target),
                       [str(module) for module in modules],
                       lambda part: advance(len(range(part, len(kernels), len(modules)))))
    library = link_shared_object(objects)

    cpu = CpuExecutableT()
    cpu.format = "elf-x86_64"
    cpu.targetCpu = target.cpu
    cpu.cpuFeatures = target.cpuinfo_flags
    cpu.library = builder.add_data(library)
    cpu.exports = []
    for low, layout in zip(lowered, layouts):
        export = CpuExportT()
        export.symbol = low.symbol
        export.workgroupCount = low.workgroup_count
        export.bindings = layout
        cpu.exports.append(export)

    exe = ExecutableT()
    exe.name = "llvm_cpu"
    exe.format = ExecutableFormat.cpu
    exe.cpu = cpu
    return exe
