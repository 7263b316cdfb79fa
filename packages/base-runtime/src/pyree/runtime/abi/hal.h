/* pyree HAL ABI, version 1: the only way a driver plugs into pyree.runtime.
 *
 * This text is given to cffi's ffi.cdef as it is, so it uses only what cdef accepts.
 * A driver is found through the Python entry-point group "pyree.runtime.drivers": the entry point
 * is a callable taking no arguments and returning the address (int) of a pyree_hal_driver_v1_t that
 * the driver keeps alive. The runtime checks abi_version and struct_size of every struct it is
 * handed and refuses a mismatch by name.
 *
 * Every function returns a pyree_status_t (0 is OK; codes follow IREE/absl). On failure the
 * object's last_error(self) returns the message of the most recent failure on this thread.
 * Lifetimes are explicit: what create_* / allocate / load_* return is released by release_*.
 *
 * Revisions append fields to a struct and never change earlier ones, so abi_version stays 1: a
 * struct_size that ends before a field means the driver predates it (see "Revision 1" below).
 */

#define PYREE_HAL_ABI_VERSION 1
#define PYREE_HAL_ABI_REVISION 5

#define PYREE_STATUS_OK 0
#define PYREE_STATUS_CANCELLED 1
#define PYREE_STATUS_UNKNOWN 2
#define PYREE_STATUS_INVALID_ARGUMENT 3
#define PYREE_STATUS_DEADLINE_EXCEEDED 4
#define PYREE_STATUS_NOT_FOUND 5
#define PYREE_STATUS_RESOURCE_EXHAUSTED 8
#define PYREE_STATUS_FAILED_PRECONDITION 9
#define PYREE_STATUS_OUT_OF_RANGE 11
#define PYREE_STATUS_UNIMPLEMENTED 12
#define PYREE_STATUS_INTERNAL 13
#define PYREE_STATUS_UNAVAILABLE 14

typedef int32_t pyree_status_t;

/* Opaque driver objects (buffers, executables, command buffers, semaphores): the driver picks the
 * values; 0 is never a valid handle. */
typedef uint64_t pyree_handle_t;

typedef struct {
  char path[128];      /* what follows "<driver>://" in a device URI: "0", "GPU-<uuid>" */
  char name[128];      /* for people: "NVIDIA H100 80GB HBM3" */
} pyree_hal_device_info_t;

/* One export of an executable, as the module declares it. */
typedef struct {
  const char *name;                   /* CPU: the symbol; GPU: the kernel entry point */
  uint32_t grid_size[3];              /* GPU grid; CPU: {workgroup_count, 1, 1} */
  uint32_t block_size[3];             /* GPU only */
  uint32_t shared_memory_bytes;       /* GPU only */
  uint32_t binding_count;
  const uint64_t *binding_min_lengths;
} pyree_hal_export_t;

typedef struct {
  const char *format;                 /* "cpu", "cuda", "rocm", "spirv" (Executable.format) */
  const char *target;                 /* "elf-x86_64", "sm_90", "gfx942", a Vulkan triple */
  const void *code;                   /* cpu: ELF shared object; cuda: PTX text; rocm: hsaco; spirv: words */
  uint64_t code_length;
  const char *alt_target;             /* cuda: the cubin's arch, or "" */
  const void *alt_code;               /* cuda: cubin; NULL when absent */
  uint64_t alt_code_length;
  uint32_t export_count;
  const pyree_hal_export_t *exports;
} pyree_hal_executable_params_t;

/* Commands are recorded once against binding-table slots, so a command buffer is replayed with
 * fresh argument/result buffers on every call: the buffers come with each submit. */
typedef struct {
  uint32_t slot;                      /* index into the binding table given at submit */
  uint64_t offset;                    /* bytes */
  uint64_t length;                    /* bytes */
} pyree_hal_binding_t;

#define PYREE_HAL_COMMAND_DISPATCH 0
#define PYREE_HAL_COMMAND_COPY 1
#define PYREE_HAL_COMMAND_FILL 2
#define PYREE_HAL_COMMAND_BARRIER 3

