"""The ``cuda`` target: kernels -> LLVM NVPTX (llvmlite) -> PTX, plus a cubin when ptxas exists.

``compile_executable`` picks a template per kernel: contraction (a matrix-vector product on its
own template; f16/bf16 inputs accumulated in f32 on tensor cores, wgmma on sm_90a, mma.sync on
sm_80+; f32 inputs on mma.sync's TF32 form where ``--pyree-cuda-f32-matmul`` says tf32 or 3xtf32;
else a tiled SIMT matmul), reduction, or elementwise; each export records its grid, block and
dynamic shared-memory size and its bindings. The target comes from ``CompileOptions.cuda_target``
(``--pyree-cuda-target``) and ``cuda_f32_matmul``, resolved by ``targets.resolve_target``;
the default ``sm_80`` runs on every Ampere-or-newer GPU (PTX is JIT-compiled by the driver where
the cubin does not match).
"""

from __future__ import annotations

from pyree.compiler._fb.CudaExecutable import CudaExecutableT
from pyree.compiler._fb.DataRef import DataRefT
from pyree.compiler._fb.Executable import ExecutableT
from pyree.compiler._fb.ExecutableFormat import ExecutableFormat
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
from pyree.compiler.codegen.common.parallel import PARTS, map_jobs
from pyree.compiler.codegen.cuda import (
    attention,
    attention_mma,
    matmul_mma,
    matmul_wgmma,
    run_time_mma,
)
from pyree.compiler.codegen.cuda.nvptx import NVPTX
from pyree.compiler.codegen.cuda.ptx import assemble, data_layout, merge, ptx_job, ptxas_path
from pyree.compiler.codegen.cuda.targets import DEFAULT_TARGET, CudaTarget, resolve_target
from pyree.compiler.codegen.interface import Artefact, Backend, Keep, choose, keep_nothing
from pyree.compiler.kernel import Kernel
from pyree.compiler.progress import kernel_progress

__all__ = ["BACKEND", "compile_executable", "generate_ptx", "resolve_target", "DEFAULT_TARGET"]

FORM = "cuda_nvptx_fb"  # IREE's name for the format, which the dumped files carry

# The kernel templates in priority order (interface.choose). ``attention_mma`` takes the attention
# kernels that fit tensor cores, ``attention`` every other attention kernel, ``scatter`` the
# kernels with a scatter result (static), ``run_time_mma`` the tensor-core contractions with
# run-time sizes and ``dynamic`` every other kernel with them, so no later template sees one.
TEMPLATES = (attention_mma, attention, scatter, run_time_mma, dynamic, matmul_gemv, matmul_wgmma,
             matmul_mma, matmul, window, reduction, elementwise)


def emit_kernel(module: Module, kernel: Kernel, name: str, target: CudaTarget):
    """Writes one kernel into ``module``; returns its Launch."""
    template, plan = choose(TEMPLATES, kernel, target)
    return template.emit(module, kernel, name, plan)


def generate_ptx(kernels: list[Kernel], target: CudaTarget, advance=None,
                 keep: Keep = keep_nothing):
    """(PTX text, [(export name, Launch)]) for ``kernels``, in order. LLVM compiles the kernels
    as ``PARTS`` modules on the machine's cores, whose PTX is merged into one; ``advance(n)``
    is told as each module's n kernels are done (progress.kernel_progress); ``keep`` is given
    the modules' LLVM IR and the PTX."""
    module = Module(data_layout(target), NVPTX)
    launches = []
    for i, k in enumerate(kernels):
        name = export_name(i, k)
        launches.append((name, emit_kernel(module, k, name, target)))
    parts = module.parts(PARTS)
    keep(f"{FORM}.codegen.ll", [text for text, _ in parts])
    done = (lambda i: advance(parts[i][1])) if advance else None
    ptx = merge(map_jobs(ptx_job(target), [text for text, _ in parts], done))
    keep(f"{FORM}.ptx", ptx)
    return ptx, launches


def target_of(options) -> CudaTarget:
    return resolve_target(options.cuda_target or DEFAULT_TARGET, options.cuda_f32_matmul)


def compile_executable(kernels: list[Kernel], options, builder,
                       keep: Keep = keep_nothing) -> ExecutableT:
    target = target_of(options)
    ptx, launches = generate_ptx(kernels, target,
                                 kernel_progress(options.progress, "cuda", len(kernels)), keep)
    cuda = CudaExecutableT()
    cuda.targetArch = target.arch
    cuda.ptx = builder.add_data(ptx.encode())
    ptxas = ptxas_path()
    if ptxas and options.progress:
        options.progress(f"codegen for cuda: assembling the {target.arch} cubin with ptxas")
    cubin = assemble(ptx, target, ptxas) if ptxas else None
    if cubin is not None:
        keep(f"{FORM}.cubin", cubin)
        cuda.cubinArch = target.arch
        cuda.cubin = builder.add_data(cubin)
    else:
        cuda.cubinArch = ""
        cuda.cubin = DataRefT()
        cuda.cubin.offset, cuda.cubin.length = 0, 0
    cuda.exports = []
    for kernel, (name, launch) in zip(kernels, launches):
        cuda.exports.append(gpu_export(kernel, name, launch))
    executable = ExecutableT()
    executable.name = f"cuda_{target.arch}"
    executable.format = ExecutableFormat.cuda
    executable.cuda = cuda
    return executable


BACKEND = Backend(
    name="cuda",
    resolve_target=target_of,
    templates=TEMPLATES,
    artefacts=(Artefact(f"{FORM}.codegen.ll", "intermediates"), Artefact(f"{FORM}.ptx", "binaries"),
               Artefact(f"{FORM}.cubin", "binaries")),
    compile_executable=compile_executable,
    implicit_gemm=True,
    run_time_sizes=True,
    float64_math=lambda options: False,  # NVPTX links no libdevice; the expansions are f32
    fused_attention=True,
    run_time_attention=lambda options: attention_mma.taker(target_of(options)),
    scatter_atomics=True,
)
