"""The ``rocm`` target (also spelled ``hip``): kernels -> AMDGPU LLVM IR (llvmlite) -> relocatable
object -> code object (hsaco) linked by ld.lld.

The kernel templates are the LLVM GPU ones cuda also uses (``codegen/common/llvm_gpu/``:
``elementwise.py``, ``reduction.py``, the tiled SIMT ``matmul.py``, ``matmul_gemv.py``) written
against ``AmdgpuTarget``; contractions use the SIMT matmul or the matrix-vector template (no
MFMA/WMMA yet). The chip comes from
``CompileOptions.rocm_target`` (``--pyree-rocm-target-chip``), resolved by
``targets.resolve_target``; the default ``gfx908`` follows IREE's ROCm guide. Math is composed
from basic arithmetic (``math_expansion``) unless ``--iree-rocm-link-bc=true`` links AMD's device
libraries (``device_libs``).

No AMD GPU has run these code objects: the tests check them structurally (ELF header, kernel
symbols and descriptors, metadata note), and ``tests/drivers/rocm/hip_on_cuda`` runs the HIP driver
(``packages/hal-rocm``) against them through a HIP-on-CUDA shim.
"""

from __future__ import annotations

from pyree.compiler._fb.Executable import ExecutableT
from pyree.compiler._fb.ExecutableFormat import ExecutableFormat
from pyree.compiler._fb.RocmExecutable import RocmExecutableT
from pyree.compiler.codegen.common.exports import export_name, gpu_export
from pyree.compiler.codegen.common.llvm_gpu import (
    dynamic,
    elementwise,
    matmul,
    matmul_gemv,
    reduction,
    scatter,
    window,
)
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Module
from pyree.compiler.codegen.interface import Artefact, Backend, Keep, choose, keep_nothing
from pyree.compiler.codegen.rocm import device_libs
from pyree.compiler.codegen.rocm.amdgpu import AmdgpuTarget
from pyree.compiler.codegen.rocm.hsaco import check_intrinsics, compile_to_object, data_layout, link
from pyree.compiler.codegen.rocm.targets import DEFAULT_TARGET, RocmTarget, resolve_target
from pyree.compiler.kernel import Kernel
from pyree.compiler.progress import kernel_progress

__all__ = ["BACKEND", "compile_executable", "generate_ir", "generate_hsaco", "resolve_target",
           "DEFAULT_TARGET"]

FORM = "rocm_hsaco_fb"  # IREE's name for the format, which the dumped files carry


# The kernel templates in priority order (interface.choose). ``scatter`` takes exactly the kernels
# with a scatter result (static) and ``dynamic`` those with run-time sizes, so no other template
# ever sees one.
TEMPLATES = (scatter, dynamic, matmul_gemv, matmul, window, reduction, elementwise)


def emit_kernel(module: Module, kernel: Kernel, name: str, target: RocmTarget):
    """Writes one kernel into ``module``; returns its Launch."""
    template, plan = choose(TEMPLATES, kernel, target)
    return template.emit(module, kernel, name, plan)


def generate_ir(kernels: list[Kernel], target: RocmTarget, link_bc: bool = False,
                advance=lambda n: None):
    """(LLVM IR text, [(export name, Launch)]) for ``kernels``, in order; ``link_bc``: math as
    calls to ocml, which ``generate_hsaco`` links; ``advance(1)`` after each kernel."""
    module = Module(data_layout(target), AmdgpuTarget(target, link_bc))
    launches = []
    for i, k in enumerate(kernels):
        name = export_name(i, k)
        launches.append((name, emit_kernel(module, k, name, target)))
        advance(1)
    check_intrinsics(module.declarations, link_bc)
    return module.text(), launches


def generate_hsaco(kernels: list[Kernel], target: RocmTarget, bc_dir: str = "", report=None,
                   keep: Keep = keep_nothing):
    """(code object bytes, [(export name, Launch)]); ``bc_dir``: link AMD's device libraries
    from that directory (``device_libs.locate``); ``report``: CompileOptions.progress; ``keep``
    is given the LLVM IR, the object and the code object. The kernels are one LLVM module (see
    codegen/common/parallel.py), so progress is the IR written."""
    advance = kernel_progress(report, "rocm", len(kernels), "kernels as LLVM IR")
    ir, launches = generate_ir(kernels, target, link_bc=bool(bc_dir), advance=advance)
    keep(f"{FORM}.codegen.ll", ir)
    if report:
        report(f"codegen for rocm: LLVM compiles them as one {target.chip} code object")
    obj = compile_to_object(ir, target, bc_dir)
    keep(f"{FORM}.o", obj)
    hsaco = link(obj)
    keep(f"{FORM}.hsaco", hsaco)
    return hsaco, launches


def target_of(options) -> RocmTarget:
    return resolve_target(options.rocm_target or DEFAULT_TARGET)


def compile_executable(kernels: list[Kernel], options, builder,
                       keep: Keep = keep_nothing) -> ExecutableT:
    target = target_of(options)
    bc_dir = device_libs.locate(options.rocm_bc_dir) if options.rocm_link_bc else ""
    hsaco, launches = generate_hsaco(kernels, target, bc_dir, options.progress, keep)
    rocm = RocmExecutableT()
    rocm.targetArch = target.arch
    rocm.codeObject = builder.add_data(hsaco)
    rocm.exports = [gpu_export(kernel, name, launch)
                    for kernel, (name, launch) in zip(kernels, launches)]
    executable = ExecutableT()
    executable.name = f"rocm_{target.chip}"
    executable.format = ExecutableFormat.rocm
    executable.rocm = rocm
    return executable


BACKEND = Backend(
    name="rocm",
    resolve_target=target_of,
    templates=TEMPLATES,
    artefacts=(Artefact(f"{FORM}.codegen.ll", "intermediates"), Artefact(f"{FORM}.o", "intermediates"),
               Artefact(f"{FORM}.hsaco", "binaries")),
    compile_executable=compile_executable,
    run_time_sizes=True,
    float64_math=lambda options: bool(options.rocm_link_bc),  # ocml has them, nothing else
    scatter_atomics=True,
)
