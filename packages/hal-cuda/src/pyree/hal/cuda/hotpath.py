"""The CUDA entry points called on every invoke, as raw C function pointers through cffi.

cuda-python wraps each call in argument conversion, a CUresult enum and a result tuple: about a
microsecond a call, several per invoke. Through cffi a call costs a few hundred nanoseconds. The
pointers come from cuGetProcAddress for the driver's own version (as symbols.resolve checks, and
as IREE's dynamic symbol table does), so ``cuMemcpyHtoDAsync`` is the ``_v2`` entry point and so
on. Handles and device addresses are passed as plain integers, converted once where they are made.
"""

from __future__ import annotations

from pyree.hal.cuda._ffi import ffi
from pyree.hal.cuda.symbols import check

# name -> C function pointer type (CUstream, CUevent, CUfunction, CUgraphExec are void *)
SIGNATURES = {
    "cuGraphLaunch": "CUresult (*)(void *, void *)",
    "cuLaunchKernel": "CUresult (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, "
                      "unsigned, unsigned, void *, void **, void **)",
    "cuStreamWriteValue64": "CUresult (*)(void *, uint64_t, uint64_t, unsigned)",
    "cuStreamWaitValue64": "CUresult (*)(void *, uint64_t, uint64_t, unsigned)",
    "cuEventRecord": "CUresult (*)(void *, void *)",
    "cuEventQuery": "CUresult (*)(void *)",
    "cuEventSynchronize": "CUresult (*)(void *)",
    "cuMemcpyHtoDAsync": "CUresult (*)(uint64_t, void *, size_t, void *)",
    "cuMemcpyDtoHAsync": "CUresult (*)(void *, uint64_t, size_t, void *)",
}

SUCCESS = 0
NOT_READY = 600  # CUDA_ERROR_NOT_READY


def handle(obj):
    """A cuda-python handle (CUstream, CUevent, ...) as the ``void *`` the C entry points take."""
    return ffi.cast("void *", int(obj))


class HotPath:
    """One attribute per entry point of SIGNATURES; ``fail`` turns a CUresult into CudaError."""

    def __init__(self, cu):
        self.cu = cu
        version = check(cu, cu.cuDriverGetVersion(), "cuDriverGetVersion")
        flags = cu.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT
        for name, ctype in SIGNATURES.items():
            pfn = check(cu, cu.cuGetProcAddress(name.encode(), version, flags)[:2],
                        f"cuGetProcAddress({name})")
            setattr(self, name, ffi.cast(ctype, int(pfn)))

    def fail(self, err: int, what: str):
        """Raises the CudaError for a non-zero CUresult, with CUDA's name and message."""
        check(self.cu, (self.cu.CUresult(err),), what)
