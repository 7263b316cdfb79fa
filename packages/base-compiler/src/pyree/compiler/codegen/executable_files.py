"""``--iree-hal-dump-executable-*-to``: the code of each target's executable, one file per stage
artefact, named as IREE names them (``<module>_<format>.<ext>``) so that the steps of IREE's
developer tips (``spirv-dis x.spv``, reading ``x.ptx``) apply unchanged.

    sources        <module>_<fn>_dispatch_<n>.kernel.txt   each kernel as pyree's IR prints it
    intermediates  <module>_system_elf_x86_64.codegen.ll / .optimized.ll / .s / .o   (llvm-cpu)
                   <module>_cuda_nvptx_fb.codegen.ll, <module>_rocm_hsaco_fb.codegen.ll / .o
                   <module>_vulkan_spirv_fb.spvasm       (when spirv-dis is on the PATH)
    binaries       <module>_system_elf_x86_64.so, <module>_cuda_nvptx_fb.ptx (+ .cubin with
                   ptxas), <module>_rocm_hsaco_fb.hsaco, <module>_vulkan_spirv_fb.spv

The files are the artefacts of the compile that builds the module (each backend declares them,
``interface.Artefact``), so they hold exactly its code. A stage that LLVM runs as several modules
in parallel (``common/parallel.py``) writes one file per module: ``..._part<i>.codegen.ll``. The
code of an llvm-cpu executable's variants for other CPUs has the CPU in its name:
``<module>_system_elf_x86_64_x86-64-v3.so``.
"""

from __future__ import annotations

import re
from pathlib import Path

from pyree.compiler import printing
from pyree.compiler.codegen import backend
from pyree.compiler.codegen.interface import Keep, keep_nothing
from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import Kernel
from pyree.compiler.options import CompileOptions
from pyree.compiler.output_file import write_output


def start(kernels: list[Kernel], options: CompileOptions, module_name: str):
    """Writes the kernels' sources; returns ``keep_for(backend name) -> Keep``, which writes that
    backend's artefacts as its compile produces them (``keep_nothing`` when nothing is dumped)."""
    if not options.dump_executables_to:
        return lambda name: keep_nothing
    folders = {kind: [Path(f) for f in paths] for kind, paths in options.dump_executables_to.items()}
    for folder in {f for paths in folders.values() for f in paths}:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CompileError(f"cannot create the dump folder {folder}: {e.strerror or e}") from None

    def write(kind: str, name: str, data) -> None:
        for folder in folders.get(kind, ()):
            try:
                write_output(folder / name, data)
            except OSError as e:
                raise CompileError(f"cannot write {folder / name}: {e.strerror or e}") from None

    for kernel in kernels:
        write("sources", f"{module_name}_{_dispatch_name(kernel.name)}.kernel.txt",
              printing.format_kernels([kernel]))

    def keep_for(name: str) -> Keep:
        # by extension, which also names a variant's artefact (``<form>_<cpu>.so``)
        kinds = {artefact.suffix.partition(".")[2]: artefact.kind
                 for artefact in backend(name).artefacts}

        def keep(suffix: str, data) -> None:
            form, _, ext = suffix.partition(".")
            if not isinstance(data, list):
                write(kinds[ext], f"{module_name}_{suffix}", data)
            elif len(data) == 1:
                write(kinds[ext], f"{module_name}_{suffix}", data[0])
            else:
                for i, part in enumerate(data):
                    write(kinds[ext], f"{module_name}_{form}_part{i}.{ext}", part)
        return keep
    return keep_for


def _dispatch_name(kernel_name: str) -> str:
    """``main_dispatch_3_matmul_4x8_f32`` -> ``main_dispatch_3``, IREE's dispatch name."""
    match = re.match(r"(.*?_dispatch_\d+)", kernel_name)
    return match.group(1) if match else kernel_name
