"""Picks the module's executable for a device's format and loads it through the HAL.

CPU executables list the ISA extensions they use (as /proc/cpuinfo flags); a missing one is
refused here with its name, since running the code would fault on an illegal instruction.
"""

from __future__ import annotations

import functools

from pyree.runtime.errors import ModuleError
from pyree.runtime.hal.device import Device, Executable
from pyree.runtime.hal.ffi import ffi
from pyree.runtime.module import Module
from pyree.runtime.module.verifier import FORMATS

BACKEND_FLAGS = {"cpu": "llvm-cpu", "cuda": "cuda", "rocm": "rocm", "spirv": "vulkan-spirv"}


@functools.cache
def host_cpu_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo") as f:  # (pathlib's import is not free)
            text = f.read()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def _target_name(executable) -> str:
    fmt = FORMATS[executable.format]
    member = getattr(executable, fmt)
    detail = {"cpu": lambda: member.format, "cuda": lambda: member.targetArch,
              "rocm": lambda: member.targetArch, "spirv": lambda: member.target}[fmt]()
    return f"{BACKEND_FLAGS[fmt]} ({detail})" if detail else BACKEND_FLAGS[fmt]


def select(module: Module, device: Device):
    """The executable for ``device``'s format; None when the module has no executables."""
    executables = module.tree.executables
    if not executables:
        return None
    for executable in executables:
        if FORMATS[executable.format] == device.executable_format:
            return executable
    have = ", ".join(_target_name(e) for e in executables)
    raise ModuleError(f"module '{module.name}' has no executable for device '{device.uri}' "
                      f"(format {device.executable_format}); it was compiled for: {have}. "
                      f"Recompile with --pyree-hal-target-backends="
                      f"{BACKEND_FLAGS.get(device.executable_format, device.executable_format)}")


def _check_cpu_features(cpu, where: str) -> None:
    missing = [f for f in cpu.cpuFeatures if f not in host_cpu_flags()]
    if missing:
        raise ModuleError(f"{where} needs CPU features this host lacks: {', '.join(missing)} "
                          f"(compiled for target CPU '{cpu.targetCpu}'); recompile for this host's "
                          f"CPU")


def load(module: Module, executable, device: Device) -> Executable:
    fmt = FORMATS[executable.format]
    member = getattr(executable, fmt)
    where = f"executable '{executable.name}' of module '{module.name}'"
    keep = []  # cffi objects that must outlive the load call

    def cstr(text: str):
        keep.append(ffi.new("char[]", text.encode()))
        return keep[-1]

    def code(ref):
        if ref.length == 0:
            return ffi.NULL, 0
        keep.append(ffi.from_buffer(module.bytes_of(ref)))
        return keep[-1], ref.length

    params = ffi.new("pyree_hal_executable_params_t *")
    params.format = cstr(fmt)
    params.alt_target, (params.alt_code, params.alt_code_length) = cstr(""), (ffi.NULL, 0)
    exports = ffi.new("pyree_hal_export_t[]", max(len(member.exports), 1))
    if fmt == "cpu":
        _check_cpu_features(member, where)
        params.target, (params.code, params.code_length) = cstr(member.format), code(member.library)
    elif fmt == "cuda":
        params.target, (params.code, params.code_length) = cstr(member.targetArch), code(member.ptx)
        params.alt_target = cstr(member.cubinArch)
        params.alt_code, params.alt_code_length = code(member.cubin)
    elif fmt == "rocm":
        params.target = cstr(member.targetArch)
        params.code, params.code_length = code(member.codeObject)
    else:
        params.target, (params.code, params.code_length) = cstr(member.target), code(member.code)
    for k, export in enumerate(member.exports):
        out = exports[k]
        lengths = ffi.new("uint64_t[]", [b.minLength for b in export.bindings])
        keep.append(lengths)
        out.binding_count, out.binding_min_lengths = len(export.bindings), lengths
        if fmt == "cpu":
            out.name, out.grid_size = cstr(export.symbol), [export.workgroupCount, 1, 1]
        else:
            out.name, out.grid_size, out.block_size = (cstr(export.name), export.gridSize,
                                                       export.blockSize)
            out.shared_memory_bytes = export.sharedMemoryBytes
    params.export_count, params.exports = len(member.exports), exports
    return device.load_executable(params)
