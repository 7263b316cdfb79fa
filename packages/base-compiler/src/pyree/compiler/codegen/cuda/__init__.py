"""The ``cuda`` target: kernels -> LLVM NVPTX (llvmlite) -> PTX, plus a cubin when ptxas exists.

``compile_executable`` picks a template per kernel: contraction (a matrix-vector product on its
own template; f16/bf16 inputs accumulated in f32 on tensor cores, wgmma on sm_90a, mma.sync on
sm_80+; else a tiled SIMT matmul), reduction, or elementwise; each export records its grid,
block and dynamic shared-memory size and its bindings. The target comes from
``CompileOptions.cuda_target`` (``--pyree-cuda-target``), resolved by ``targets.resolve_target``;
the default ``sm_80`` runs on every Ampere-or-newer GPU (PTX is JIT-compiled by the driver where
the cubin does not match).
"""

from __future__ import annotations

from pyree.compiler._fb.CudaExecutable import CudaExecutableT
from pyree.compiler._fb.DataRef import DataRefT
from pyree.compiler._fb.Executable import ExecutableT
from pyree.compiler._fb.ExecutableFormat import ExecutableFormat
from pyree.compiler.codegen.cuda import (
    elementwise,
    matmul,
    matmul_gemv,
    matmul_mma,
    matmul_wgmma,
    reduction,
)
from pyree.compiler.codegen.cuda.llvm_text import Module
from pyree.compiler.codegen.cuda.ptx import assemble, data_layout, merge, ptx_job, ptxas_path
from pyree.compiler.codegen.cuda.targets import DEFAULT_TARGET, CudaTarget, resolve_target
from pyree.compiler.codegen.exports import gpu_export
from pyree.compiler.codegen.parallel import PARTS, map_jobs
from pyree.compiler.kernel import Kernel, is_row_kernel
from pyree.compiler.progress import kernel_progress

__all__ = ["compile_executable", "generate_ptx", "resolve_target", "DEFAULT_TARGET"]

def emit_kernel(module: Module, kernel: Kernel, name: str, target: CudaTarget):
    """Writes one kernel into ``module``; returns its Launch."""
    if kernel.reduction_ranges:
        contraction = None if is_row_kernel(kernel.results) else matmul.match(kernel)
        if contraction is not None:
            if matmul_gemv.fits(kernel):
                return matmul_gemv.emit(module, kernel, name, contraction)
            warpgroups = matmul_wgmma.plan(kernel, contraction, target.arch)
            if warpgroups is not None:
                return matmul_wgmma.emit(module, kernel, name, contraction, warpgroups)
            tensor_cores = matmul_mma.plan(kernel, contraction, target.sm)
            if tensor_cores is not None:
                return matmul_mma.emit(module, kernel, name, contraction, tensor_cores)
            return matmul.emit(module, kernel, name, contraction)
        return reduction.emit(module, kernel, name)
    return elementwise.emit(module, kernel, name)


def export_name(index: int, kernel: Kernel) -> str:
    safe = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in kernel.name)
    return f"k{index}_{safe}"[:120]


def generate_ptx(kernels: list[Kernel], target: CudaTarget, advance=None):
    """(PTX text, [(export name, Launch)]) for ``kernels``, in order. LLVM compiles the kernels
    as ``PARTS`` modules on the machine's cores, whose PTX is merged into one; ``advance(n)``
    is told as each module's n kernels are done (progress.kernel_progress)."""
    module = Module(data_layout(target))
    launches = []
    for i, k in enumerate(kernels):
        name = export_name(i, k)
        launches.append((name, emit_kernel(module, k, name, target)))
    parts = module.parts(PARTS)
    done = (lambda i: advance(parts[i][1])) if advance else None
    ptx = map_jobs(ptx_job(target), [text for text, _ in parts], done)
    return merge(ptx), launches


def compile_executable(kernels: list[Kernel], options, builder) -> ExecutableT:
    target = resolve_target(options.cuda_target or DEFAULT_TARGET)
    ptx, launches = generate_ptx(kernels, target, kernel_progress(options.progress, "cuda", len(kernels)))
    cuda = CudaExecutableT()
    cuda.targetArch = target.arch
    cuda.ptx = builder.add_data(ptx.encode())
    ptxas = ptxas_path()
    if ptxas and options.progress:
        options.progress(f"codegen for cuda: assembling the {target.arch} cubin with ptxas")
    cubin = assemble(ptx, target, ptxas) if ptxas else None
    if cubin is not None:
        cuda.cubinArch = target.arch
        cuda.cubin = builder.add_data(cubin)
    else:
        cuda.cubinArch = ""
        cuda.cubin = DataRefT()
        cuda.cubin.offset, cuda.cubin.length = 0, 0
    cuda.exports = []
    for kernel, (name, launch) in zip(kernels, launches):
        cuda.exports.append(gpu_export(kernel, name, launch.grid, launch.block,
                                         launch.shared_memory_bytes))
    executable = ExecutableT()
    executable.name = f"cuda_{target.arch}"
    executable.format = ExecutableFormat.cuda
    executable.cuda = cuda
    return executable
