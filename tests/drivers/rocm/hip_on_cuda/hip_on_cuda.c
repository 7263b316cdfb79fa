/* A test-only libamdhip64.so over the CUDA driver API, so that pyree's rocm driver runs for real
 * on an NVIDIA GPU. It exports exactly the table of pyree.hal.rocm's symbols.py (HIP's ROCm 5.2
 * .. 7 ABI) and nothing else (test_shim_without_gpu.py checks both). The modules it loads are
 * cuda-target modules relabelled as rocm (relabel.py): the "code object" is PTX, which
 * cuModuleLoadDataEx JIT-compiles.
 *
 * libcuda.so.1 is opened with dlopen, so the shim builds without the CUDA toolkit and, on a host
 * without libcuda, every call answers hipErrorNoDevice (100) like ROCm on a host without a GPU.
 * CUDA's driver result codes equal HIP's for every code the rocm driver distinguishes, and the
 * flag and JIT-option numberings agree, so values pass through unchanged.
 *
 * HIP gives each thread a current device (0 until hipSetDevice); CUDA needs a current context.
 * Every call that needs one makes device 0's primary context current on a thread that has none.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorOutOfMemory = 2,
  hipErrorNoDevice = 100,
  hipErrorInvalidDevice = 101,
  hipErrorInvalidImage = 200,
  hipErrorNoBinaryForGpu = 209,
  hipErrorInvalidKernelFile = 218,
  hipErrorNotFound = 500,
  hipErrorNotReady = 600,
  hipErrorLaunchFailure = 719,
  cudaErrorSymbolNotFound = 302, /* CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, HIP's too */
};

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;

/* The CUDA driver entry points used, by their exported (versioned) names, with their parameters. */
#define CUDA_SYMBOLS(X)                                                                   \
  X(cuGetErrorName, (CUresult, const char **))                                            \
  X(cuGetErrorString, (CUresult, const char **))                                          \
  X(cuInit, (unsigned))                                                                   \
  X(cuDeviceGetCount, (int *))                                                            \
  X(cuDeviceGet, (CUdevice *, int))                                                       \
  X(cuDeviceGetName, (char *, int, CUdevice))                                             \
  X(cuDeviceGetUuid_v2, (unsigned char *, CUdevice))                                      \
  X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                                    \
  X(cuCtxSetCurrent, (CUcontext))                                                         \
  X(cuMemGetInfo_v2, (size_t *, size_t *))                                                \
  X(cuStreamCreate, (void **, unsigned))                                                  \
  X(cuStreamDestroy_v2, (void *))                                                         \
  X(cuStreamSynchronize, (void *))                                                        \
  X(cuStreamWaitEvent, (void *, void *, unsigned))                                        \
  X(cuEventCreate, (void **, unsigned))                                                   \
  X(cuEventDestroy_v2, (void *))                                                          \
  X(cuEventRecord, (void *, void *))                                                      \
  X(cuEventSynchronize, (void *))                                                         \
  X(cuEventQuery, (void *))                                                               \
  X(cuEventElapsedTime, (float *, void *, void *))                                        \
  X(cuMemAlloc_v2, (CUdeviceptr *, size_t))                                               \
  X(cuMemFree_v2, (CUdeviceptr))                                                          \
  X(cuMemHostAlloc, (void **, size_t, unsigned))                                          \
  X(cuMemFreeHost, (void *))                                                              \
  X(cuMemcpyHtoDAsync_v2, (CUdeviceptr, const void *, size_t, void *))                    \
  X(cuMemcpyDtoHAsync_v2, (void *, CUdeviceptr, size_t, void *))                          \
  X(cuMemcpyDtoDAsync_v2, (CUdeviceptr, CUdeviceptr, size_t, void *))                     \
  X(cuMemsetD8Async, (CUdeviceptr, unsigned char, size_t, void *))                        \
  X(cuMemsetD16Async, (CUdeviceptr, unsigned short, size_t, void *))                      \
  X(cuMemsetD32Async, (CUdeviceptr, unsigned, size_t, void *))                            \
  X(cuModuleLoadDataEx, (void **, const void *, unsigned, int *, void **))                \
  X(cuModuleUnload, (void *))                                                             \
  X(cuModuleGetFunction, (void **, void *, const char *))                                 \
  X(cuFuncSetAttribute, (void *, int, int))                                               \
  X(cuLaunchKernel, (void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,  \
                     unsigned, void *, void **, void **))

