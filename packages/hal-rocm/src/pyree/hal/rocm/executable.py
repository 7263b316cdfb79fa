"""Loads a module's ROCm executable: the code object (hsaco) the compiler linked for one chip.

hipModuleLoadDataEx is given an error-log buffer, so a refused code object comes back with the
loader's own words, the chip the module was compiled for and this device's name. Loaded modules
are cached by content, so loading the same executable twice costs one hipModuleLoadDataEx.

An ELF code object is checked against its own headers first (the runtime's hal/images/elf.py): the
loader maps what the headers say and would read past a code object cut short. Its metadata note
gives each kernel's explicit arguments (hal/images/amdgpu.py), held to the module's bindings and
each dispatch's push constants (hal/kernel_parameters.py): hipModuleLaunchKernel reads one
pointer per argument the code declares. (Images that are not ELF are left to the loader, which
refuses them by their magic; the test-only HIP-on-CUDA shim loads PTX this way, unchecked.)
"""

from __future__ import annotations

import hashlib
import re
import threading

from pyree.hal.rocm.symbols import SUCCESS, WRONG_CHIP, HipError, check, error, ffi
from pyree.runtime.hal.images import ImageError
from pyree.runtime.hal.images.amdgpu import kernel_arguments
from pyree.runtime.hal.images.elf import ELF_MAGIC, EM_AMDGPU, ET_DYN, read_elf
from pyree.runtime.hal.kernel_parameters import check_dispatch, check_layout
from pyree.runtime.hal.python_driver import ExecutableParams, HalError

_ERROR_LOG_BUFFER, _ERROR_LOG_BUFFER_SIZE = 5, 6  # hipJitOption
_LOG_SIZE = 8192


class Kernel:
    __slots__ = ("function", "name", "grid", "block", "shared", "min_lengths", "parameters")

    def __init__(self, function, export, parameters: tuple[int, ...] | None):
        self.function = function  # hipFunction_t (void *)
        self.name = export.name
        self.grid, self.block = export.grid_size, export.block_size
        self.shared = export.shared_memory_bytes
        self.min_lengths = export.binding_min_lengths
        self.parameters = parameters  # explicit argument sizes from the code (None: not ELF)

    def check_arguments(self, bindings: int, push_constants: int, where: str) -> None:
        """That a launch with this kernel's bindings and ``push_constants`` gives exactly the
        arguments the code reads."""
        if self.parameters is not None:
            check_dispatch(self.name, self.parameters, bindings, push_constants,
                           where)


class Executable:
    def __init__(self, module, kernels: list[Kernel], key: bytes):
        self.module, self.kernels, self.key = module, kernels, key
        self.references = 1


def chip_of(device_name: str) -> str:
    """The gfx name when the device's name carries one (ROCm names unbranded GPUs by it), else
    a placeholder saying where to find it: the table has no call returning the chip."""
    match = re.search(r"gfx[0-9a-f]+", device_name.lower())
    return match.group(0) if match else f"<the gfx name of the {device_name}, see rocminfo>"


class ExecutableCache:
    def __init__(self, lib, device_name: str):
        self.lib, self.device_name = lib, device_name
        self._loaded: dict[bytes, Executable] = {}
        # Modules load and unload on any thread: one count per executable, one module load.
        # Reentrant: the collector may release another executable inside a load.
        self._lock = threading.RLock()

    def load(self, params: ExecutableParams) -> Executable:
        with self._lock:
            return self._load(params)

    def _load(self, params: ExecutableParams) -> Executable:
        if params.format != "rocm":
            raise HalError("INVALID_ARGUMENT", f"the rocm driver cannot run '{params.format}' "
                                               "executables; compile with "
                                               "--pyree-hal-target-backends=rocm")
        key = hashlib.sha256(params.code + b"\0" + repr(params.exports).encode()).digest()
        cached = self._loaded.get(key)
        if cached is not None:
            cached.references += 1
            return cached
        arguments = self._check(params)
        module = self._load_module(params)
        kernels = []
        out = ffi.new("void **")
        try:
            for export in params.exports:
                check(self.lib.hipModuleGetFunction(out, module, export.name.encode()),
                      f"kernel '{export.name}' in the ROCm executable ({params.target})")
                sizes = None
                if arguments is not None:
                    if export.name not in arguments:
                        raise HalError("NOT_FOUND", f"the ROCm code object's metadata describes "
                                                    f"no kernel '{export.name}'")
                    sizes = arguments[export.name]
                    check_layout(export.name, sizes, len(export.binding_min_lengths))
                kernels.append(Kernel(out[0], export, sizes))
        except HalError:
            self.lib.hipModuleUnload(module)
            raise
        executable = Executable(module, kernels, key)
        self._loaded[key] = executable
        return executable

    @staticmethod
    def _check(params: ExecutableParams) -> dict[str, tuple[int, ...]] | None:
        """An ELF code object's kernels and their argument sizes, once its structure is checked;
        None for an image that is not ELF."""
        if params.code[:4] != ELF_MAGIC:
            return None
        try:
            return kernel_arguments(read_elf(params.code, (EM_AMDGPU,), (ET_DYN,)))
        except ImageError as e:
            raise HalError("INVALID_ARGUMENT", f"the ROCm code object for {params.target} is "
                                               f"refused: {e}") from None

    def _load_module(self, params: ExecutableParams):
        lib = self.lib
        log = ffi.new("char[]", _LOG_SIZE)
        options = ffi.new("int[]", [_ERROR_LOG_BUFFER, _ERROR_LOG_BUFFER_SIZE])
        values = ffi.new("void *[]", [log, ffi.cast("void *", _LOG_SIZE)])
        out = ffi.new("void **")
        image = ffi.from_buffer(params.code)
        err = lib.hipModuleLoadDataEx(out, image, 2, options, values)
        if err == SUCCESS:
            return out[0]
        what = (f"loading the ROCm code object compiled for {params.target or 'an unnamed chip'} "
                f"on {self.device_name}")
        text = ffi.string(log).decode(errors="replace").strip()
        if text:
            what += f" (loader log: {text})"
        e = error(err, what)
        if err in WRONG_CHIP:
            raise HipError(e.status, f"{e.message}. The module was compiled for {params.target}, "
                                     f"which this GPU cannot run: recompile with "
                                     f"--iree-rocm-target-chip={chip_of(self.device_name)}", err)
        raise e

    def release(self, executable: Executable) -> None:
        with self._lock:
            executable.references -= 1
            if executable.references:
                return
            del self._loaded[executable.key]
        check(self.lib.hipModuleUnload(executable.module), "hipModuleUnload")
