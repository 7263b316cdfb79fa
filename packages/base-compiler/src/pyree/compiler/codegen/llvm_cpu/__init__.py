"""The llvm-cpu backend: kernels -> x86-64 ELF shared objects, called through cpu_kernel.h.

Each kernel becomes an exported symbol that runs a range of workgroup ids; the runtime needs no
LLVM, only the system's dynamic loader (and libm). The library also exports local-task's worker
loop (worker_loop.py), which runs those ranges on the runtime's threads. LLVM compiles the kernels
as ``PARTS`` modules on the machine's cores, whose objects are linked into the one library.

The executable holds one library per target CPU (``targets_of``): by default the baseline and
AVX2 code, and where a kernel is a bf16 contraction that AMX tiles run (amx.py), Sapphire
Rapids' code too; the most portable is the executable's own table and the others its
``variants``, of which the runtime loads the best the host runs (docs/DESIGN.md). Every CPU's
parts are one batch of code-generation jobs, so the cores stay busy across CPUs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

from pyree.compiler._fb.CpuExecutable import CpuExecutableT
from pyree.compiler._fb.CpuExport import CpuExportT
from pyree.compiler._fb.Executable import ExecutableT
from pyree.compiler._fb.ExecutableFormat import ExecutableFormat
from pyree.compiler.codegen.common.exports import binding_layouts, size_expr
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.codegen.common.parallel import map_jobs
from pyree.compiler.codegen.interface import Artefact, Backend, Keep, keep_nothing
from pyree.compiler.codegen.llvm_cpu import amx
from pyree.compiler.codegen.llvm_cpu.entry import emit_export_record
from pyree.compiler.codegen.llvm_cpu.lowering import TEMPLATES, LoweredKernel, lower_part, part_count
from pyree.compiler.codegen.llvm_cpu.object_file import compile_object, link_shared_object
from pyree.compiler.codegen.llvm_cpu.targets import CpuTarget, resolve_target, resolve_variants
from pyree.compiler.codegen.llvm_cpu.worker_loop import emit_worker_loop
from pyree.compiler.kernel import Kernel
from pyree.compiler.module_writer import ModuleBuilder
from pyree.compiler.options import DEFAULT_LLVMCPU_VARIANTS, CompileOptions
from pyree.compiler.progress import kernel_progress
from pyree.compiler.sizes import is_static

# LLVM modules the kernels are compiled as: a fixed number, so that the library is the same on
# every build machine; sixteen keep up to sixteen cores busy and report progress in steps of at
# most a sixteenth (splitting costs no measurable compile time: each kernel is its own code).
PARTS = 16

FORM = "system_elf_x86_64"  # IREE's name for the format, which the dumped files carry

# The CPU whose code a default build adds for a bf16 contraction that amx.py takes: its AMX
# tiles ran such matmuls 3-5x faster than the AVX2 code (BENCHMARKS.md, issue 31 item 5).
AMX_CPU = "sapphirerapids"


def targets_of(options: CompileOptions, kernels: Sequence[Kernel] = ()) -> tuple[CpuTarget, ...]:
    """The CPUs the executable of ``kernels`` carries code for, most portable first: the one
    target CPU (or features) chosen, else the --pyree-llvmcpu-variants, by default
    DEFAULT_LLVMCPU_VARIANTS and AMX_CPU where a kernel runs on AMX tiles."""
    cpu, features = options.llvmcpu_target_cpu, options.llvmcpu_target_cpu_features
    variants = options.llvmcpu_variants
    if variants is None:
        variants = [] if cpu or features else list(DEFAULT_LLVMCPU_VARIANTS)
        amx_cpu = dataclasses.replace(resolve_target(AMX_CPU),
                                      reassociate=options.llvmcpu_reassociate_fp_reductions)
        if variants and _takes_amx(kernels, amx_cpu):
            variants.append(AMX_CPU)
    targets = resolve_variants(cpu, features, variants, options.llvmcpu_target_triple)
    return tuple(dataclasses.replace(t, reassociate=options.llvmcpu_reassociate_fp_reductions)
                 for t in targets)


def _takes_amx(kernels: Sequence[Kernel], target: CpuTarget) -> bool:
    """Some kernel is a bf16 contraction that amx.py lowers for ``target``."""
    return amx.FEATURES <= target.features and any(
        amx.plan(normalize(k), target) is not None for k in kernels
        if k.reduction_ranges and any(b.dtype == "bf16" for b in k.bindings))


def compile_executable(kernels: list[Kernel], options: CompileOptions,
                       builder: ModuleBuilder, keep: Keep = keep_nothing) -> ExecutableT:
    targets = targets_of(options, kernels)
    jobs = _Jobs(kernels, targets, [binding_layouts(kernel) for kernel in kernels])
    listings = keep is not keep_nothing
    advance = kernel_progress(options.progress, "llvm-cpu", len(kernels))
    finished = [0] * jobs.parts

    def done(job: int) -> None:
        part = job // len(targets)
        finished[part] += 1
        if finished[part] == len(targets):
            advance(len(range(part, len(kernels), jobs.parts)))

    compiled = map_jobs(functools.partial(_compile_part, listings=listings), jobs, done)
    tables = []
    for t, target in enumerate(targets):
        form = FORM if t == 0 else f"{FORM}_{target.cpu}"  # the most portable: IREE's name
        results = compiled[t::len(targets)]
        keep(f"{form}.codegen.ll", jobs.texts[t])
        if listings:
            keep(f"{form}.optimized.ll", [optimized for _, optimized, _ in results])
            keep(f"{form}.s", [assembly for _, _, assembly in results])
        objects = [obj for obj, _, _ in results] if listings else results
        keep(f"{form}.o", objects)
        library = link_shared_object(objects)
        keep(f"{form}.so", library)
        tables.append(_cpu_table(target, builder.add_data(library), jobs.lowered[t], jobs.layouts,
                                 _takes_amx(kernels, target)))
    tables[0].variants = tables[1:] or None

    exe = ExecutableT()
    exe.name = "llvm_cpu"
    exe.format = ExecutableFormat.cpu
    exe.cpu = tables[0]
    return exe


class _Jobs(Sequence):
    """The code-generation jobs, (LLVM IR, target CPU): part p of every target, then part p + 1
    (a kernel is done once every CPU's code for it is). A job's IR is built when ``map_jobs``
    asks for it, so that the workers compile the first parts while this process lowers the
    next; once every job has been asked for, ``texts`` and ``lowered`` hold every target's."""

    def __init__(self, kernels: list[Kernel], targets: tuple[CpuTarget, ...], layouts: list):
        self.kernels, self.targets, self.layouts = kernels, targets, layouts
        self.parts = part_count(kernels, PARTS)
        self.texts = [[""] * self.parts for _ in targets]  # per target: its parts' LLVM IR
        self.lowered: list[list[LoweredKernel]] = [[None] * len(kernels) for _ in targets]

    def __len__(self) -> int:
        return self.parts * len(self.targets)

    def __getitem__(self, job: int) -> tuple[str, CpuTarget]:
        if not 0 <= job < len(self):
            raise IndexError(job)
        p, t = divmod(job, len(self.targets))
        module, lowered = lower_part(self.kernels, self.targets[t], self.parts, p)
        if p == 0:
            emit_worker_loop(module)
        for k, entry in zip(range(p, len(self.kernels), self.parts), lowered):
            emit_export_record(module, entry.symbol, entry.workgroup_count, self.layouts[k])
        self.lowered[t][p::self.parts] = lowered
        self.texts[t][p] = str(module)
        return self.texts[t][p], self.targets[t]


def _compile_part(job: tuple[str, CpuTarget], listings: bool):
    """One code-generation job: one part's LLVM IR for one target CPU (object_file.py)."""
    text, target = job
    return compile_object(text, target, listings)


def _cpu_table(target: CpuTarget, library, lowered: list[LoweredKernel],
               layouts: list, amx_code: bool) -> CpuExecutableT:
    """The executable's table of one target CPU's library: export k runs kernel k. AMX is
    listed among the features it needs only where its code uses the tiles (``amx_code``): a
    host whose kernel withholds them (Linux before 5.16) still loads other code for an AMX CPU."""
    cpu = CpuExecutableT()
    cpu.format = "elf-x86_64"
    cpu.targetCpu = target.cpu
    cpu.cpuFeatures = [f for f in target.cpuinfo_flags if amx_code or not f.startswith("amx")]
    cpu.library = library
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
    return cpu


BACKEND = Backend(
    name="llvm-cpu",
    resolve_target=targets_of,
    templates=TEMPLATES,
    artefacts=(Artefact(f"{FORM}.codegen.ll", "intermediates"),
               Artefact(f"{FORM}.optimized.ll", "intermediates"),
               Artefact(f"{FORM}.s", "intermediates"),
               Artefact(f"{FORM}.o", "intermediates"),
               Artefact(f"{FORM}.so", "binaries")),
    compile_executable=compile_executable,
    run_time_sizes=True,
    scatter_atomics=True,
    line_walks=True,
)