#define DECLARE(name, args) static CUresult(*p_##name) args;
CUDA_SYMBOLS(DECLARE)
#undef DECLARE

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_status = hipErrorNoDevice;

static void load_cuda(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return; /* no NVIDIA driver: no device, as ROCm says on a host without a GPU */
#define RESOLVE(name, args)                                                               \
  if (!(p_##name = (CUresult(*) args)dlsym(lib, #name))) {                                \
    load_status = cudaErrorSymbolNotFound;                                                \
    return;                                                                               \
  }
  CUDA_SYMBOLS(RESOLVE)
#undef RESOLVE
  load_status = p_cuInit(0);
}

static int loaded(void) {
  pthread_once(&load_once, load_cuda);
  return load_status;
}

#define REQUIRE(expression)                                                               \
  do {                                                                                    \
    int status_ = (expression);                                                           \
    if (status_ != hipSuccess) return status_;                                            \
  } while (0)

/* ---- devices and the per-thread current context -------------------------------------------- */

#define MAX_DEVICES 64
static pthread_mutex_t retain_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primary[MAX_DEVICES]; /* retained once, kept for the life of the process */
static __thread int thread_has_context;

static int device_handle(int ordinal, CUdevice *out) {
  REQUIRE(loaded());
  int count = 0;
  REQUIRE(p_cuDeviceGetCount(&count));
  if (ordinal < 0 || ordinal >= count || ordinal >= MAX_DEVICES) return hipErrorInvalidDevice;
  return p_cuDeviceGet(out, ordinal);
}

static int make_current(int ordinal) {
  CUdevice device;
  REQUIRE(device_handle(ordinal, &device));
  pthread_mutex_lock(&retain_lock);
  int status = hipSuccess;
  if (!primary[ordinal]) status = p_cuDevicePrimaryCtxRetain(&primary[ordinal], device);
  CUcontext context = primary[ordinal];
  pthread_mutex_unlock(&retain_lock);
  REQUIRE(status);
  REQUIRE(p_cuCtxSetCurrent(context));
  thread_has_context = 1;
  return hipSuccess;
}

static int with_context(void) {
  return thread_has_context ? hipSuccess : make_current(0);
}

/* ---- errors --------------------------------------------------------------------------------- */

static const struct {
  int code;
  const char *name;
} hip_names[] = {
    {hipSuccess, "hipSuccess"},
    {hipErrorInvalidValue, "hipErrorInvalidValue"},
    {hipErrorOutOfMemory, "hipErrorOutOfMemory"},
    {hipErrorNoDevice, "hipErrorNoDevice"},
    {hipErrorInvalidDevice, "hipErrorInvalidDevice"},
    {hipErrorInvalidImage, "hipErrorInvalidImage"},
    {hipErrorNoBinaryForGpu, "hipErrorNoBinaryForGpu"},
    {hipErrorInvalidKernelFile, "hipErrorInvalidKernelFile"},
    {hipErrorNotFound, "hipErrorNotFound"},
    {hipErrorNotReady, "hipErrorNotReady"},
    {hipErrorLaunchFailure, "hipErrorLaunchFailure"},
    {cudaErrorSymbolNotFound, "hipErrorSharedObjectSymbolNotFound"},
};

/* The error lookups resolve first, so they work even where a later entry point is missing. */
static int lookups_resolved(void) {
  loaded();
  return p_cuGetErrorName && p_cuGetErrorString;
}

/* HIP's names for the codes the rocm driver tells apart, CUDA's (CUDA_ERROR_...) for the rest. */
EXPORT const char *hipGetErrorName(int code) {
  for (size_t i = 0; i < sizeof hip_names / sizeof hip_names[0]; ++i)
    if (hip_names[i].code == code) return hip_names[i].name;
  const char *name = NULL;
  if (lookups_resolved()) p_cuGetErrorName(code, &name);
  return name ? name : "hipErrorUnknown";
}

/* CUDA's own words, which say what the GPU's driver saw (a PTX JIT failure, say). */
EXPORT const char *hipGetErrorString(int code) {
  const char *text = NULL;
  if (lookups_resolved()) p_cuGetErrorString(code, &text);
  if (text) return text;
  if (code == hipErrorNoDevice)
    return "no NVIDIA driver: the hip_on_cuda shim found no libcuda.so.1";
  if (code == cudaErrorSymbolNotFound) return "libcuda.so.1 lacks an entry point the shim needs";
  return "unknown error";
}

/* ---- initialisation and device queries ------------------------------------------------------ */

EXPORT int hipInit(unsigned flags) {
  REQUIRE(loaded());
  return flags ? hipErrorInvalidValue : hipSuccess;
}

EXPORT int hipGetDeviceCount(int *count) {
  REQUIRE(loaded());
  REQUIRE(p_cuDeviceGetCount(count));
  return *count ? hipSuccess : hipErrorNoDevice;
}

EXPORT int hipDeviceGet(int *device, int ordinal) {
  CUdevice handle;
  REQUIRE(device_handle(ordinal, &handle));
  *device = ordinal; /* the shim's hipDevice_t is the ordinal; calls turn it into a CUdevice */
  return hipSuccess;
}

EXPORT int hipDeviceGetName(char *name, int length, int device) {
  CUdevice handle;
  REQUIRE(device_handle(device, &handle));
  return p_cuDeviceGetName(name, length, handle);
}

EXPORT int hipDeviceGetUuid(unsigned char *uuid, int device) {
  CUdevice handle;
  REQUIRE(device_handle(device, &handle));
  return p_cuDeviceGetUuid_v2(uuid, handle);
}

EXPORT int hipSetDevice(int device) { return make_current(device); }

EXPORT int hipMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  REQUIRE(with_context());
  return p_cuMemGetInfo_v2(free_bytes, total_bytes);
}

