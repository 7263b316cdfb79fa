"""THE table of CUDA driver entry points this HAL uses, and the status check for all of them.

Like IREE's cuda_dynamic_symbol_table.h, the table is the documentation of what the driver needs
from the host: error-name lookups first (so a failure resolving the rest can still be reported),
then one line per entry point. ``resolve()`` runs when the driver is created and checks every
one with cuGetProcAddress; a missing one is an error naming it. Calls go through cuda-python
(``cuda.bindings.driver``), which loads libcuda.so.1 on first use.
"""

from __future__ import annotations

from pyree.runtime.hal.python_driver import HalError

SYMBOLS = (
    # error reporting
    "cuGetErrorName", "cuGetErrorString",
    # driver, devices, primary context
    "cuInit", "cuDriverGetVersion", "cuGetProcAddress", "cuDeviceGetCount", "cuDeviceGet",
    "cuDeviceGetName", "cuDeviceGetUuid", "cuDeviceGetAttribute", "cuDeviceTotalMem",
    "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease", "cuCtxSetCurrent", "cuMemGetInfo",
    # streams and events
    "cuStreamCreate", "cuStreamDestroy", "cuStreamSynchronize", "cuStreamQuery",
    "cuStreamWaitEvent", "cuEventCreate", "cuEventDestroy", "cuEventRecord",
    "cuEventSynchronize", "cuEventQuery",
    # timeline semaphores: stream memory operations on host-mapped words
    "cuStreamWriteValue64", "cuStreamWaitValue64", "cuMemHostAlloc", "cuMemFreeHost",
    "cuMemHostGetDevicePointer",
    # device memory from a stream-ordered pool
    "cuMemPoolCreate", "cuMemPoolDestroy", "cuMemPoolSetAttribute", "cuMemAllocFromPoolAsync",
    "cuMemFreeAsync", "cuMemPoolTrimTo",
    # transfers and fills
    "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync", "cuMemsetD8Async",
    "cuMemsetD16Async", "cuMemsetD32Async",
    # executables and launches
    "cuModuleLoadData", "cuModuleUnload", "cuModuleGetFunction", "cuFuncSetAttribute",
    "cuLaunchKernel",
    # command buffers recorded as CUDA graphs (stream capture)
    "cuStreamBeginCapture", "cuStreamEndCapture", "cuGraphInstantiate", "cuGraphExecUpdate",
    "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy",
    # other libraries' memory (DLPack): whose device a pointer is on
    "cuPointerGetAttribute",
)


def import_driver_module():
    """``cuda.bindings.driver``; HalError UNAVAILABLE naming the problem when cuda-python is absent."""
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise HalError("UNAVAILABLE", f"cuda-python (cuda-bindings) is not installed: {e}") from None
    return driver


class CudaError(HalError):
    """A failed CUDA call: the entry point, CUDA's own error name and message, and what we did."""

    def __init__(self, status: str, message: str, code: int):
        super().__init__(status, message)
        self.code = code


_STATUS_OF = {  # CUDA error name -> HAL status
    "CUDA_ERROR_OUT_OF_MEMORY": "RESOURCE_EXHAUSTED",
    "CUDA_ERROR_INVALID_VALUE": "INVALID_ARGUMENT",
    "CUDA_ERROR_NOT_FOUND": "NOT_FOUND",
    "CUDA_ERROR_NO_DEVICE": "UNAVAILABLE",
    "CUDA_ERROR_INVALID_DEVICE": "NOT_FOUND",
    "CUDA_ERROR_NOT_SUPPORTED": "UNIMPLEMENTED",
}


def describe(cu, err) -> tuple[str, str]:
    """(CUDA_ERROR_NAME, CUDA's message) for a CUresult."""
    name_err, name = cu.cuGetErrorName(err)
    text_err, text = cu.cuGetErrorString(err)
    name = name.decode() if name_err == cu.CUresult.CUDA_SUCCESS and name else f"CUresult {int(err)}"
    text = text.decode() if text_err == cu.CUresult.CUDA_SUCCESS and text else "unknown error"
    return name, text


def check(cu, result, what: str):
    """Unpacks a cuda-python result tuple; raises CudaError with ``what`` and CUDA's message."""
    err = result[0]
    if err != cu.CUresult.CUDA_SUCCESS:
        name, text = describe(cu, err)
        raise CudaError(_STATUS_OF.get(name, "INTERNAL"), f"{what}: {name}: {text}", int(err))
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


def resolve(cu) -> None:
    """Checks that the installed libcuda exports every entry point in SYMBOLS."""
    version = check(cu, cu.cuDriverGetVersion(), "cuDriverGetVersion")
    missing = []
    for name in SYMBOLS:
        err, _, status = cu.cuGetProcAddress(name.encode(), version,
                                             cu.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT)
        if err != cu.CUresult.CUDA_SUCCESS or \
                status != cu.CUdriverProcAddressQueryResult.CU_GET_PROC_ADDRESS_SUCCESS:
            missing.append(name)
    if missing:
        raise HalError("UNAVAILABLE", f"the CUDA driver (version {version // 1000}."
                                      f"{version % 1000 // 10}) lacks entry points the HAL needs: "
                                      f"{', '.join(missing)}")
