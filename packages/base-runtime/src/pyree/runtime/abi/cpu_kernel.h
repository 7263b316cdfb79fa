/* The llvm-cpu kernel ABI: what the compiler's llvm-cpu backend emits and the local drivers call.
 * Also given to cffi's ffi.cdef.
 *
 * A CPU executable is an ELF shared object; each export is a symbol of type pyree_cpu_kernel_fn_t.
 * Workgroups are linear ids; a call runs ids [workgroup_begin, workgroup_end), so a driver may split
 * one dispatch across threads. The kernel checks binding_count and every binding length against
 * what it was compiled for and returns nonzero without touching memory on a mismatch; ids at or
 * past its workgroup count are ignored. So a damaged host program cannot make it write out of bounds.
 */

typedef struct {
  void *const *bindings;              /* base pointers, binding offsets already applied */
  const uint64_t *binding_lengths;    /* bytes */
  uint32_t binding_count;
  uint32_t push_constant_count;
  const uint32_t *push_constants;
} pyree_cpu_dispatch_state_t;

typedef int32_t (*pyree_cpu_kernel_fn_t)(const pyree_cpu_dispatch_state_t *state,
                                         uint64_t workgroup_begin, uint64_t workgroup_end);