typedef struct {
  uint32_t kind;
  uint32_t export_ordinal;            /* dispatch */
  pyree_handle_t executable;          /* dispatch */
  uint32_t binding_count;             /* dispatch: its bindings; copy: 2 (source, target); fill: 1 */
  const pyree_hal_binding_t *bindings;
  uint32_t push_constant_count;       /* dispatch */
  const uint32_t *push_constants;
  uint64_t fill_pattern;              /* fill: little-endian bits, repeated */
  uint32_t fill_pattern_length;       /* fill: 1, 2, 4 or 8 */
  /* Revision 5: a dispatch's workgroup count (x, y, z) in this recording, where its kernel has
   * run-time sizes (the module's export computes it from the dispatch's push constants, and a
   * function with run-time sizes is recorded once per size); {0, 0, 0}: its export's grid_size.
   * A CPU dispatch runs linear workgroups [0, x) (y = z = 1). Only a device whose command_size
   * (below) is this struct's size reads it; an older one is handed its own layout, without this
   * field, and never a dispatch that needs it. */
  uint32_t workgroup_count[3];
} pyree_hal_command_t;

typedef struct {
  uint32_t count;
  const pyree_handle_t *semaphores;
  const uint64_t *values;
} pyree_hal_semaphore_list_t;

/* When one command of a timed submission ran on the device (revision 4). Times are nanoseconds
 * of the host's CLOCK_MONOTONIC (Python's time.monotonic_ns), to which the driver maps its own
 * clock, so that host and device spans line up in one trace. */
typedef struct {
  uint32_t command;                   /* its index in the command buffer */
  uint64_t begin_ns;
  uint64_t end_ns;
} pyree_hal_command_time_t;

