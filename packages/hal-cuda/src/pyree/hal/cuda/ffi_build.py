"""Generates ``_ffi.py``, this driver's FFI with the CUDA table already parsed (cffi's out-of-line
ABI mode, as pyree.runtime.hal.ffi_build does for the runtime): importing the driver then needs
no pycparser, whose import and parse were a large part of every process's start.

DECLARATIONS is THE table of CUDA driver entry points the HAL uses, in cuda.h's own names and
types (handles ``void *``, enums ``int``, the structs laid out as cuda.h 12.0 declares them). Two
are found with dlsym: cuDriverGetVersion and the resolver, cuGetProcAddress_v2 (CUDA 12.0's form,
which reports whether a symbol exists). Every other one is a ``PFN_<name>`` pointer type, in the
signature that cuGetProcAddress_v2 returns for that name and CUDA 12.0 (symbols.TABLE_VERSION;
cudaTypedefs.h lists each name's versions): for ``cuMemcpyHtoDAsync`` the ``_v2`` entry point, for
``cuGraphExecUpdate`` the one with a result-info struct. CUDA 12's ``cuGraphInstantiate`` is a
header macro for ``cuGraphInstantiateWithFlags``: the driver's own ``cuGraphInstantiate`` takes an
error node and a log buffer at every version, so the table names ``cuGraphInstantiateWithFlags``
(as cuda-python does). Error lookups come first, so a failure resolving the rest can still be
reported. The last entries are newer than CUDA 12.0: each is resolved at the version that
introduced it (``symbols.NEWER``) and is None on a driver without it. Run
``python -m pyree.hal.cuda.ffi_build`` after editing it; a test fails while the vendored file is
stale, and others check every signature against cudaTypedefs.h and cuda-python's cydriver.pxd.
"""

from __future__ import annotations

import os

