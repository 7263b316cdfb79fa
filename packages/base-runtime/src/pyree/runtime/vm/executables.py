"""Picks the module's executable for a device's format and loads it through the HAL.

CPU executables list the ISA extensions they use (as /proc/cpuinfo flags); a missing one is
refused here with its name, since running the code would fault on an illegal instruction. A CPU
executable may carry variants (schema 1.7: the same kernels for other CPUs); the one loaded is
the one with the most extensions that this host has all of, or the one ``PYREE_LLVMCPU_VARIANT``
names (its target CPU, ``generic`` for baseline x86-64), refused by name where the module has no
such variant or the host lacks what it needs. On Linux a process may use AMX's tile registers
only once it has asked the kernel for them: ``host_cpu_flags`` asks, and leaves AMX out of the
host's extensions where the answer is no (the AMX code would then die of SIGILL).
"""

from __future__ import annotations

import functools
import os

from pyree.runtime.errors import ModuleError
from pyree.runtime.hal.device import Device, Executable
from pyree.runtime.hal.ffi import ffi
from pyree.runtime.module import Module
from pyree.runtime.module.verifier import FORMATS

BACKEND_FLAGS = {"cpu": "llvm-cpu", "cuda": "cuda", "rocm": "rocm", "spirv": "vulkan-spirv"}

# Names the CPU variant to load instead of the best one the host runs (for tests and debugging).
VARIANT_VARIABLE = "PYREE_LLVMCPU_VARIANT"


@functools.cache
def host_cpu_flags() -> frozenset[str]:
    """The ISA extensions this process may use, as /proc/cpuinfo spells them."""
    try:
        with open("/proc/cpuinfo") as f:  # (pathlib's import is not free)
            return usable_flags(f.read(), request_amx)
    except OSError:
        return frozenset()


def usable_flags(cpuinfo: str, request_amx) -> frozenset[str]:
    """The flags of ``cpuinfo``, less AMX's where the CPU has it but ``request_amx()`` is
    refused."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags = frozenset(value.split())
            if "amx_tile" in flags and not request_amx():
                flags = frozenset(f for f in flags if not f.startswith("amx"))
            return flags
    return frozenset()


ARCH_REQ_XCOMP_PERM = 0x1023   # arch_prctl code: permission for a dynamically enabled state
XFEATURE_XTILEDATA = 18        # the AMX tile data state
SYS_ARCH_PRCTL = 158           # x86-64


def request_amx() -> bool:
    """Asks Linux for the AMX tile state for this process (all its threads); True if granted."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        args = (ctypes.c_long(a) for a in (SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA))
        return libc.syscall(*args) == 0
    except (OSError, AttributeError):
        return False


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


def _check_cpu_features(cpu, where: str, advice: str = "recompile for this host's CPU") -> None:
    missing = [f for f in cpu.cpuFeatures if f not in host_cpu_flags()]
    if missing:
        raise ModuleError(f"{where} needs CPU features this host lacks: {', '.join(missing)} "
                          f"(compiled for target CPU '{cpu.targetCpu}'); {advice}")


def cpu_variant(cpu, where: str):
    """The table of ``cpu`` (a verified CpuExecutable) or of one of its variants whose code this
    host loads: the one named by $PYREE_LLVMCPU_VARIANT, else the one with the most CPU features
    that the host has all of (the first of a tie). Raises ModuleError where none can run here."""
    variants = [cpu, *(cpu.variants or [])]
    name = os.environ.get(VARIANT_VARIABLE, "").strip()
    if name:
        names = {name, "x86-64"} if name == "generic" else {name}
        named = [v for v in variants if v.targetCpu in names]
        if not named:
            raise ModuleError(f"{VARIANT_VARIABLE}={name}: {where} has no code for that CPU; its "
                              f"variants: {', '.join(v.targetCpu for v in variants)}")
        _check_cpu_features(named[0], f"{VARIANT_VARIABLE}={name}: {where}",
                            f"unset {VARIANT_VARIABLE} to load the best variant this host runs")
        return named[0]
    runnable = [v for v in variants if host_cpu_flags().issuperset(v.cpuFeatures)]
    if not runnable:
        _check_cpu_features(cpu, where)  # raises, naming what the most portable code needs
    return max(runnable, key=lambda v: len(v.cpuFeatures))


def code_table(module: Module, executable):
    """The table of ``executable`` whose code a device loads, and whose exports (grids) it
    runs: its format's member, or for a CPU executable the variant ``cpu_variant`` picks."""
    member = getattr(executable, FORMATS[executable.format])
    if FORMATS[executable.format] != "cpu":
        return member
    return cpu_variant(member, f"executable '{executable.name}' of module '{module.name}'")


def precheck(module: Module) -> None:
    """Runs the checks of the module's SPIR-V that the Vulkan driver runs at load
    (hal/images/spirv.py, which remembers what passed), for ``load_module`` to run while the
    device starts on its thread: where the device takes longer, the check then costs the load
    nothing. A failure is the driver's to report, at load, as it would be without this."""
    from pyree.runtime.hal.images import ImageError
    from pyree.runtime.hal.images.spirv import check_spirv

    for executable in module.tree.executables or []:
        if FORMATS[executable.format] == "spirv":
            member = executable.spirv
            try:
                check_spirv(bytes(module.bytes_of(member.code)),
                            [(e.name, len(e.bindings)) for e in member.exports])
            except ImageError:
                pass


def load(module: Module, executable, member, device: Device) -> Executable:
    """Loads ``member``, the ``code_table`` of ``executable``, on ``device``."""
    fmt = FORMATS[executable.format]
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