typedef struct pyree_hal_device_v1 {
  uint32_t abi_version;
  uint32_t struct_size;
  void *self;
  const char *executable_format;      /* which Executable.format this device runs */
  const char *(*last_error)(void *self);
  pyree_status_t (*release)(void *self);

  pyree_status_t (*allocate)(void *self, uint64_t size, pyree_handle_t *out_buffer);
  pyree_status_t (*release_buffer)(void *self, pyree_handle_t buffer);
  /* Synchronous host <-> device copies; ordered after all submitted work that has completed. */
  pyree_status_t (*write_buffer)(void *self, pyree_handle_t buffer, uint64_t offset,
                                 const void *source, uint64_t length);
  pyree_status_t (*read_buffer)(void *self, pyree_handle_t buffer, uint64_t offset,
                                void *target, uint64_t length);

  pyree_status_t (*load_executable)(void *self, const pyree_hal_executable_params_t *params,
                                    pyree_handle_t *out_executable);
  pyree_status_t (*release_executable)(void *self, pyree_handle_t executable);

  pyree_status_t (*create_command_buffer)(void *self, uint32_t command_count,
                                          const pyree_hal_command_t *commands,
                                          uint32_t binding_table_size,
                                          pyree_handle_t *out_command_buffer);
  pyree_status_t (*release_command_buffer)(void *self, pyree_handle_t command_buffer);
  /* The hot path: one crossing per call. Work starts once every wait is reached and signals every
   * signal value when done; the call itself does not wait for completion. */
  pyree_status_t (*queue_submit)(void *self, pyree_handle_t command_buffer,
                                 uint32_t binding_table_size, const pyree_handle_t *binding_table,
                                 const pyree_hal_semaphore_list_t *wait,
                                 const pyree_hal_semaphore_list_t *signal);

  pyree_status_t (*create_semaphore)(void *self, uint64_t initial_value, pyree_handle_t *out_semaphore);
  pyree_status_t (*release_semaphore)(void *self, pyree_handle_t semaphore);
  pyree_status_t (*semaphore_query)(void *self, pyree_handle_t semaphore, uint64_t *out_value);
  pyree_status_t (*semaphore_signal)(void *self, pyree_handle_t semaphore, uint64_t value);
  /* DEADLINE_EXCEEDED when timeout_ns passes first; a failed submission fails its waiters. */
  pyree_status_t (*semaphore_wait)(void *self, pyree_handle_t semaphore, uint64_t value,
                                   uint64_t timeout_ns);

  /* Revision 1. NULL, or absent from a smaller struct_size: the device has no such memory.
   * A buffer the host addresses directly (*out_host, valid until release_buffer), usable in
   * binding tables like any other: the runtime puts small per-call arguments and results there,
   * so a call needs no write_buffer/read_buffer crossing and no copy on the device's queue. The
   * host touches it only while no submitted work that uses it is pending; work's writes are
   * visible to the host once that work's signal values are reached. Kernels may reach it more
   * slowly than allocate's memory (a discrete GPU reads it across the bus). */
  pyree_status_t (*allocate_mapped)(void *self, uint64_t size, pyree_handle_t *out_buffer,
                                    void **out_host);

  /* Revision 2. NULL, or absent from a smaller struct_size: the device cannot use host memory
   * in place. A buffer that is the `size` bytes at `host` (64-byte aligned), without a copy: the
   * runtime hands a module's constants over this way where the module file is mapped into
   * memory, so they are in memory once. The caller keeps those bytes mapped while the buffer or
   * any submitted work that uses it lives; the memory is writable (a private mapping). */
  pyree_status_t (*import_host)(void *self, void *host, uint64_t size,
                                pyree_handle_t *out_buffer);

  /* Revision 3: sharing memory with other libraries in place (DLPack). NULL, or absent from a
   * smaller struct_size: the runtime copies instead. dlpack_device says which DLPack device this
   * device is (device_type: kDLCPU 1, kDLCUDA 2, kDLROCM 10, ...; device_id: its ordinal) and
   * the stream its work runs on, in DLPack's numbering (a CUDA/HIP stream handle; 0 for none):
   * a library handing the runtime memory orders its pending writes before that stream. */
  pyree_status_t (*dlpack_device)(void *self, int32_t *out_device_type, int32_t *out_device_id,
                                  uint64_t *out_stream);
  /* Where a buffer's bytes are, in that device's address space (a host or device pointer). */
  pyree_status_t (*buffer_address)(void *self, pyree_handle_t buffer, uint64_t *out_address);
  /* A buffer that is the `size` bytes at `address` in that address space (another library's
   * tensor), without a copy; aligned to its element size only. The caller keeps the memory
   * alive while the buffer or any work using it lives; release_buffer never frees it.
   * INVALID_ARGUMENT when this device cannot use that memory (another GPU's): the runtime then
   * reports the mismatch. */
  pyree_status_t (*import_device)(void *self, uint64_t address, uint64_t size,
                                  pyree_handle_t *out_buffer);
  /* Optional within revision 3 (NULL for a device without streams): work submitted from now on
   * starts only after the work queued so far on `stream` (DLPack numbering: 1 is CUDA's legacy
   * default stream, 2 its per-thread default stream). The runtime calls it before it reuses a
   * buffer another library read on that stream. */
  pyree_status_t (*stream_wait)(void *self, uint64_t stream);

  /* Revision 4: per-command device timing, for traces (pyree/runtime/vm/trace.py). NULL, or
   * absent from a smaller struct_size: the device cannot time commands; a trace then shows its
   * submissions only as the host saw them (from submit until the semaphore wait returned).
   * queue_submit_timed is queue_submit with every command's device time taken (each dispatch;
   * copies and fills where the device times them): the same work, possibly on a slower path
   * (a CUDA graph replays its commands in stream order, a CPU device runs dispatches one by
   * one). It never waits for the work; *out_timing names the timing until read_timing. */
  pyree_status_t (*queue_submit_timed)(void *self, pyree_handle_t command_buffer,
                                       uint32_t binding_table_size,
                                       const pyree_handle_t *binding_table,
                                       const pyree_hal_semaphore_list_t *wait,
                                       const pyree_hal_semaphore_list_t *signal,
                                       pyree_handle_t *out_timing);
  /* Waits until that submission has finished, writes its timed commands in command order (at
   * most capacity; *out_count: how many there are) and releases the timing, also when it fails:
   * a failed submission returns its error. Each timing is read exactly once. */
  pyree_status_t (*read_timing)(void *self, pyree_handle_t timing, uint32_t capacity,
                                pyree_hal_command_time_t *out_times, uint32_t *out_count);

  /* Revision 5: sizeof(pyree_hal_command_t) as the driver was built, the stride of the command
   * arrays create_command_buffer reads; the runtime refuses any other. Absent from a smaller
   * struct_size: revision 4's commands, which end before workgroup_count. */
  uint32_t command_size;
} pyree_hal_device_v1_t;

typedef struct pyree_hal_driver_v1 {
  uint32_t abi_version;
  uint32_t struct_size;
  const char *name;                   /* "local-task", "cuda": the scheme of device URIs */
  void *self;
  const char *(*last_error)(void *self);
  /* OK when the driver can work on this host; otherwise UNAVAILABLE and last_error says why. */
  pyree_status_t (*query_available)(void *self);
  pyree_status_t (*enumerate_devices)(void *self, uint32_t capacity,
                                      pyree_hal_device_info_t *out_infos, uint32_t *out_count);
  /* path: what follows "<name>://", or "" for the default device. */
  pyree_status_t (*create_device)(void *self, const char *path, pyree_hal_device_v1_t **out_device);
} pyree_hal_driver_v1_t;
