"""Loads a module's CUDA executable: the cubin when it fits the device, else the PTX (JIT).

A cubin for sm_XY runs on a device of the same major version with minor >= Y (arch-specific
``a`` targets only on exactly that arch); otherwise the driver compiles the PTX. Loaded modules
are cached by content, so loading the same executable twice costs one cuModuleLoadData.
"""

from __future__ import annotations

import hashlib
import threading

from pyree.hal.cuda import symbols
from pyree.hal.cuda.symbols import check, ffi
from pyree.runtime.hal.python_driver import ExecutableParams, HalError

_DEFAULT_SHARED_LIMIT = 48 * 1024


def cubin_fits(cubin_arch: str, major: int, minor: int) -> bool:
    if not cubin_arch.startswith("sm_"):
        return False
    digits = cubin_arch[3:]
    if digits.endswith("a"):
        return digits[:-1] == f"{major}{minor}"
    return digits[:-1] == str(major) and int(digits[-1]) <= minor


class Kernel:
    __slots__ = ("function", "name", "grid", "block", "shared", "min_lengths")

    def __init__(self, function, export):
        self.function = function  # CUfunction
        self.name = export.name
        self.grid, self.block = export.grid_size, export.block_size
        self.shared = export.shared_memory_bytes
        self.min_lengths = export.binding_min_lengths


class Executable:
    def __init__(self, cu, module, kernels: list[Kernel], key: bytes, source: str):
        self.cu, self.module, self.kernels, self.key, self.source = cu, module, kernels, key, source
        self.references = 1


class ExecutableCache:
    def __init__(self, cu, capability: tuple[int, int], device_name: str):
        self.cu, self.capability, self.device_name = cu, capability, device_name
        self._loaded: dict[bytes, Executable] = {}
        # modules load and unload on any thread: one count per executable, one cuModuleLoadData
        self._lock = threading.Lock()

    def load(self, params: ExecutableParams) -> Executable:
        with self._lock:
            return self._load(params)

    def _load(self, params: ExecutableParams) -> Executable:
        if params.format != "cuda":
            raise HalError("INVALID_ARGUMENT", f"the cuda driver cannot run '{params.format}' "
                                               "executables; compile with "
                                               "--pyree-hal-target-backends=cuda")
        key = hashlib.sha256(params.code + b"\0" + params.alt_code).digest()
        cached = self._loaded.get(key)
        if cached is not None:
            cached.references += 1
            return cached
        cu = self.cu
        major, minor = self.capability
        if params.alt_code and cubin_fits(params.alt_target, major, minor):
            image, source = params.alt_code, f"cubin {params.alt_target}"
        else:
            image, source = params.code + b"\0", f"PTX for {params.target}, JIT-compiled"
        out = ffi.new("CUmodule *")
        check(cu.cuModuleLoadData(out, image), f"loading the CUDA executable ({source}) on "
                                               f"{self.device_name} (sm_{major}{minor})")
        module, function, kernels = out[0], ffi.new("CUfunction *"), []
        for export in params.exports:
            check(cu.cuModuleGetFunction(function, module, export.name.encode()),
                  f"kernel '{export.name}' in the CUDA executable")
            if export.shared_memory_bytes > _DEFAULT_SHARED_LIMIT:
                check(cu.cuFuncSetAttribute(
                    function[0], symbols.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    export.shared_memory_bytes),
                    f"kernel '{export.name}': {export.shared_memory_bytes} bytes of shared memory")
            kernels.append(Kernel(function[0], export))
        executable = Executable(cu, module, kernels, key, source)
        self._loaded[key] = executable
        return executable

    def release(self, executable: Executable) -> None:
        with self._lock:
            executable.references -= 1
            if executable.references:
                return
            del self._loaded[executable.key]
        check(self.cu.cuModuleUnload(executable.module), "cuModuleUnload")
