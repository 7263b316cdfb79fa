"""``--iree-hal-dump-executable-files-to``: each dispatch's code for each target, one file per
form, named as IREE names them (``module_<fn>_dispatch_<n>_<format>.<ext>``) so that the steps
of IREE's developer tips (``spirv-dis x.spv``, reading ``x.ptx``) apply unchanged.

    sources        <stem>.kernel.txt                   the kernel as pyree's IR prints it
    intermediates  <stem>_system_elf_x86_64.codegen.ll / .optimized.ll / .s     (llvm-cpu)
                   <stem>_cuda_nvptx_fb.codegen.ll, <stem>_rocm_hsaco_fb.codegen.ll
                   <stem>_vulkan_spirv_fb.spvasm       (when spirv-dis is on the PATH)
    binaries       <stem>_system_elf_x86_64.so, <stem>_cuda_nvptx_fb.ptx (+ .cubin with ptxas),
                   <stem>_rocm_hsaco_fb.hsaco, <stem>_vulkan_spirv_fb.spv

Each dispatch is compiled again on its own through the backend's own functions, so a file holds
exactly one kernel (the module's executables hold all of them); this costs a second code
generation, only when the flag is given.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from pyree.compiler import printing
from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import Kernel
from pyree.compiler.options import CompileOptions
from pyree.compiler.output_file import write_output


def write_executable_files(kernels: list[Kernel], options: CompileOptions, module_name: str) -> None:
    """Writes the files of every kind in ``options.dump_executables_to`` (kind -> folders)."""
    folders = {kind: [Path(f) for f in paths] for kind, paths in
               options.dump_executables_to.items()}
    for folder in {f for paths in folders.values() for f in paths}:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CompileError(f"cannot create the dump folder {folder}: {e.strerror or e}") from None
    for kernel in kernels:
        stem = f"{module_name}_{_dispatch_name(kernel.name)}"
        files = {("sources", f"{stem}.kernel.txt"): printing.format_kernels([kernel])}
        for backend in options.target_backends:
            for kind, suffix, data in _TARGET_FILES[backend](kernel, options):
                files[(kind, f"{stem}_{suffix}")] = data
        for (kind, name), data in files.items():
            for folder in folders.get(kind, ()):
                try:
                    write_output(folder / name, data)
                except OSError as e:
                    raise CompileError(f"cannot write {folder / name}: {e.strerror or e}") from None


def _dispatch_name(kernel_name: str) -> str:
    """``main_dispatch_3_matmul_4x8_f32`` -> ``main_dispatch_3``, IREE's dispatch name."""
    match = re.match(r"(.*?_dispatch_\d+)", kernel_name)
    return match.group(1) if match else kernel_name


def _llvm_cpu(kernel: Kernel, options: CompileOptions):
    from pyree.compiler.codegen.llvm_cpu.lowering import lower_kernels
    from pyree.compiler.codegen.llvm_cpu.object_file import link_shared_object, optimize
    from pyree.compiler.codegen.llvm_cpu.target import resolve_target

    target = resolve_target(options.llvmcpu_target_cpu, options.llvmcpu_target_cpu_features,
                            options.llvmcpu_target_triple)
    module, _ = lower_kernels([kernel], target)
    optimized = optimize(str(module), target)
    form = "system_elf_x86_64"
    return [("intermediates", f"{form}.codegen.ll", str(module)),
            ("intermediates", f"{form}.optimized.ll", str(optimized)),
            ("intermediates", f"{form}.s", target.machine.emit_assembly(optimized)),
            ("binaries", f"{form}.so", link_shared_object([target.machine.emit_object(optimized)]))]


def _cuda(kernel: Kernel, options: CompileOptions):
    from pyree.compiler.codegen.cuda import DEFAULT_TARGET, emit_kernel, export_name
    from pyree.compiler.codegen.cuda.llvm_text import Module
    from pyree.compiler.codegen.cuda.ptx import assemble, compile_to_ptx, data_layout, ptxas_path
    from pyree.compiler.codegen.cuda.targets import resolve_target

    target = resolve_target(options.cuda_target or DEFAULT_TARGET)
    module = Module(data_layout(target))
    emit_kernel(module, kernel, export_name(0, kernel), target)
    ptx = compile_to_ptx(module.text(), target)
    files = [("intermediates", "cuda_nvptx_fb.codegen.ll", module.text()),
             ("binaries", "cuda_nvptx_fb.ptx", ptx)]
    ptxas = ptxas_path()
    cubin = assemble(ptx, target, ptxas) if ptxas else None
    if cubin is not None:
        files.append(("binaries", "cuda_nvptx_fb.cubin", cubin))
    return files


def _rocm(kernel: Kernel, options: CompileOptions):
    from pyree.compiler.codegen.rocm import DEFAULT_TARGET, device_libs, generate_ir
    from pyree.compiler.codegen.rocm.hsaco import compile_to_object, link
    from pyree.compiler.codegen.rocm.targets import resolve_target

    target = resolve_target(options.rocm_target or DEFAULT_TARGET)
    bc_dir = device_libs.locate(options.rocm_bc_dir) if options.rocm_link_bc else ""
    ir, _ = generate_ir([kernel], target, link_bc=bool(bc_dir))
    return [("intermediates", "rocm_hsaco_fb.codegen.ll", ir),
            ("binaries", "rocm_hsaco_fb.hsaco", link(compile_to_object(ir, target, bc_dir)))]


def _vulkan_spirv(kernel: Kernel, options: CompileOptions):
    from pyree.compiler.codegen.spirv import generate_spirv
    from pyree.compiler.codegen.spirv.targets import resolve_target

    code, _ = generate_spirv([kernel], resolve_target(options.vulkan_target))
    files = [("binaries", "vulkan_spirv_fb.spv", code)]
    spirv_dis = shutil.which("spirv-dis")
    if spirv_dis:
        text = subprocess.run([spirv_dis, "-"], input=code, capture_output=True, check=False)
        if text.returncode == 0:
            files.append(("intermediates", "vulkan_spirv_fb.spvasm", text.stdout.decode()))
    return files


_TARGET_FILES = {"llvm-cpu": _llvm_cpu, "cuda": _cuda, "rocm": _rocm, "vulkan-spirv": _vulkan_spirv}
