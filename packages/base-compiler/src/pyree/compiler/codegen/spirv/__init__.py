"""The ``vulkan-spirv`` target: kernels -> one SPIR-V module (our own emitter), one GLCompute
entry point per kernel, bindings in descriptor set 0 at binding = position.

Why our own emitter: LLVM's SPIR-V backend (in llvmlite) produces valid Vulkan shaders only
through HLSL resource intrinsics, adds capabilities the shader does not need (Int8 for binding
names), and its structurizer decides the loop shapes; emitting SPIR-V directly keeps structured
control flow, capabilities and memory layout under our control and is a few hundred lines.

``compile_executable`` picks a template per kernel: cooperative-matrix (tensor core) matmul for
plain f16 contractions on targets that have it, tiled shared-memory matmul for other
contractions, a workgroup tree for long fold reductions, 4-vector grid-stride loops for
contiguous elementwise kernels, one invocation per output point otherwise. The
``--pyree-vulkan-target`` triple (``targets.resolve_target``) sets workgroup sizes, shared memory
and which optional features (float16 arithmetic, 64-bit types) a shader may use.
"""

from __future__ import annotations

from pyree.compiler._fb.Executable import ExecutableT
from pyree.compiler._fb.ExecutableFormat import ExecutableFormat
from pyree.compiler._fb.SpirvExecutable import SpirvExecutableT
from pyree.compiler.codegen.exports import gpu_export
from pyree.compiler.codegen.llvm_cpu.exprs import unsafe_loads
from pyree.compiler.codegen.llvm_cpu.normalize import normalize
from pyree.compiler.codegen.spirv import coopmat, matmul, pointwise, reduction, vectorized
from pyree.compiler.codegen.spirv.assembler import Assembler
from pyree.compiler.codegen.spirv.shader import Launch, Shader
from pyree.compiler.codegen.spirv.targets import VulkanTarget, resolve_target
from pyree.compiler.kernel import Kernel, is_row_kernel
from pyree.compiler.progress import kernel_progress

__all__ = ["compile_executable", "generate_spirv", "resolve_target"]



def export_name(index: int, kernel: Kernel) -> str:
    safe = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in kernel.name)
    return f"k{index}_{safe}"[:120]


def emit_kernel(asm: Assembler, kernel: Kernel, name: str, target: VulkanTarget) -> Launch:
    flat = normalize(kernel)
    sh = Shader(asm, flat, target)
    unsafe = frozenset(unsafe_loads(flat))
    tiling = None if is_row_kernel(flat.results) else matmul.plan(flat, target)
    if tiling is not None and (tile := coopmat.plan(flat, tiling[0], target)) is not None:
        launch = coopmat.emit(sh, tiling[0], tile)
    elif tiling is not None:
        launch = matmul.emit(sh, unsafe, *tiling)
    elif (folds := reduction.plan(flat)) is not None:
        launch = reduction.emit(sh, unsafe, folds)
    elif vectorized.plan(flat, unsafe):
        launch = vectorized.emit(sh)
    else:
        launch = pointwise.emit(sh, unsafe)
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
    return asm.binary(), launches


def compile_executable(kernels: list[Kernel], options, builder) -> ExecutableT:
    target = resolve_target(options.vulkan_target)
    code, launches = generate_spirv(kernels, target,
                                    kernel_progress(options.progress, "vulkan-spirv", len(kernels)))
    spirv = SpirvExecutableT()
    spirv.target = target.triple
    spirv.code = builder.add_data(code)
    spirv.exports = []
    for kernel, (name, launch) in zip(kernels, launches):
        spirv.exports.append(gpu_export(kernel, name, launch.grid, launch.block,
                                         launch.shared_memory_bytes))
    executable = ExecutableT()
    executable.name = f"spirv_{target.triple.split('-')[0]}"
    executable.format = ExecutableFormat.spirv
    executable.spirv = spirv
    return executable
