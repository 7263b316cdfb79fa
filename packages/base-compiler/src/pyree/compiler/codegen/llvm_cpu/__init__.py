"""The llvm-cpu backend: kernels -> one x86-64 ELF shared object, called through cpu_kernel.h.

Each kernel becomes an exported symbol that runs a range of workgroup ids; the runtime needs no
LLVM, only the system's dynamic loader (and libm). The library also exports local-task's worker
loop (worker_loop.py), which runs those ranges on the runtime's threads.
"""

from __future__ import annotations

from pyree.compiler._fb.CpuExecutable import CpuExecutableT
from pyree.compiler._fb.CpuExport import CpuExportT
from pyree.compiler._fb.Executable import ExecutableT
from pyree.compiler._fb.ExecutableFormat import ExecutableFormat
from pyree.compiler.codegen.exports import binding_layouts
from pyree.compiler.codegen.llvm_cpu.entry import emit_export_record
from pyree.compiler.codegen.llvm_cpu.lowering import lower_kernels
from pyree.compiler.codegen.llvm_cpu.object_file import link_shared_object, optimize
from pyree.compiler.codegen.llvm_cpu.target import resolve_target
from pyree.compiler.codegen.llvm_cpu.worker_loop import emit_worker_loop
from pyree.compiler.kernel import Kernel
from pyree.compiler.module_writer import ModuleBuilder
from pyree.compiler.options import CompileOptions


def compile_executable(kernels: list[Kernel], options: CompileOptions,
                       builder: ModuleBuilder) -> ExecutableT:
    target = resolve_target(options.llvmcpu_target_cpu, options.llvmcpu_target_cpu_features,
                            options.llvmcpu_target_triple)
    module, lowered = lower_kernels(kernels, target)
    emit_worker_loop(module)
    layouts = [binding_layouts(kernel) for kernel in kernels]
    for low, layout in zip(lowered, layouts):
        emit_export_record(module, low.symbol, low.workgroup_count, layout)
    library = link_shared_object(target.machine.emit_object(optimize(str(module), target)))

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
