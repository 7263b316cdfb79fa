"""LoadedModule: a verified module on a device -- executable loaded, constants (inline, or
parameters from the files given for their scopes) uploaded or mapped once, every function's
command buffers recorded -- and ``load_module``, the front door."""

from __future__ import annotations

import mmap
import os
import stat

from pyree.runtime.errors import InvocationError, ModuleError, PyreeError
from pyree.runtime.hal.device import Buffer, Device
from pyree.runtime.hal.device_start import Background
from pyree.runtime.hal.ffi import PROCESS, ffi
from pyree.runtime.module import Module, read_module
from pyree.runtime.module.verifier import tensor_bytes
from pyree.runtime.vm import executables
from pyree.runtime.vm.buffer_pool import BufferPool
from pyree.runtime.vm.function import Function

TYPE_CHECKING = False  # (typing's import is not free)
if TYPE_CHECKING:  # imported when a module has parameters: a process without pays nothing
    from pyree.runtime.parameters import ParameterIndex

# The executable's load runs on a thread beside the constants' upload where its driver spends
# it in C, without the GIL: the Vulkan driver's pipeline creation (the CUDA and ROCm drivers' JIT
# would qualify too, not measured yet). Its errors are raised as before, and first: the
# executable was loaded before the constants.
BESIDE = "spirv"
CONSTANT = 3  # BufferKind.constant

# (timeline, value) pairs and the in-place constants they may still read, of modules collected
# while calls could be in flight.
_ORPHANS: list[tuple[list, list]] = []
# The timelines and in-place constants of each live module that has such constants, by id: held
# from here, outside the module's reference cycle, so that the collector never finalizes them,
# or through them the device, in the same pass as the module (its __del__ would then ask a
# released device; after a compile's gc.freeze had put them in one generation, a later load
# raised from _release_orphans).
_HELD: dict[int, tuple[list, list]] = {}


def _reached(semaphore, value: int) -> bool:
    try:
        return semaphore.query() >= value
    except PyreeError:  # a failed timeline: its work has stopped
        return True


def _release_orphans() -> None:
    _ORPHANS[:] = [(pending, keep) for pending, keep in _ORPHANS
                   if not all(_reached(s, v) for s, v in pending)]


def _mapping(data, anchors: dict):
    """(anchor, char * to its first byte) of the mapped file that ``data`` (a memoryview) is a
    slice of, else None; one per file, kept in ``anchors``. The anchor exports the mmap itself,
    never a memoryview: the loaded module sits in a reference cycle, and the collector cannot
    clear a memoryview that still has an export (CPython then crashed while collecting the
    module)."""
    mapped = getattr(data, "obj", None)
    if not isinstance(mapped, mmap.mmap):
        return None
    if id(mapped) not in anchors:
        anchor = ffi.from_buffer(mapped, require_writable=True)
        anchors[id(mapped)] = anchor, ffi.cast("char *", anchor)
    return anchors[id(mapped)]


def _constant_refs(function):
    """The BufferRefs of ``function``'s commands (every kind's) that name a module constant."""
    for c in function.commands:
        refs = [*(c.dispatch.bindings if c.dispatch is not None else ()),
                *((c.copy.source, c.copy.target) if c.copy is not None else ()),
                *((c.fill.target,) if c.fill is not None else ()),
                *((c.check.lhs, c.check.rhs) if c.check is not None else ()),
                *((c.branch.condition,) if c.branch is not None else ())]
        yield from (r for r in refs if r is not None and r.kind == CONSTANT)


class NoSuchFunction(InvocationError, KeyError, AttributeError):
    """A function name the module does not export; also a KeyError (IREE's ``module["x"]``
    raises one) and an AttributeError (``hasattr(module, "x")`` is then False)."""

    __str__ = Exception.__str__  # KeyError's would quote the message