/* ---- streams and events --------------------------------------------------------------------- */

EXPORT int hipStreamCreateWithFlags(void **stream, unsigned flags) {
  REQUIRE(with_context());
  return p_cuStreamCreate(stream, flags);
}

EXPORT int hipStreamDestroy(void *stream) {
  REQUIRE(with_context());
  return p_cuStreamDestroy_v2(stream);
}

EXPORT int hipStreamSynchronize(void *stream) {
  REQUIRE(with_context());
  return p_cuStreamSynchronize(stream);
}

EXPORT int hipStreamWaitEvent(void *stream, void *event, unsigned flags) {
  REQUIRE(with_context());
  return p_cuStreamWaitEvent(stream, event, flags);
}

EXPORT int hipEventCreateWithFlags(void **event, unsigned flags) {
  REQUIRE(with_context());
  return p_cuEventCreate(event, flags);
}

EXPORT int hipEventDestroy(void *event) {
  REQUIRE(with_context());
  return p_cuEventDestroy_v2(event);
}

EXPORT int hipEventRecord(void *event, void *stream) {
  REQUIRE(with_context());
  return p_cuEventRecord(event, stream);
}

EXPORT int hipEventSynchronize(void *event) {
  REQUIRE(with_context());
  return p_cuEventSynchronize(event);
}

EXPORT int hipEventQuery(void *event) {
  REQUIRE(with_context());
  return p_cuEventQuery(event);
}

EXPORT int hipEventElapsedTime(float *ms, void *start, void *stop) {
  REQUIRE(with_context());
  return p_cuEventElapsedTime(ms, start, stop);
}

/* ---- memory --------------------------------------------------------------------------------- */

EXPORT int hipMalloc(void **pointer, size_t bytes) {
  REQUIRE(with_context());
  if (!pointer) return hipErrorInvalidValue;
  CUdeviceptr address = 0;
  REQUIRE(p_cuMemAlloc_v2(&address, bytes));
  *pointer = (void *)(uintptr_t)address;
  return hipSuccess;
}

EXPORT int hipFree(void *pointer) {
  REQUIRE(with_context());
  return pointer ? p_cuMemFree_v2((CUdeviceptr)(uintptr_t)pointer) : hipSuccess;
}

/* HIP's pinned host memory is visible to every device at its host address: CUDA's PORTABLE (1)
 * and DEVICEMAP (2) flags say the same. Of HIP's flags only those two and WRITECOMBINED (4) have
 * a CUDA equal (same numbering); the NUMA and coherence ones have none and are dropped. */
EXPORT int hipHostMalloc(void **pointer, size_t bytes, unsigned flags) {
  REQUIRE(with_context());
  return p_cuMemHostAlloc(pointer, bytes, (flags & 4u) | 1u | 2u);
}

EXPORT int hipHostFree(void *pointer) {
  REQUIRE(with_context());
  return pointer ? p_cuMemFreeHost(pointer) : hipSuccess;
}

#define DEVICE(pointer) ((CUdeviceptr)(uintptr_t)(pointer))

