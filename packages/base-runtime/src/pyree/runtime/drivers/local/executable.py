"""Loads a "cpu" executable (an ELF shared object) and calls its kernels (abi/cpu_kernel.h).

The library is checked first (hal/images/cpu_library.py): a whole ELF shared object for this
machine, whose headers lie inside its bytes (dlopen maps segments past a cut end and dies of
SIGBUS), and whose exports are functions it defines itself (dlsym would also find ``abort`` or
``free`` in its dependencies) and not the runtime's worker loop. Its bytes then go to an
anonymous memfd that is dlopen'ed as /proc/self/fd/N (a temporary file where memfd is missing).
The fd stays open while the library is loaded: glibc identifies loaded objects by path, and a
reused fd number would otherwise hand back the previous library.
"""

from __future__ import annotations

import os
import weakref

from pyree.runtime.drivers.local.symbols import dlerror, libc
from pyree.runtime.hal.ffi import PROCESS, ffi
from pyree.runtime.hal.images import ImageError
from pyree.runtime.hal.images.cpu_library import check_kernel_symbols, read_library
from pyree.runtime.hal.python_driver import ExecutableParams, HalError
from pyree.runtime.records import Record

_RTLD_NOW = 2

# Executable target -> the machine names (os.uname().machine) that run it.
_MACHINES = {"elf-x86_64": ("x86_64", "amd64"), "elf-aarch64": ("aarch64", "arm64")}


# local-task's worker loop, which the llvm-cpu compiler emits into each library it builds
# (codegen/llvm_cpu/worker_loop.py there; drivers/local_task here): post, worker and execute.
# (A library with only v1's, from an older compiler, counts as one without the loop.)
_WORKER_LOOP = tuple(f"pyree_local_task_{name}_v2" for name in ("post", "worker", "execute"))


class WorkerLoop:
    """The worker loop's functions in one library. The library must stay loaded while a thread
    runs them: ``library()`` gives it (a weak reference, so that the library's kernels, which
    hold this, do not keep it alive) to whoever is about to call them."""

    def __init__(self, library: CpuLibrary, post, worker, execute):
        self.library = weakref.ref(library)
        self.post = ffi.cast("void (*)(uint64_t *, void *, void *, uint64_t, uint64_t)", post)
        self.worker = ffi.cast("uint64_t (*)(uint64_t *, uint64_t)", worker)
        self.execute = ffi.cast("uint64_t (*)(uint64_t *, uint64_t *, uint64_t)", execute)


class Kernel(Record):
    name: str
    fn: object                              # pyree_cpu_kernel_fn_t
    workgroup_count: int
    binding_min_lengths: tuple[int, ...]
    loop: WorkerLoop | None = None          # its library's worker loop, where it has one


class CpuLibrary:
    """One dlopen'ed kernel library and its exports, in export order."""

    def __init__(self, params: ExecutableParams):
        self._handle = self._fd = self._path = None
        if params.format != "cpu":
            raise HalError("INVALID_ARGUMENT", f"local devices run 'cpu' executables, not "
                                               f"'{params.format}'")
        machine = os.uname().machine.lower()
        if machine not in _MACHINES.get(params.target, ()):
            raise HalError("FAILED_PRECONDITION", f"the CPU executable is '{params.target}' but this "
                                                  f"host is {machine}; recompile for this host")
        try:
            check_kernel_symbols(read_library(params.code, params.target),
                                 [export.name for export in params.exports])
        except ImageError as e:
            raise HalError("INVALID_ARGUMENT", f"the CPU kernel library is refused: {e}") from None
        self._fd, self._path = self._materialize(params.code)
        self._handle = libc.dlopen(self._path.encode(), _RTLD_NOW)
        if self._handle == ffi.NULL:
            error = dlerror()
            self._close_file()
            raise HalError("INVALID_ARGUMENT", f"cannot load the CPU kernel library: {error}")
        symbols = [libc.dlsym(self._handle, name.encode()) for name in _WORKER_LOOP]
        loop = None if ffi.NULL in symbols else WorkerLoop(self, *symbols)
        self.kernels = [self._lookup(export, loop) for export in params.exports]

    @staticmethod
    def _materialize(code: bytes) -> tuple[int | None, str]:
        try:
            fd = os.memfd_create("pyree-cpu-executable", 0)
        except (AttributeError, OSError):
            import tempfile  # only where memfd is missing: other processes skip its import

            with tempfile.NamedTemporaryFile(prefix="pyree-", suffix=".so", delete=False) as f:
                f.write(code)
            return None, f.name
        view = memoryview(code)
        while view:
            view = view[os.write(fd, view):]
        return fd, f"/proc/self/fd/{fd}"

    def _lookup(self, export, loop: WorkerLoop | None) -> Kernel:
        symbol = libc.dlsym(self._handle, export.name.encode())
        if symbol == ffi.NULL:
            self.release()
            raise HalError("NOT_FOUND", f"the CPU kernel library has no symbol '{export.name}'")
        fn = ffi.cast("pyree_cpu_kernel_fn_t", symbol)
        return Kernel(export.name, fn, export.grid_size[0], export.binding_min_lengths, loop)

    def _close_file(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        else:
            os.unlink(self._path)
        self._fd = self._path = None

    def release(self) -> None:
        if self._handle is not None and self._handle != ffi.NULL:
            libc.dlclose(self._handle)
        self._handle = None
        if self._path is not None:
            self._close_file()

    def __del__(self):
        """Command buffers hold the library, so it unloads after their last use."""
        try:
            if not PROCESS.exiting:
                self.release()
        except Exception:  # nothing useful to do with a failure while collecting garbage
            pass