class LoadedModule:
    def __init__(self, module: Module, device: Device, parameters: ParameterIndex | None = None):
        self.module = module
        self.device = device
        self.pool = BufferPool(device)
        chosen = executables.select(module, device)
        # the table whose code runs here (a CPU executable's variant for this host)
        self._code = executables.code_table(module, chosen) if chosen is not None else None
        # its export tables: a kernel with run-time sizes has its grid there (module/instance.py)
        self.exports = self._code.exports if chosen is not None else []
        self.executable = None
        loading = None
        if chosen is not None:
            def load():
                return executables.load(module, chosen, self._code, device)
            if device.executable_format == BESIDE:
                loading = Background(f"pyree-load {module.name}", load)
            else:
                self.executable = load()
        try:
            self._load_constants(module, parameters)
        finally:
            if loading is not None:
                self.executable = loading.result()
        if module.tree.initializer is not None:
            self._initialize(module)
        self._functions = {f.name: Function(self, f) for f in module.tree.functions}
        if any(hasattr(c, "_source") for c in self.constants):
            _HELD[id(self)] = [f._timeline for f in self._functions.values()], self.constants

    def _initialize(self, module: Module) -> None:
        """Runs the module's initializer, which computes its ``computed`` constants from the
        parameters (IREE's const-eval: a weight's layout change once at load, not per call), and
        waits for it: every call after the load reads them. A constant that only the
        initializer reads (a weight that every function reads in its new layout) is then let go."""
        Function(self, module.tree.initializer)()
        read = {b.index for f in module.tree.functions for b in _constant_refs(f)}
        released = None
        for i, c in enumerate(module.tree.constants):
            if i not in read and not c.mutable and not c.computed:
                released = released or self.device.allocate(0)
                self.constants[i] = released

    def _load_constants(self, module: Module, parameters: ParameterIndex | None) -> None:
        device = self.device
        anchors: dict = {}
        self.constants = []
        for i, c in enumerate(module.tree.constants):
            if c.computed:  # written by the initializer
                self.constants.append(self.device.allocate(tensor_bytes(c.type)))
                continue
            p = c.parameter
            if p is not None and parameters is None:
                parameters = parameter_index([])
            data = module.bytes_of(c.data) if p is None else parameters.resolve(
                p.scope, p.key, c.type.elementType, c.type.dims,
                f"module '{module.name}' constant {i}", in_place=device.imports_host)
            # a mutable global's state is this loaded module's own: never the file's bytes
            mapping = _mapping(data, anchors) if device.imports_host and not c.mutable else None
            self.constants.append(self._constant(data, mapping))

    def __del__(self):
        """Constants used in place are the file's mapped pages, unmapped with the module, but a
        call whose results were dropped unwaited may still read them: they stay in ``_ORPHANS``
        until its timeline is reached. (Waiting here could deadlock: the collector may run on
        the very thread that must finish that work.)"""
        held = _HELD.pop(id(self), None)
        if held is None or PROCESS.exiting:
            return
        pending = [(f._timeline, f._value) for f in self._functions.values() if f._value]
        _ORPHANS.append((pending, held[1]))
        _release_orphans()

    def _hold(self, timeline) -> None:
        """Keeps a function's new timeline with the module's others (see _HELD)."""
        held = _HELD.get(id(self))
        if held is not None:
            held[0].append(timeline)

    def _constant(self, data: memoryview | bytes, mapping) -> Buffer:
        """A constant's device buffer: the mapped file's own pages (the module's, or a parameter
        file's) where the device can use host memory in place and they are 64-byte aligned (the
        constants are then in memory once, not copied), else a copy."""
        if mapping is not None and len(data):
            anchor, base = mapping
            address = int(ffi.cast("uintptr_t", ffi.from_buffer(data)))
            if address % 64 == 0:
                return self.device.import_host(base + (address - int(ffi.cast("uintptr_t", base))),
                                               len(data), anchor)
        buffer = self.device.allocate(len(data))
        if len(data):
            buffer.write(0, data)
        return buffer

    @property
    def name(self) -> str:
        return self.module.name

    @property
    def target_cpu(self) -> str | None:
        """The CPU the loaded llvm-cpu code was compiled for (its LLVM name: ``x86-64`` for
        generic, ``x86-64-v3``...): of a module with several variants, the one this host runs.
        None on a GPU device."""
        return getattr(self._code, "targetCpu", None)

    @property
    def function_names(self) -> list[str]:
        return list(self._functions)

    def __getitem__(self, name: str) -> Function:
        function = self._functions.get(name)
        if function is None:
            raise NoSuchFunction(f"module '{self.name}' has no function '{name}'; it exports: "
                                 f"{', '.join(self._functions) or 'nothing'}")
        return function

    def __getattr__(self, name: str) -> Function:
        """``module.main``; AttributeError for anything else, so ``hasattr`` answers False."""
        if name.startswith("_"):
            raise AttributeError(name)
        return self[name]

    def __contains__(self, name: str) -> bool:
        return name in self._functions

    def __repr__(self) -> str:
        return f"<LoadedModule {self.name!r} on {self.device.uri}: {', '.join(self._functions)}>"


def open_module(path_or_bytes: str | os.PathLike | bytes | bytearray | memoryview) -> Module:
    """Reads and verifies a module file (a path, read into memory of its own, or the file's
    bytes)."""
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(path_or_bytes)
    else:
        data = read_module_file(os.fspath(path_or_bytes))
    _release_orphans()
    return read_module(data)


def read_module_file(path: str) -> mmap.mmap | bytes:
    """The file's bytes in anonymous memory the module owns, never the file's own pages: what
    was verified must not change, and a file rewritten or truncated under a mapping would
    change the module's answers or kill the process with SIGBUS at its next call. Reading
    costs what the digest check costs anyway (it reads every byte); anonymous memory is
    page-aligned, so a CPU device still uses the constants in place. A pipe is read as it
    comes; any other file that is not a regular one (a device such as /dev/zero) is refused."""
    try:
        with open(path, "rb", buffering=0) as f:
            info = os.fstat(f.fileno())
            if stat.S_ISFIFO(info.st_mode):
                return f.read()
            if not stat.S_ISREG(info.st_mode):
                raise ModuleError(f"module file '{path}' is not a regular file (a device or a "
                                  f"folder)")
            # (pre-faulted: the kernel fills the pages faster than a fault per page in the read)
            populate = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)
            data = mmap.mmap(-1, info.st_size, flags=populate) if info.st_size else bytearray()
            view, done = memoryview(data), 0
            while done < len(data) and (got := f.readinto(view[done:])):
                done += got
            view.release()
            if done < len(data) or f.read(1):
                raise ModuleError(f"module file '{path}' changed size while it was read: "
                                  f"it is being written; load it once it is complete")
            return data
    except OSError as e:
        raise ModuleError(f"cannot read module file '{path}': {e.strerror or e}") from None


def parameter_index(parameters) -> ParameterIndex:
    """``load_module``'s ``parameters`` as a ParameterIndex (its files opened and indexed)."""
    from pyree.runtime.parameters import ParameterIndex

    if isinstance(parameters, ParameterIndex):
        return parameters
    if isinstance(parameters, (str, os.PathLike, tuple)):
        parameters = [parameters]
    return ParameterIndex(parameters)