EXPORT int hipMemcpyHtoDAsync(void *dst, void *src, size_t bytes, void *stream) {
  REQUIRE(with_context());
  return p_cuMemcpyHtoDAsync_v2(DEVICE(dst), src, bytes, stream);
}

EXPORT int hipMemcpyDtoHAsync(void *dst, void *src, size_t bytes, void *stream) {
  REQUIRE(with_context());
  return p_cuMemcpyDtoHAsync_v2(dst, DEVICE(src), bytes, stream);
}

EXPORT int hipMemcpyDtoDAsync(void *dst, void *src, size_t bytes, void *stream) {
  REQUIRE(with_context());
  return p_cuMemcpyDtoDAsync_v2(DEVICE(dst), DEVICE(src), bytes, stream);
}

EXPORT int hipMemsetD8Async(void *dst, unsigned char value, size_t count, void *stream) {
  REQUIRE(with_context());
  return p_cuMemsetD8Async(DEVICE(dst), value, count, stream);
}

EXPORT int hipMemsetD16Async(void *dst, unsigned short value, size_t count, void *stream) {
  REQUIRE(with_context());
  return p_cuMemsetD16Async(DEVICE(dst), value, count, stream);
}

EXPORT int hipMemsetD32Async(void *dst, int value, size_t count, void *stream) {
  REQUIRE(with_context());
  return p_cuMemsetD32Async(DEVICE(dst), (unsigned)value, count, stream);
}

/* ---- modules and launches ------------------------------------------------------------------- */

static int is_ptx_text(unsigned char c) {
  return (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t' || c == '\r';
}

/* A code object that is not an ELF (hsaco, cubin) nor a fatbin is PTX: cuModuleLoadDataEx reads
 * PTX up to a NUL, which a module's data segment does not promise, so the text (up to the first
 * byte that cannot be PTX) is copied with one. */
EXPORT int hipModuleLoadDataEx(void **module, const void *image, unsigned option_count,
                               int *options, void **values) {
  REQUIRE(with_context());
  if (!module || !image) return hipErrorInvalidValue;
  const unsigned char *bytes = image;
  static const unsigned char elf[4] = {0x7f, 'E', 'L', 'F'}, fatbin[4] = {0x50, 0xed, 0x55, 0xba};
  if (!memcmp(bytes, elf, 4) || !memcmp(bytes, fatbin, 4))
    return p_cuModuleLoadDataEx(module, image, option_count, options, values);
  size_t length = 0;
  while (is_ptx_text(bytes[length])) ++length;
  char *text = malloc(length + 1);
  if (!text) return hipErrorOutOfMemory;
  memcpy(text, bytes, length);
  text[length] = '\0';
  int status = p_cuModuleLoadDataEx(module, text, option_count, options, values);
  free(text);
  return status;
}

EXPORT int hipModuleUnload(void *module) {
  REQUIRE(with_context());
  return p_cuModuleUnload(module);
}

EXPORT int hipModuleGetFunction(void **function, void *module, const char *name) {
  REQUIRE(with_context());
  return p_cuModuleGetFunction(function, module, name);
}

#define HIP_LAUNCH_PARAM_END ((void *)3)   /* CUDA's end marker is 0; the other two agree */
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
#define CUDA_DEFAULT_SHARED_LIMIT (48 * 1024)

/* ROCm gives a kernel all of its LDS without asking; CUDA wants an opt-in above 48 KiB. HIP's
 * `extra` list (buffer pointer 1, size 2, end 3) is rewritten with CUDA's end marker. */
EXPORT int hipModuleLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz,
                                 unsigned bx, unsigned by, unsigned bz, unsigned shared_bytes,
                                 void *stream, void **params, void **extra) {
  REQUIRE(with_context());
  if (shared_bytes > CUDA_DEFAULT_SHARED_LIMIT)
    REQUIRE(p_cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 (int)shared_bytes));
  void *cuda_extra[8] = {0};
  if (extra) {
    size_t n = 0;
    for (; extra[n] != HIP_LAUNCH_PARAM_END; n += 2) {
      if (n + 2 >= sizeof cuda_extra / sizeof cuda_extra[0]) return hipErrorInvalidValue;
      cuda_extra[n] = extra[n];
      cuda_extra[n + 1] = extra[n + 1];
    }
  }
  return p_cuLaunchKernel(function, gx, gy, gz, bx, by, bz, shared_bytes, stream, params,
                          extra ? cuda_extra : NULL);
}
