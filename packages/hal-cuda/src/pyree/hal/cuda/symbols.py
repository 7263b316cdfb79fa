"""Loads libcuda.so.1 and resolves THE table of CUDA entry points this HAL uses
(``ffi_build.DECLARATIONS``, pre-parsed into ``_ffi.py``), and the one status check for all of them.

Like IREE's cuda_dynamic_symbol_table.h, the table documents what the driver needs from the host.
``load()`` opens libcuda through cffi (ABI mode: no compiler, no CUDA headers, no cuda-python,
whose import was a large part of every GPU process's start and whose calls wrap every argument
and result) and resolves every entry point with cuGetProcAddress_v2 for
TABLE_VERSION, so the driver picks the variant whose signature the table declares (``_v2``
copies, CUDA 12's cuGraphExecUpdate ...); a missing one makes the driver unavailable with a
message naming it. The few entry points newer than TABLE_VERSION (NEWER) are resolved at their
own version and are None where the driver lacks them: what needs one says so when it is used.
Handles are ``void *`` cdata and device addresses Python ints throughout.
"""

from __future__ import annotations

import os

from pyree.hal.cuda._ffi import ffi
from pyree.hal.cuda.ffi_build import DECLARATIONS
from pyree.runtime.hal.timeline import HalError

SYMBOLS = tuple(part.split(")", 1)[0] for part in DECLARATIONS.split("(*PFN_")[1:])

LIBRARY_VARIABLE = "PYREE_CUDA_LIBRARY"
LIBRARY = "libcuda.so.1"
# The ABI the table declares: cuGetProcAddress_v2 returns each entry point as of CUDA 12.0 on any
# newer driver, so a later change of a signature cannot reach a call made here.
TABLE_VERSION = 12000
# entry points newer than TABLE_VERSION -> the version that introduced them
NEWER = {"cuFuncGetParamInfo": 12040}

# cuda.h's values, under cuda.h's names (a test checks each against cuda-python's where installed)
CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_OUT_OF_MEMORY = 2
CUDA_ERROR_NOT_READY = 600
CU_GET_PROC_ADDRESS_DEFAULT = 0
CU_GET_PROC_ADDRESS_SUCCESS = 0
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_STREAM_NON_BLOCKING = 1
CU_EVENT_DEFAULT = 0  # with timing: the events of a traced submission
CU_EVENT_DISABLE_TIMING = 2
CU_MEMHOSTALLOC_PORTABLE = 1
CU_MEMHOSTALLOC_DEVICEMAP = 2
CU_MEM_ALLOCATION_TYPE_PINNED = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4          # value: cuuint64_t *
CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9        # data: int *
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_STREAM_CAPTURE_MODE_RELAXED = 2
CU_STREAM_WAIT_VALUE_GEQ = 0
CU_STREAM_WRITE_VALUE_DEFAULT = 0

_STATUS_OF = {  # CUDA error name -> HAL status
    "CUDA_ERROR_OUT_OF_MEMORY": "RESOURCE_EXHAUSTED",
    "CUDA_ERROR_INVALID_VALUE": "INVALID_ARGUMENT",
    "CUDA_ERROR_NOT_FOUND": "NOT_FOUND",
    "CUDA_ERROR_NO_DEVICE": "UNAVAILABLE",
    "CUDA_ERROR_INVALID_DEVICE": "NOT_FOUND",
    "CUDA_ERROR_NOT_SUPPORTED": "UNIMPLEMENTED",
}


class Libcuda:
    """The loaded table: one attribute per entry point of SYMBOLS (a cffi function pointer), and
    ``version``, the driver's CUDA version (12080 for 12.8)."""

    def __init__(self, name: str):
        try:
            lib = ffi.dlopen(name)
        except OSError as e:  # cffi appends a note about find_library: not ours to show
            raise HalError("UNAVAILABLE", f"{name} could not be loaded (no NVIDIA driver on this "
                                          f"host): {str(e).split('  Additionally,')[0]}") from None
        self._lib = lib  # keeps the library open while its entry points are used
        try:
            get_version, resolve = lib.cuDriverGetVersion, lib.cuGetProcAddress_v2
        except ffi.error as e:  # "symbol 'cuGetProcAddress_v2' not found in library ..."
            raise HalError("UNAVAILABLE", f"the CUDA driver {name} lacks an entry point the HAL "
                                          f"needs (CUDA 12.0 or newer): {e}") from None
        version = ffi.new("int *")
        if get_version(version) != CUDA_SUCCESS or version[0] < TABLE_VERSION:
            raise HalError("UNAVAILABLE", f"the CUDA driver {name} (version {version[0]}) is older "
                                          f"than CUDA 12.0, which the HAL needs")
        self.version = version[0]
        pfn, status, missing = ffi.new("void **"), ffi.new("CUdriverProcAddressQueryResult *"), []
        for symbol in SYMBOLS:
            err = resolve(symbol.encode(), pfn, NEWER.get(symbol, TABLE_VERSION),
                          CU_GET_PROC_ADDRESS_DEFAULT, status)
            if err != CUDA_SUCCESS or status[0] != CU_GET_PROC_ADDRESS_SUCCESS or pfn[0] == ffi.NULL:
                if symbol in NEWER:
                    setattr(self, symbol, None)
                else:
                    missing.append(symbol)
            else:
                setattr(self, symbol, ffi.cast(f"PFN_{symbol}", pfn[0]))
        if missing:
            raise HalError("UNAVAILABLE", f"the CUDA driver (version {self.version // 1000}."
                                          f"{self.version % 1000 // 10}) lacks entry points the "
                                          f"HAL needs: {', '.join(missing)}")


_lib: Libcuda | None = None


def library_name() -> str:
    """``$PYREE_CUDA_LIBRARY`` when set, else the driver's soname."""
    return os.environ.get(LIBRARY_VARIABLE) or LIBRARY


def load() -> Libcuda:
    """The table, loaded once per process; HalError UNAVAILABLE naming what is missing."""
    global _lib
    if _lib is None:
        _lib = Libcuda(library_name())
    return _lib


class CudaError(HalError):
    """A failed CUDA call: the entry point, CUDA's own error name and message, and what we did."""

    def __init__(self, status: str, message: str, code: int):
        super().__init__(status, message)
        self.code = code


def check(err: int, what: str) -> None:
    """Raises CudaError for a CUresult other than CUDA_SUCCESS: CUDA's name and message for it,
    after ``what`` we did. (Hot paths test ``err`` first, so a formatted ``what`` is built only on
    failure.)"""
    if err == CUDA_SUCCESS:
        return
    out = ffi.new("const char **")
    name = ffi.string(out[0]).decode() if _lib.cuGetErrorName(err, out) == CUDA_SUCCESS and out[0] \
        else f"CUresult {err}"
    text = ffi.string(out[0]).decode() if _lib.cuGetErrorString(err, out) == CUDA_SUCCESS and out[0] \
        else "unknown error"
    raise CudaError(_STATUS_OF.get(name, "INTERNAL"), f"{what}: {name}: {text}", err)


def create_event(cu: Libcuda, flags: int = CU_EVENT_DISABLE_TIMING):
    """A new event, with timing disabled unless a traced submission asks for it (``flags``)."""
    out = ffi.new("CUevent *")
    check(cu.cuEventCreate(out, flags), "cuEventCreate")
    return out[0]


def address(pointer) -> int:
    """A host pointer (cdata) as an integer address."""
    return int(ffi.cast("uintptr_t", pointer))