# (no pathlib: the driver imports this table as it starts CUDA, and pathlib's import is not free)
TARGET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ffi.py")
DECLARATIONS = """
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef uint64_t cuuint64_t;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUgraph;
typedef void *CUgraphNode;
typedef void *CUgraphExec;
typedef void *CUmemoryPool;
typedef int CUdevice_attribute;
typedef int CUpointer_attribute;
typedef int CUfunction_attribute;
typedef int CUmemPool_attribute;
typedef int CUstreamCaptureMode;
typedef int CUmemAllocationType;
typedef int CUmemAllocationHandleType;
typedef int CUmemLocationType;
typedef int CUgraphExecUpdateResult;
typedef int CUdriverProcAddressQueryResult;
typedef struct { char bytes[16]; } CUuuid;
typedef struct { CUmemLocationType type; int id; } CUmemLocation;
typedef struct {
    CUmemAllocationType allocType;
    CUmemAllocationHandleType handleTypes;
    CUmemLocation location;
    void *win32SecurityAttributes;
    unsigned char reserved[64];  /* 12.2 carved maxSize and usage out of it: 0 is their default */
} CUmemPoolProps;
typedef struct {
    CUgraphExecUpdateResult result;
    CUgraphNode errorNode;
    CUgraphNode errorFromNode;
} CUgraphExecUpdateResultInfo;

/* found with dlsym */
CUresult cuDriverGetVersion(int *driverVersion);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus);

/* resolved with cuGetProcAddress_v2. error reporting */
typedef CUresult (*PFN_cuGetErrorName)(CUresult error, const char **pStr);
typedef CUresult (*PFN_cuGetErrorString)(CUresult error, const char **pStr);
/* driver, devices, primary context */
typedef CUresult (*PFN_cuInit)(unsigned int Flags);
typedef CUresult (*PFN_cuDeviceGetCount)(int *count);
typedef CUresult (*PFN_cuDeviceGet)(CUdevice *device, int ordinal);
typedef CUresult (*PFN_cuDeviceGetName)(char *name, int len, CUdevice dev);
typedef CUresult (*PFN_cuDeviceGetUuid)(CUuuid *uuid, CUdevice dev);
typedef CUresult (*PFN_cuDeviceGetAttribute)(int *pi, CUdevice_attribute attrib, CUdevice dev);
typedef CUresult (*PFN_cuDevicePrimaryCtxRetain)(CUcontext *pctx, CUdevice dev);
typedef CUresult (*PFN_cuDevicePrimaryCtxRelease)(CUdevice dev);
typedef CUresult (*PFN_cuCtxSetCurrent)(CUcontext ctx);
typedef CUresult (*PFN_cuMemGetInfo)(size_t *free, size_t *total);
/* streams and events */
typedef CUresult (*PFN_cuStreamCreate)(CUstream *phStream, unsigned int Flags);
typedef CUresult (*PFN_cuStreamDestroy)(CUstream hStream);
typedef CUresult (*PFN_cuStreamSynchronize)(CUstream hStream);
typedef CUresult (*PFN_cuStreamWaitEvent)(CUstream hStream, CUevent hEvent, unsigned int Flags);
typedef CUresult (*PFN_cuEventCreate)(CUevent *phEvent, unsigned int Flags);
typedef CUresult (*PFN_cuEventDestroy)(CUevent hEvent);
typedef CUresult (*PFN_cuEventRecord)(CUevent hEvent, CUstream hStream);
typedef CUresult (*PFN_cuEventSynchronize)(CUevent hEvent);
typedef CUresult (*PFN_cuEventQuery)(CUevent hEvent);
typedef CUresult (*PFN_cuEventElapsedTime)(float *pMilliseconds, CUevent hStart, CUevent hEnd);
/* timeline semaphores: stream memory operations on host-mapped words */
typedef CUresult (*PFN_cuStreamWriteValue64)(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                             unsigned int flags);
typedef CUresult (*PFN_cuStreamWaitValue64)(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                            unsigned int flags);
typedef CUresult (*PFN_cuMemHostAlloc)(void **pp, size_t bytesize, unsigned int Flags);
typedef CUresult (*PFN_cuMemFreeHost)(void *p);
typedef CUresult (*PFN_cuMemHostGetDevicePointer)(CUdeviceptr *pdptr, void *p, unsigned int Flags);
/* device memory from a stream-ordered pool */
typedef CUresult (*PFN_cuMemPoolCreate)(CUmemoryPool *pool, const CUmemPoolProps *poolProps);
typedef CUresult (*PFN_cuMemPoolDestroy)(CUmemoryPool pool);
typedef CUresult (*PFN_cuMemPoolSetAttribute)(CUmemoryPool pool, CUmemPool_attribute attr,
                                              void *value);
typedef CUresult (*PFN_cuMemAllocFromPoolAsync)(CUdeviceptr *dptr, size_t bytesize,
                                                CUmemoryPool pool, CUstream hStream);
typedef CUresult (*PFN_cuMemFreeAsync)(CUdeviceptr dptr, CUstream hStream);
typedef CUresult (*PFN_cuMemPoolTrimTo)(CUmemoryPool pool, size_t minBytesToKeep);
/* transfers and fills */
typedef CUresult (*PFN_cuMemcpyHtoDAsync)(CUdeviceptr dstDevice, const void *srcHost,
                                          size_t ByteCount, CUstream hStream);
typedef CUresult (*PFN_cuMemcpyDtoHAsync)(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                          CUstream hStream);
typedef CUresult (*PFN_cuMemcpyDtoDAsync)(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                          size_t ByteCount, CUstream hStream);
typedef CUresult (*PFN_cuMemsetD8Async)(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                        CUstream hStream);
typedef CUresult (*PFN_cuMemsetD16Async)(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                         CUstream hStream);
typedef CUresult (*PFN_cuMemsetD32Async)(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                         CUstream hStream);
/* executables and launches */
typedef CUresult (*PFN_cuModuleLoadData)(CUmodule *module, const void *image);
typedef CUresult (*PFN_cuModuleUnload)(CUmodule hmod);
typedef CUresult (*PFN_cuModuleGetFunction)(CUfunction *hfunc, CUmodule hmod, const char *name);
typedef CUresult (*PFN_cuFuncSetAttribute)(CUfunction hfunc, CUfunction_attribute attrib,
                                           int value);
typedef CUresult (*PFN_cuLaunchKernel)(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                       unsigned int gridDimZ, unsigned int blockDimX,
                                       unsigned int blockDimY, unsigned int blockDimZ,
                                       unsigned int sharedMemBytes, CUstream hStream,
                                       void **kernelParams, void **extra);
/* command buffers recorded as CUDA graphs (stream capture) */
typedef CUresult (*PFN_cuStreamBeginCapture)(CUstream hStream, CUstreamCaptureMode mode);
typedef CUresult (*PFN_cuStreamEndCapture)(CUstream hStream, CUgraph *phGraph);
typedef CUresult (*PFN_cuGraphInstantiateWithFlags)(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                    unsigned long long flags);
typedef CUresult (*PFN_cuGraphExecUpdate)(CUgraphExec hGraphExec, CUgraph hGraph,
                                          CUgraphExecUpdateResultInfo *resultInfo);
typedef CUresult (*PFN_cuGraphLaunch)(CUgraphExec hGraphExec, CUstream hStream);
typedef CUresult (*PFN_cuGraphExecDestroy)(CUgraphExec hGraphExec);
typedef CUresult (*PFN_cuGraphDestroy)(CUgraph hGraph);
/* other libraries' memory (DLPack): whose device a pointer is on */
typedef CUresult (*PFN_cuPointerGetAttribute)(void *data, CUpointer_attribute attribute,
                                              CUdeviceptr ptr);
/* newer than 12.0 (symbols.NEWER). A kernel's parameters, checked against a dispatch (12.4) */
typedef CUresult (*PFN_cuFuncGetParamInfo)(CUfunction func, size_t paramIndex,
                                           size_t *paramOffset, size_t *paramSize);
"""


def source() -> str:
    from pyree.runtime.hal.ffi_build import out_of_line

    return out_of_line(DECLARATIONS, "pyree.hal.cuda._ffi",
                       "# Generated by pyree.hal.cuda.ffi_build; do not edit.\n# ruff: noqa\n")


if __name__ == "__main__":
    with open(TARGET, "w") as f:
        f.write(source())
