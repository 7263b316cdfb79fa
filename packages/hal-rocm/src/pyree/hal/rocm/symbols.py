"""THE table of HIP entry points this HAL uses, the library search, and the status check.

Like IREE's dynamic symbol tables, the one ``ffi.cdef`` below documents what the driver needs from
the host (ROCm 5.2 .. 7 ABI): error-name lookups first, so a failure resolving the rest can still be
reported, then one line per entry point. ``load()`` opens libamdhip64 through cffi (ABI mode: no
compiler, no ROCm headers) and resolves every symbol of the table at once; a missing one makes the
driver unavailable with a message naming it. Nothing outside this table is called.
"""

from __future__ import annotations

import os
import re

import cffi
from pyree.runtime.hal.python_driver import HalError

CDEF = """
typedef int hipError_t;
typedef struct { char bytes[16]; } hipUUID;
/* error reporting */
const char *hipGetErrorName(hipError_t error);
const char *hipGetErrorString(hipError_t error);
/* runtime, devices */
hipError_t hipInit(unsigned flags);
hipError_t hipGetDeviceCount(int *count);
hipError_t hipDeviceGet(int *device, int ordinal);
hipError_t hipDeviceGetName(char *name, int len, int device);
hipError_t hipDeviceGetUuid(hipUUID *uuid, int device);
hipError_t hipSetDevice(int device);
hipError_t hipMemGetInfo(size_t *free, size_t *total);
/* streams and events */
hipError_t hipStreamCreateWithFlags(void **stream, unsigned flags);
hipError_t hipStreamDestroy(void *stream);
hipError_t hipStreamSynchronize(void *stream);
hipError_t hipStreamWaitEvent(void *stream, void *event, unsigned flags);
hipError_t hipEventCreateWithFlags(void **event, unsigned flags);
hipError_t hipEventDestroy(void *event);
hipError_t hipEventRecord(void *event, void *stream);
hipError_t hipEventSynchronize(void *event);
hipError_t hipEventQuery(void *event);
/* memory */
hipError_t hipMalloc(void **ptr, size_t size);
hipError_t hipFree(void *ptr);
hipError_t hipHostMalloc(void **ptr, size_t size, unsigned flags);
hipError_t hipHostFree(void *ptr);
/* transfers and fills */
hipError_t hipMemcpyHtoDAsync(void *dst, void *src, size_t size, void *stream);
hipError_t hipMemcpyDtoHAsync(void *dst, void *src, size_t size, void *stream);
hipError_t hipMemcpyDtoDAsync(void *dst, void *src, size_t size, void *stream);
hipError_t hipMemsetD8Async(void *dst, unsigned char value, size_t count, void *stream);
hipError_t hipMemsetD16Async(void *dst, unsigned short value, size_t count, void *stream);
hipError_t hipMemsetD32Async(void *dst, int value, size_t count, void *stream);
/* executables and launches */
hipError_t hipModuleLoadDataEx(void **module, const void *image, unsigned numOptions,
                               int *options, void **optionValues);
hipError_t hipModuleUnload(void *module);
hipError_t hipModuleGetFunction(void **function, void *module, const char *name);
hipError_t hipModuleLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz,
                                 unsigned bx, unsigned by, unsigned bz, unsigned sharedMemBytes,
                                 void *stream, void **kernelParams, void **extra);
"""

SYMBOLS = tuple(re.findall(r"(hip\w+)\s*\(", CDEF))

LIBRARY_VARIABLE = "PYREE_HIP_LIBRARY"
LIBRARY_NAMES = ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5")

# hipError_t values the driver tests for
SUCCESS = 0
OUT_OF_MEMORY = 2
NO_DEVICE = 100
NOT_READY = 600
WRONG_CHIP = (200, 209)  # hipErrorInvalidImage, hipErrorNoBinaryForGpu

_STATUS_OF = {1: "INVALID_ARGUMENT", OUT_OF_MEMORY: "RESOURCE_EXHAUSTED", NO_DEVICE: "UNAVAILABLE",
              101: "NOT_FOUND", 500: "NOT_FOUND"}

ffi = cffi.FFI()
ffi.cdef(CDEF)
_lib = None


def library_candidates() -> tuple[str, ...]:
    """``$PYREE_HIP_LIBRARY`` alone when set, else the sonames of ROCm 7 down to 5."""
    path = os.environ.get(LIBRARY_VARIABLE)
    return (path,) if path else LIBRARY_NAMES


def load():
    """The opened library with every symbol of the table resolved (once per process); HalError
    UNAVAILABLE naming each library tried, or the missing entry points."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for name in library_candidates():
        try:
            lib = ffi.dlopen(name)
        except OSError as e:  # cffi appends a note about find_library: not ours to show
            tried.append(f"{name} ({str(e).split('  Additionally,')[0]})")
            continue
        missing = []
        for symbol in SYMBOLS:
            try:
                getattr(lib, symbol)
            except AttributeError:
                missing.append(symbol)
        if missing:
            raise HalError("UNAVAILABLE", f"the HIP runtime {name} lacks entry points the HAL "
                                          f"needs: {', '.join(missing)}")
        _lib = lib
        return lib
    where = f"${LIBRARY_VARIABLE}" if os.environ.get(LIBRARY_VARIABLE) else "the system search"
    raise HalError("UNAVAILABLE", f"the HIP runtime library could not be loaded (no ROCm on this "
                                  f"host?); tried, from {where}: {'; '.join(tried)}")


class HipError(HalError):
    """A failed HIP call: the entry point, HIP's own error name and message, and what we did."""

    def __init__(self, status: str, message: str, code: int):
        super().__init__(status, message)
        self.code = code


def describe(lib, err: int) -> str:
    """``hipErrorNoDevice: no ROCm-capable device is detected`` (the name alone when HIP's
    message repeats it)."""
    name = lib.hipGetErrorName(err)
    text = lib.hipGetErrorString(err)
    name = ffi.string(name).decode() if name != ffi.NULL else f"hipError_t {err}"
    text = ffi.string(text).decode() if text != ffi.NULL else ""
    return name if text in ("", name) else f"{name}: {text}"


def error(lib, err: int, what: str) -> HipError:
    return HipError(_STATUS_OF.get(err, "INTERNAL"), f"{what}: {describe(lib, err)}", err)


def check(lib, err: int, what: str) -> None:
    """Raises the HipError for a non-zero hipError_t, naming ``what`` we did."""
    if err != SUCCESS:
        raise error(lib, err, what)
