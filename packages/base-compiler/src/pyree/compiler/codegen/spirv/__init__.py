"""The ``vulkan-spirv`` target: kernels -> one SPIR-V module (our own emitter), one GLCompute
entry point per kernel, bindings in descriptor set 0 at binding = position.

Why our own emitter: LLVM's SPIR-V backend (in llvmlite) produces valid Vulkan shaders only
through HLSL resource intrinsics, adds capabilities the shader does not need (Int8 for binding
names), and its structurizer decides the loop shapes; emitting SPIR-V directly keeps structured
control flow, capabilities and memory layout under our control and is a few hundred lines.

``compile_executable`` picks a template per kernel: atomics for scatter kernels
(``scatter.py``), cooperative-matrix (tensor core) matmul for plain f16 contractions on targets
that have it, tiled shared-memory matmul for other contractions, a workgroup tree for long fold
reductions, sliding windows of 5 x 5 taps and more staged in workgroup memory (``window.py``),
4-vector grid-stride loops for contiguous elementwise kernels, one invocation per output point
otherwise; a kernel with run-time sizes takes one of these with its extents read
from push constants (``dynamic.py``). The ``--pyree-vulkan-target`` triple
(``targets.resolve_target``) sets workgroup sizes, shared memory and which optional features
(float16 arithmetic, 64-bit types) a shader may use.
"""

from __future__ import annotations

import shutil
import subprocess

from pyree.compiler._fb.Executable import ExecutableT
from pyree.compiler._fb.ExecutableFormat import ExecutableFormat
from pyree.compiler._fb.SpirvExecutable import SpirvExecutableT
from pyree.compiler.codegen.common.exports import Launch, export_name, gpu_export
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.codegen.interface import Artefact, Backend, Keep, choose, keep_nothing
from pyree.compiler.codegen.spirv import (
    coopmat,
    dynamic,
    elementwise,
    matmul,
    reduction,
    scatter,
    vectorized,
    window,
)
from pyree.compiler.codegen.spirv.assembler import Assembler
from pyree.compiler.codegen.spirv.shader import Shader
from pyree.compiler.codegen.spirv.targets import VulkanTarget, resolve_target
from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import Kernel
from pyree.compiler.progress import kernel_progress

__all__ = ["BACKEND", "compile_executable", "generate_spirv", "resolve_target"]

FORM = "vulkan_spirv_fb"  # IREE's name for the format, which the dumped files carry


# The kernel templates in priority order (interface.choose); each plans for the normalized kernel.
TEMPLATES = (scatter, dynamic, coopmat, matmul, reduction, vectorized, elementwise)


def emit_kernel(asm: Assembler, kernel: Kernel, name: str, target: VulkanTarget) -> Launch:
    staged = window.plan_flat(kernel, target)  # before the other templates: see window.py
    if staged is not None:
        flat, plan = staged
        template = window
    else:
        flat = normalize(kernel)
        template, plan = choose(TEMPLATES, flat, target)
    sh = Shader(asm, flat, target)
    launch = template.emit(sh, plan)
    sh.finish(name, launch.block)
    return launch


def generate_spirv(kernels: list[Kernel], target: VulkanTarget,
                   advance=lambda n: None) -> tuple[bytes, list]:
    """(SPIR-V binary, [(entry point name, Launch)]) for ``kernels``, in order; ``advance(1)``
    after each kernel (progress.kernel_progress)."""
    asm = Assembler()
    launches = []
    for i, k in enumerate(kernels):
        name = export_name(i, k)
        launches.append((name, emit_kernel(asm, k, name, target)))
        advance(1)
    shared = asm.shared_bytes()
    if shared > target.max_shared_memory_bytes:  # (assembler.shared_array: a driver may hang)
        raise CompileError(
            f"the module's {len(kernels)} vulkan-spirv kernels need {shared} bytes of workgroup "
            f"memory together, past the {target.max_shared_memory_bytes} of target "
            f"'{target.triple}' (a driver may reserve every kernel's arrays for each kernel); "
            "compile fewer kinds of products into one module or a target with more")
    return asm.binary(), launches


def target_of(options) -> VulkanTarget:
    return resolve_target(options.vulkan_target)


def compile_executable(kernels: list[Kernel], options, builder,
                       keep: Keep = keep_nothing) -> ExecutableT:
    target = target_of(options)
    code, launches = generate_spirv(kernels, target,
                                    kernel_progress(options.progress, "vulkan-spirv", len(kernels)))
    if keep is not keep_nothing:
        _keep_spirv(code, keep)
    spirv = SpirvExecutableT()
    spirv.target = target.triple
    spirv.code = builder.add_data(code)
    spirv.exports = []
    for kernel, (name, launch) in zip(kernels, launches):
        spirv.exports.append(gpu_export(kernel, name, launch))
    executable = ExecutableT()
    executable.name = f"spirv_{target.triple.split('-')[0]}"
    executable.format = ExecutableFormat.spirv
    executable.spirv = spirv
    return executable


def _keep_spirv(code: bytes, keep: Keep) -> None:
    """The binary, and its disassembly when spirv-dis is on the PATH (the emitter writes the
    binary directly, so the text form is read back from it)."""
    spirv_dis = shutil.which("spirv-dis")
    if spirv_dis:
        text = subprocess.run([spirv_dis, "-"], input=code, capture_output=True, check=False)
        if text.returncode == 0:
            keep(f"{FORM}.spvasm", text.stdout.decode())
    keep(f"{FORM}.spv", code)


BACKEND = Backend(
    name="vulkan-spirv",
    resolve_target=target_of,
    templates=TEMPLATES,
    artefacts=(Artefact(f"{FORM}.spvasm", "intermediates"), Artefact(f"{FORM}.spv", "binaries")),
    compile_executable=compile_executable,
    run_time_sizes=True,
    float64=lambda options: target_of(options).float64,
    scatter_atomics=True,
    small_sides_tiled=True,
    scatter_atomic_dtypes=scatter.DTYPES,
    dispatch_cost=4.0,
)
