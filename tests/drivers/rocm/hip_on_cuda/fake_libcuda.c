/* A stand-in libcuda.so.1 on host memory, so that CPU-only CI runs the HIP-on-CUDA shim under
 * the rocm driver through every path but kernel execution (test_shim_on_fake_cuda.py):
 * transfers, fills, copies, streams, events, module loading with the JIT's error log, and
 * launches, which check their arguments and do nothing. Work is synchronous: an event records
 * the host's monotonic clock, so the time between two events is the host's between the calls. Like the real
 * driver, it refuses calls on a thread with no current context, which checks the shim's
 * per-thread contexts. $FAKE_CUDA_DEVICES (default 1) is the device count; with 0, cuInit says
 * CUDA_ERROR_NO_DEVICE.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef unsigned long long CUdeviceptr;

enum {
  SUCCESS = 0,
  INVALID_VALUE = 1,
  OUT_OF_MEMORY = 2,
  NO_DEVICE = 100,
  INVALID_DEVICE = 101,
  INVALID_IMAGE = 200,
  INVALID_CONTEXT = 201,
  INVALID_PTX = 218,
  INVALID_HANDLE = 400,
  NOT_FOUND = 500,
  JIT_ERROR_LOG_BUFFER = 5,
  JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

#define MEMORY (1ull << 30)
#define HOST(address) ((void *)(uintptr_t)(address))
#define NEED_CONTEXT()                     \
  do {                                     \
    if (!current) return INVALID_CONTEXT;  \
  } while (0)

static __thread void *current;

static int device_count(void) {
  const char *count = getenv("FAKE_CUDA_DEVICES");
  return count ? atoi(count) : 1;
}

int cuGetErrorName(int code, const char **name) {
  static char names[1000][32];
  if (code < 0 || code >= 1000) return INVALID_VALUE;
  snprintf(names[code], sizeof names[code], "CUDA_ERROR_%d", code);
  *name = names[code];
  return SUCCESS;
}

int cuGetErrorString(int code, const char **text) { return cuGetErrorName(code, text); }

int cuInit(unsigned flags) {
  if (flags) return INVALID_VALUE;
  return device_count() ? SUCCESS : NO_DEVICE;
}

int cuDeviceGetCount(int *count) {
  *count = device_count();
  return SUCCESS;
}

int cuDeviceGet(int *device, int ordinal) {
  if (ordinal < 0 || ordinal >= device_count()) return INVALID_DEVICE;
  *device = ordinal;
  return SUCCESS;
}

int cuDeviceGetName(char *name, int length, int device) {
  snprintf(name, (size_t)length, "Fake CUDA device %d", device);
  return SUCCESS;
}

int cuDeviceGetUuid_v2(unsigned char *uuid, int device) {
  for (int i = 0; i < 16; ++i) uuid[i] = (unsigned char)(i * 0x11 + device);
  return SUCCESS;
}

int cuDevicePrimaryCtxRetain(void **context, int device) {
  *context = (void *)(uintptr_t)(0x1000 + device);
  return SUCCESS;
}

int cuCtxSetCurrent(void *context) {
  current = context;
  return SUCCESS;
}

int cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
  NEED_CONTEXT();
  *free_bytes = *total = MEMORY;
  return SUCCESS;
}

/* Streams and events are tokens: every operation has completed when its call returns. */
static int token(void **out) {
  NEED_CONTEXT();
  *out = malloc(1);
  return SUCCESS;
}

static int release(void *handle) {
  NEED_CONTEXT();
  free(handle);
  return SUCCESS;
}

static int done(void) {
  NEED_CONTEXT();
  return SUCCESS;
}

int cuStreamCreate(void **stream, unsigned flags) {
  return flags > 1 ? INVALID_VALUE : token(stream);
}
int cuStreamDestroy_v2(void *stream) { return release(stream); }
int cuStreamSynchronize(void *stream) { (void)stream; return done(); }
int cuStreamWaitEvent(void *stream, void *event, unsigned flags) {
  (void)stream, (void)event;
  return flags ? INVALID_VALUE : done();
}

/* An event: its flags and when it was last recorded (0: never). */
typedef struct {
  unsigned flags;
  uint64_t recorded_ns;
} event_t;

#define DISABLE_TIMING 2u

