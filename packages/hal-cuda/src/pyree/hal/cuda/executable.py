"""Loads a module's CUDA executable: the cubin when it fits the device, else the PTX (JIT).

A cubin for sm_XY runs on a device of the same major version with minor >= Y (arch-specific
``a`` targets only on exactly that arch); otherwise the driver compiles the PTX. Loaded modules
are cached by content and export table, so loading the same executable twice costs one
cuModuleLoadData (a module whose exports differ gets kernels that hold its own).

The driver trusts what it is given: a cut cubin or a launch with fewer parameters than the kernel
reads crashes the process. So the image handed over is checked first (a whole ELF for the CUDA
machine, or whole PTX text naming every kernel: the runtime's hal/images), and each kernel's
parameters are read back from the loaded code (cuFuncGetParamInfo, CUDA 12.4) and held to the
module's bindings and each dispatch's push constants (the runtime's hal/kernel_parameters.py).
"""

from __future__ import annotations

import hashlib
import threading

from pyree.hal.cuda import symbols
from pyree.hal.cuda.symbols import check, ffi
from pyree.runtime.hal.images import ImageError
from pyree.runtime.hal.images.elf import EM_CUDA, ET_EXEC, read_elf
from pyree.runtime.hal.images.ptx import check_ptx
from pyree.runtime.hal.kernel_parameters import check_dispatch, check_layout
from pyree.runtime.hal.python_driver import ExecutableParams, HalError

_DEFAULT_SHARED_LIMIT = 48 * 1024


def cubin_fits(cubin_arch: str, major: int, minor: int) -> bool:
    if not cubin_arch.startswith("sm_"):
        return False
    digits = cubin_arch[3:]
    if digits.endswith("a"):
        return digits[:-1] == f"{major}{minor}"
    return digits[:-1] == str(major) and int(digits[-1]) <= minor


_MAX_PARAMETERS = 32764  # bytes of a kernel's parameter space, so at most as many parameters


class Kernel:
    __slots__ = ("function", "name", "grid", "block", "shared", "min_lengths", "parameters")

    def __init__(self, function, export, parameters: tuple[int, ...]):
        self.function = function  # CUfunction
        self.name = export.name
        self.grid, self.block = export.grid_size, export.block_size
        self.shared = export.shared_memory_bytes
        self.min_lengths = export.binding_min_lengths
        self.parameters = parameters  # each parameter's size in bytes, as the code declares it

    def check_arguments(self, bindings: int, push_constants: int, where: str) -> None:
        """That a launch with this kernel's bindings and ``push_constants`` gives exactly the
        parameters the code reads."""
        check_dispatch(self.name, self.parameters, bindings, push_constants, where)


def parameter_sizes(cu, function, name: str) -> tuple[int, ...]:
    """The sizes of a loaded kernel's parameters, from the code itself."""
    if cu.cuFuncGetParamInfo is None:
        raise HalError("FAILED_PRECONDITION", f"the CUDA driver ({cu.version // 1000}."
                                              f"{cu.version % 1000 // 10}) lacks cuFuncGetParamInfo "
                                              f"(CUDA 12.4), which the HAL needs to check kernel "
                                              f"'{name}''s parameters against the module before "
                                              f"a launch; update the NVIDIA driver")
    offset, size, sizes = ffi.new("size_t *"), ffi.new("size_t *"), []
    while len(sizes) < _MAX_PARAMETERS:
        err = cu.cuFuncGetParamInfo(function, len(sizes), offset, size)
        if err == symbols.CUDA_ERROR_INVALID_VALUE:  # past the last parameter
            break
        check(err, f"cuFuncGetParamInfo (kernel '{name}')")
        sizes.append(size[0])
    return tuple(sizes)


def check_image(params: ExecutableParams, cubin: bool) -> None:
    """Refuses the cubin or PTX about to be loaded when it contradicts its own structure."""
    try:
        if cubin:
            read_elf(params.alt_code, (EM_CUDA,), (ET_EXEC,))
        else:
            check_ptx(params.code, [export.name for export in params.exports])
    except ImageError as e:
        what = f"cubin {params.alt_target}" if cubin else f"PTX for {params.target}"
        raise HalError("INVALID_ARGUMENT", f"the CUDA executable's {what} is refused: {e}") from None


class Executable:
    def __init__(self, cu, module, kernels: list[Kernel], key: bytes, source: str):
        self.cu, self.module, self.kernels, self.key, self.source = cu, module, kernels, key, source
        self.references = 1


class ExecutableCache:
    def __init__(self, cu, capability: tuple[int, int], device_name: str):
        self.cu, self.capability, self.device_name = cu, capability, device_name
        self._loaded: dict[bytes, Executable] = {}
        # Modules load and unload on any thread: one count per executable, one module load.
        # Reentrant: the collector may release another executable inside a load.
        self._lock = threading.RLock()

    def load(self, params: ExecutableParams) -> Executable:
        with self._lock:
            return self._load(params)

    def _load(self, params: ExecutableParams) -> Executable:
        if params.format != "cuda":
            raise HalError("INVALID_ARGUMENT", f"the cuda driver cannot run '{params.format}' "
                                               "executables; compile with "
                                               "--pyree-hal-target-backends=cuda")
        key = hashlib.sha256(params.code + b"\0" + params.alt_code + b"\0"
                             + repr(params.exports).encode()).digest()
        cached = self._loaded.get(key)
        if cached is not None:
            cached.references += 1
            return cached
        cu = self.cu
        major, minor = self.capability
        cubin = bool(params.alt_code) and cubin_fits(params.alt_target, major, minor)
        check_image(params, cubin)
        if cubin:
            image, source = params.alt_code, f"cubin {params.alt_target}"
        else:
            image, source = params.code + b"\0", f"PTX for {params.target}, JIT-compiled"
        out = ffi.new("CUmodule *")
        check(cu.cuModuleLoadData(out, image), f"loading the CUDA executable ({source}) on "
                                               f"{self.device_name} (sm_{major}{minor})")
        module, function, kernels = out[0], ffi.new("CUfunction *"), []
        try:
            for export in params.exports:
                kernels.append(self._kernel(module, function, export))
        except HalError:
            cu.cuModuleUnload(module)
            raise
        executable = Executable(cu, module, kernels, key, source)
        self._loaded[key] = executable
        return executable

    def _kernel(self, module, function, export) -> Kernel:
        cu = self.cu
        check(cu.cuModuleGetFunction(function, module, export.name.encode()),
              f"kernel '{export.name}' in the CUDA executable")
        if export.shared_memory_bytes > _DEFAULT_SHARED_LIMIT:
            check(cu.cuFuncSetAttribute(
                function[0], symbols.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                export.shared_memory_bytes),
                f"kernel '{export.name}': {export.shared_memory_bytes} bytes of shared memory")
        sizes = parameter_sizes(cu, function[0], export.name)
        check_layout(export.name, sizes, len(export.binding_min_lengths))
        return Kernel(function[0], export, sizes)

    def release(self, executable: Executable) -> None:
        with self._lock:
            executable.references -= 1
            if executable.references:
                return
            del self._loaded[executable.key]
        check(self.cu.cuModuleUnload(executable.module), "cuModuleUnload")