int cuEventCreate(void **out, unsigned flags) {
  NEED_CONTEXT();
  if (flags > 3) return INVALID_VALUE;
  event_t *event = calloc(1, sizeof *event);
  event->flags = flags;
  *out = event;
  return SUCCESS;
}
int cuEventDestroy_v2(void *event) { return release(event); }
int cuEventRecord(void *event, void *stream) {
  NEED_CONTEXT();
  (void)stream;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  ((event_t *)event)->recorded_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
  return SUCCESS;
}
int cuEventSynchronize(void *event) { (void)event; return done(); }
int cuEventQuery(void *event) { (void)event; return done(); }
int cuEventElapsedTime(float *ms, void *start, void *end) {
  NEED_CONTEXT();
  const event_t *a = start, *b = end;
  if ((a->flags | b->flags) & DISABLE_TIMING || !a->recorded_ns || !b->recorded_ns)
    return INVALID_HANDLE; /* as CUDA answers for events without timing or never recorded */
  *ms = (float)(((double)b->recorded_ns - (double)a->recorded_ns) / 1e6);
  return SUCCESS;
}

int cuMemAlloc_v2(CUdeviceptr *address, size_t bytes) {
  NEED_CONTEXT();
  if (bytes > MEMORY) return OUT_OF_MEMORY;
  *address = (CUdeviceptr)(uintptr_t)malloc(bytes ? bytes : 1);
  return SUCCESS;
}

int cuMemFree_v2(CUdeviceptr address) { return release(HOST(address)); }

int cuMemHostAlloc(void **pointer, size_t bytes, unsigned flags) {
  NEED_CONTEXT();
  if ((flags & 3) != 3) return INVALID_VALUE; /* the shim asks for PORTABLE | DEVICEMAP */
  *pointer = malloc(bytes ? bytes : 1);
  return SUCCESS;
}

int cuMemFreeHost(void *pointer) { return release(pointer); }

int cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *stream) {
  NEED_CONTEXT();
  (void)stream;
  memcpy(HOST(dst), src, n);
  return SUCCESS;
}

int cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *stream) {
  NEED_CONTEXT();
  (void)stream;
  memcpy(dst, HOST(src), n);
  return SUCCESS;
}

int cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream) {
  NEED_CONTEXT();
  (void)stream;
  memmove(HOST(dst), HOST(src), n);
  return SUCCESS;
}

int cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, void *stream) {
  NEED_CONTEXT();
  (void)stream;
  memset(HOST(dst), value, n);
  return SUCCESS;
}

int cuMemsetD16Async(CUdeviceptr dst, unsigned short value, size_t n, void *stream) {
  NEED_CONTEXT();
  (void)stream;
  for (unsigned short *p = HOST(dst); n--;) *p++ = value;
  return SUCCESS;
}

int cuMemsetD32Async(CUdeviceptr dst, unsigned value, size_t n, void *stream) {
  NEED_CONTEXT();
  (void)stream;
  for (unsigned *p = HOST(dst); n--;) *p++ = value;
  return SUCCESS;
}

/* NUL-terminated PTX only; an unknown instruction fails as ptxas does, with its log. */
int cuModuleLoadDataEx(void **module, const void *image, unsigned count, int *options,
                       void **values) {
  NEED_CONTEXT();
  const char *ptx = image;
  if (strncmp(ptx, "//", 2)) return INVALID_IMAGE;
  const char *bad = strstr(ptx, "pyree_damaged_instruction");
  if (!bad) {
    *module = strdup(ptx);
    return SUCCESS;
  }
  char *log = NULL;
  size_t size = 0;
  for (unsigned i = 0; i < count; ++i) {
    if (options[i] == JIT_ERROR_LOG_BUFFER) log = values[i];
    if (options[i] == JIT_ERROR_LOG_BUFFER_SIZE_BYTES) size = (size_t)(uintptr_t)values[i];
  }
  int line = 1;
  for (const char *p = ptx; p < bad; ++p) line += *p == '\n';
  if (log && size)
    snprintf(log, size, "ptxas application ptx input, line %d; error   : Not a name of any "
             "known instruction: 'pyree_damaged_instruction'", line);
  return INVALID_PTX;
}

int cuModuleUnload(void *module) { return release(module); }

int cuModuleGetFunction(void **function, void *module, const char *name) {
  NEED_CONTEXT();
  char entry[512];
  snprintf(entry, sizeof entry, ".entry %s(", name);
  if (!strstr(module, entry)) return NOT_FOUND;
  *function = module;
  return SUCCESS;
}

int cuFuncSetAttribute(void *function, int attribute, int value) {
  (void)function, (void)attribute, (void)value;
  return done();
}

int cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                   unsigned by, unsigned bz, unsigned shared, void *stream, void **params,
                   void **extra) {
  (void)function, (void)shared, (void)stream;
  if (!gx || !gy || !gz || !bx || !by || !bz || bx * by * bz > 1024) return INVALID_VALUE;
  return params || extra ? done() : INVALID_VALUE;
}
