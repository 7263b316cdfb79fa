"""SDK for writing a HAL driver in Python: subclass PythonDriver and PythonDevice, call export_driver.

The SDK fills the ABI structs of hal.h with cffi callbacks and does the plumbing every driver would
repeat: handles <-> Python objects, C arguments decoded into dataclasses, recorded commands checked
against the binding table and the executables' declared exports, exceptions turned into status
codes with a thread-local last_error (HalError picks the status; MemoryError is
RESOURCE_EXHAUSTED; KeyboardInterrupt is CANCELLED and raised again once the call is back in the
runtime; anything else is INTERNAL with its text). Drivers then deal in objects only.
"""

from __future__ import annotations

import itertools
import threading

from pyree.runtime.hal.ffi import ABI_VERSION, COMMAND_SIZE, INTERRUPTED, STATUS, command_size, ffi
from pyree.runtime.hal.timeline import HalError, TimelineSemaphore
from pyree.runtime.records import Record

__all__ = [
    "Binding",
    "Command",
    "DeviceInfo",
    "ExecutableParams",
    "Export",
    "HalError",
    "PythonDevice",
    "PythonDriver",
    "TimelineSemaphore",
    "export_driver",
]

COMMAND_KINDS = {0: "dispatch", 1: "copy", 2: "fill", 3: "barrier"}


class Export(Record):
    name: str
    grid_size: tuple[int, int, int]
    block_size: tuple[int, int, int]
    shared_memory_bytes: int
    binding_min_lengths: tuple[int, ...]


class ExecutableParams(Record):
    format: str
    target: str
    code: bytes
    alt_target: str
    alt_code: bytes
    exports: tuple[Export, ...]


class Binding(Record):
    slot: int
    offset: int
    length: int


class Command(Record):
    """A recorded command, already checked by the SDK: bindings inside the binding table, a
    dispatch's export present with its bindings as many and as long as it declares, a copy's two
    ranges equally long, a fill's pattern 1, 2, 4 or 8 bytes tiling its range."""

    kind: str                      # "dispatch", "copy", "fill", "barrier"
    executable: object | None      # dispatch: what load_executable returned
    export_ordinal: int
    bindings: tuple[Binding, ...]
    push_constants: tuple[int, ...]
    fill_pattern: int
    fill_pattern_length: int
    # dispatch: its own workgroup count where the runtime computed one (hal.h revision 5), as
    # the ABI has it: (0, 0, 0) for its export's grid (and for the other kinds)
    workgroup_count: tuple[int, int, int] = (0, 0, 0)

    def workgroups(self, grid: tuple[int, int, int]) -> tuple[int, int, int]:
        """The (x, y, z) workgroups a dispatch of an export of ``grid`` runs: its own count,
        else that grid. One 0 among them runs none."""
        return self.workgroup_count if any(self.workgroup_count) else tuple(grid)


class DeviceInfo(Record):
    path: str
    name: str


class _ErrorSlot:
    """Per-object, per-thread last_error storage that outlives the call returning it."""

    def __init__(self):
        self._local = threading.local()

    def set(self, message: str) -> None:
        self._local.message = ffi.new("char[]", message.encode("utf-8", "replace"))

    def get(self):
        return getattr(self._local, "message", ffi.NULL)


_OK = STATUS["OK"]
_CANCELLED = STATUS["CANCELLED"]


def _status_of(owner, error: BaseException) -> int:
    """The status for an exception a driver raised, its message kept as the owner's last_error."""
    if isinstance(error, HalError):
        owner._errors.set(error.message)
        return STATUS.get(error.status, STATUS["UNKNOWN"])
    if isinstance(error, MemoryError):
        owner._errors.set(f"out of memory: {error}")
        return STATUS["RESOURCE_EXHAUSTED"]
    # a driver bug must become a status, never unwind through C
    owner._errors.set(f"internal error in driver: {type(error).__name__}: {error}")
    return STATUS["INTERNAL"]


def _callback(ctype: str):
    """Turns ``fn(owner, *c_args)`` into a C callback whose first argument is the owner's handle.

    One Python frame per crossing besides ``fn``: the hot path of every invoke passes here."""
    def wrap(fn):
        from_handle = ffi.from_handle

        def entry(self_ptr, *args):
            owner = from_handle(self_ptr)
            try:
                fn(owner, *args)
                return _OK
            except Exception as e:
                return _status_of(owner, e)
        return ffi.callback(ctype, entry, error=STATUS["INTERNAL"], onerror=_on_interrupt(_CANCELLED))
    return wrap


def _on_interrupt(result):
    """cffi's handler for what escapes a callback. Ctrl-C while the driver runs raises
    KeyboardInterrupt there (even before the callback's first line), and it cannot unwind
    through C: the callback returns ``result`` and ``ffi.check`` raises it again in the caller.
    Anything else cffi prints, and the callback returns its ``error`` value."""
    def handler(kind, error, trace):
        if issubclass(kind, KeyboardInterrupt):
            INTERRUPTED.pending = True
            return result
        raise error
    return handler


def _string(ptr) -> str:
    return ffi.string(ptr).decode("utf-8", "replace") if ptr != ffi.NULL else ""


class PythonDevice:
    """Base of a Python device. Override the object-level methods below; semaphores are host
    timelines (TimelineSemaphore) that the SDK manages. Subclasses call ``super().__init__()``."""

    executable_format = ""

    def __init__(self):
        self._errors = _ErrorSlot()
        self._objects: dict[int, tuple[str, object]] = {}
        self._exports: dict[int, tuple[Export, ...]] = {}  # executable handle -> its exports
        self._next_handle = itertools.count(1)
        # (command buffer handle, *binding-table handles) -> (command buffer, the table's
        # objects) of recent submits: a static-shape function submits the same few tables call
        # after call. Emptied whenever a handle is released, so a released handle is never
        # looked up from here.
        self._submits: dict[tuple, tuple[object, list]] = {}
        self._releases = 0  # handles released so far: a decode racing a release is not kept

    # -- what a driver implements (buffers, executables and command buffers are its own objects)

    def allocate(self, size: int) -> object:
        raise HalError("UNIMPLEMENTED", "allocate")

    def release_buffer(self, buffer) -> None:
        """Called when the runtime drops the handle; in-flight work may still hold the object."""

    # A driver with host-addressable memory also defines
    #     allocate_mapped(self, size) -> (buffer, host address of its bytes)
    # (hal.h, revision 1); the SDK leaves the entry NULL for a driver that does not (or sets it
    # to None). Likewise, a driver that can use host memory in place defines
    #     import_host(self, address, size) -> buffer over those bytes (hal.h, revision 2),
    # and one that shares memory with other libraries (DLPack, hal.h revision 3) defines
    #     dlpack_device(self) -> (DLPack device type, device id, stream or 0),
    #     buffer_address(self, buffer) -> the address of its bytes on that device,
    #     import_device(self, address, size) -> buffer over those bytes (never freed by it),
    # and, where it has streams, stream_wait(self, stream). One that times each command of a
    # submission (hal.h revision 4, for traces) defines
    #     queue_submit_timed(self, command_buffer, binding_table, waits, signals) -> timing,
    #     read_timing(self, timing) -> [(command index, begin ns, end ns)] in command order, on
    #         the host's monotonic clock (time.monotonic_ns), once the submission has finished
    #         (it waits; it raises the submission's error).

    def write_buffer(self, buffer, offset: int, source: memoryview) -> None:
        raise HalError("UNIMPLEMENTED", "write_buffer")

    def read_buffer(self, buffer, offset: int, target: memoryview) -> None:
        raise HalError("UNIMPLEMENTED", "read_buffer")

    def load_executable(self, params: ExecutableParams) -> object:
        raise HalError("UNIMPLEMENTED", "load_executable")

    def release_executable(self, executable) -> None:
        """Called when the runtime drops the handle; recorded command buffers may still use it."""

    def create_command_buffer(self, commands: list[Command], binding_table_size: int) -> object:
        raise HalError("UNIMPLEMENTED", "create_command_buffer")

    def release_command_buffer(self, command_buffer) -> None:
        """Called when the runtime drops the handle."""

    def queue_submit(self, command_buffer, binding_table: list, waits: list, signals: list) -> None:
        """``binding_table``: buffer objects (None for an empty slot); ``waits``/``signals``:
        (TimelineSemaphore, value) pairs. Must not wait for the work to finish."""
        raise HalError("UNIMPLEMENTED", "queue_submit")

    def release(self) -> None:
        """The runtime is done with the device."""

    def create_semaphore(self, initial_value: int) -> TimelineSemaphore:
        """A driver with device-side semaphores returns a TimelineSemaphore subclass here."""
        return TimelineSemaphore(initial_value)

    # -- handles -------------------------------------------------------------------------------
    def _register(self, kind: str, obj) -> int:
        handle = next(self._next_handle)
        self._objects[handle] = (kind, obj)
        return handle

    def _lookup(self, handle: int, kind: str):
        entry = self._objects.get(handle)
        if entry is None or entry[0] != kind:
            raise HalError("INVALID_ARGUMENT", f"handle {handle} is not a live {kind}")
        return entry[1]

    def _unregister(self, handle: int, kind: str):
        obj = self._lookup(handle, kind)
        del self._objects[handle]
        self._releases += 1
        self._submits.clear()
        return obj

    def _semaphores(self, lst) -> list[tuple[TimelineSemaphore, int]]:
        if not lst:  # NULL
            return []
        count = lst.count
        if count == 1:  # the common case: a call's one timeline
            entry = self._objects.get(lst.semaphores[0])
            if entry is not None and entry[0] == "semaphore":
                return [(entry[1], lst.values[0])]
        return [(self._lookup(h, "semaphore"), v)
                for h, v in zip(ffi.unpack(lst.semaphores, count), ffi.unpack(lst.values, count))]


def check_binding(table: list, slot: int, offset: int, length: int, what: str) -> None:
    """That binding ``slot`` of a submitted table holds a buffer (with a ``size``) covering
    [offset, offset + length): drivers check each recorded dispatch's bindings against the
    actual buffers before a kernel can touch memory out of range."""
    if slot >= len(table) or table[slot] is None:
        raise HalError("INVALID_ARGUMENT", f"{what}: binding slot {slot} is empty")
    size = table[slot].size
    if offset + length > size:
        raise HalError("OUT_OF_RANGE", f"{what}: binding [{offset}, {offset + length}) exceeds "
                                       f"its {size}-byte buffer")


def submit_in_stream_order(device: PythonDevice, stream, issue, waits: list, signals: list,
                           own: type, fault=None) -> None:
    """``queue_submit`` for a driver whose work runs in order on one ``stream`` and whose
    semaphores (type ``own``) wait and signal on it (``device_wait`` / ``device_signal``), so
    nothing blocks the host: waits on other semaphores are host waits, signals of other
    semaphores follow ``device.synchronize()``. ``issue()`` queues the work. A HalError (mapped by
    ``fault``, e.g. to name the kernels of the submission) fails every signalled semaphore."""
    for sem, value in waits:
        if isinstance(sem, own):
            sem.device_wait(stream, value)
        else:  # a host-only semaphore: its value can only be reached from the host
            sem.wait(value)
    try:
        issue()
        for sem, value in signals:
            if isinstance(sem, own):
                sem.device_signal(stream, value)
            else:
                device.synchronize()
                sem.signal(value)
    except HalError as e:
        error = fault(e) if fault is not None else e
        for sem, _ in signals:
            sem.fail(error)
        raise error from None


class PythonDriver:
    """Base of a Python driver; ``name`` is the device URI scheme."""

    name = ""

    def query_available(self) -> None:
        """Raise HalError("UNAVAILABLE", why) when the driver cannot work on this host."""

    def enumerate_devices(self) -> list[DeviceInfo]:
        return []

    def create_device(self, path: str) -> PythonDevice:
        raise HalError("UNIMPLEMENTED", "create_device")


# -- device callbacks ----------------------------------------------------------------------------

@ffi.callback("const char *(void *)", onerror=_on_interrupt(ffi.NULL))
def _last_error(self_ptr):
    return ffi.from_handle(self_ptr)._errors.get()


@_callback("pyree_status_t(void *)")
def _release(device):
    try:
        device.release()
    finally:
        _LIVE.discard(device)


@_callback("pyree_status_t(void *, uint64_t, pyree_handle_t *)")
def _allocate(device, size, out):
    out[0] = device._register("buffer", device.allocate(size))


@_callback("pyree_status_t(void *, uint64_t, pyree_handle_t *, void **)")
def _allocate_mapped(device, size, out, out_host):
    buffer, address = device.allocate_mapped(size)
    out[0] = device._register("buffer", buffer)
    out_host[0] = ffi.cast("void *", address)


@_callback("pyree_status_t(void *, void *, uint64_t, pyree_handle_t *)")
def _import_host(device, host, size, out):
    out[0] = device._register("buffer", device.import_host(int(ffi.cast("uintptr_t", host)), size))


@_callback("pyree_status_t(void *, int32_t *, int32_t *, uint64_t *)")
def _dlpack_device(device, out_type, out_id, out_stream):
    out_type[0], out_id[0], out_stream[0] = device.dlpack_device()


@_callback("pyree_status_t(void *, pyree_handle_t, uint64_t *)")
def _buffer_address(device, handle, out):
    out[0] = device.buffer_address(device._lookup(handle, "buffer"))


@_callback("pyree_status_t(void *, uint64_t, uint64_t, pyree_handle_t *)")
def _import_device(device, address, size, out):
    out[0] = device._register("buffer", device.import_device(address, size))


@_callback("pyree_status_t(void *, uint64_t)")
def _stream_wait(device, stream):
    device.stream_wait(stream)


@_callback("pyree_status_t(void *, pyree_handle_t)")
def _release_buffer(device, handle):
    device.release_buffer(device._unregister(handle, "buffer"))


@_callback("pyree_status_t(void *, pyree_handle_t, uint64_t, const void *, uint64_t)")
def _write_buffer(device, handle, offset, source, length):
    device.write_buffer(device._lookup(handle, "buffer"), offset,
                        memoryview(ffi.buffer(source, length)) if length else memoryview(b""))


@_callback("pyree_status_t(void *, pyree_handle_t, uint64_t, void *, uint64_t)")
def _read_buffer(device, handle, offset, target, length):
    device.read_buffer(device._lookup(handle, "buffer"), offset,
                       memoryview(ffi.buffer(target, length)) if length else memoryview(bytearray()))


def _decode_params(p) -> ExecutableParams:
    exports = []
    for i in range(p.export_count):
        e = p.exports[i]
        exports.append(Export(_string(e.name), tuple(e.grid_size), tuple(e.block_size),
                              e.shared_memory_bytes,
                              tuple(e.binding_min_lengths[j] for j in range(e.binding_count))))
    code = ffi.buffer(p.code, p.code_length)[:] if p.code_length else b""
    alt_code = ffi.buffer(p.alt_code, p.alt_code_length)[:] if p.alt_code_length else b""
    return ExecutableParams(_string(p.format), _string(p.target), code, _string(p.alt_target),
                            alt_code, tuple(exports))


@_callback("pyree_status_t(void *, const pyree_hal_executable_params_t *, pyree_handle_t *)")
def _load_executable(device, params, out):
    decoded = _decode_params(params)
    handle = device._register("executable", device.load_executable(decoded))
    device._exports[handle] = decoded.exports
    out[0] = handle


@_callback("pyree_status_t(void *, pyree_handle_t)")
def _release_executable(device, handle):
    device.release_executable(device._unregister(handle, "executable"))
    del device._exports[handle]


_BINDINGS_OF = {"copy": 2, "fill": 1, "barrier": 0}  # dispatch: as many as its export declares


def _decode_command(device, c, table_size: int, where: str, own_workgroups: bool) -> Command:
    kind = COMMAND_KINDS.get(c.kind)
    if kind is None:
        raise HalError("INVALID_ARGUMENT", f"{where}: unknown command kind {c.kind}")
    where = f"{where} ({kind})"
    bindings = tuple(Binding(b.slot, b.offset, b.length)
                     for b in (c.bindings[i] for i in range(c.binding_count)))
    for b in bindings:
        if b.slot >= table_size:
            raise HalError("INVALID_ARGUMENT", f"{where}: binding slot {b.slot} is outside the "
                                               f"{table_size}-entry binding table")
    executable = None
    if kind == "dispatch":
        executable = device._lookup(c.executable, "executable")
        exports = device._exports[c.executable]
        if c.export_ordinal >= len(exports):
            raise HalError("INVALID_ARGUMENT", f"{where}: export {c.export_ordinal} does not "
                                               f"exist ({len(exports)} exports)")
        export = exports[c.export_ordinal]
        if len(bindings) != len(export.binding_min_lengths):
            raise HalError("INVALID_ARGUMENT", f"{where}: kernel '{export.name}' takes "
                                               f"{len(export.binding_min_lengths)} bindings, "
                                               f"{len(bindings)} given")
        for j, (b, need) in enumerate(zip(bindings, export.binding_min_lengths)):
            if b.length < need:
                raise HalError("OUT_OF_RANGE", f"{where}: binding {j} of kernel '{export.name}' "
                                               f"is {b.length} bytes, the kernel touches {need}")
    elif len(bindings) != _BINDINGS_OF[kind]:
        raise HalError("INVALID_ARGUMENT", f"{where}: needs {_BINDINGS_OF[kind]} bindings, "
                                           f"got {len(bindings)}")
    if kind == "copy" and bindings[0].length != bindings[1].length:
        raise HalError("INVALID_ARGUMENT", f"{where}: copies {bindings[0].length} bytes into "
                                           f"{bindings[1].length}")
    width = c.fill_pattern_length
    if kind == "fill" and (width not in (1, 2, 4, 8) or bindings[0].length % width):
        raise HalError("INVALID_ARGUMENT", f"{where}: fill of {bindings[0].length} bytes with a "
                                           f"{width}-byte pattern")
    push = tuple(c.push_constants[i] for i in range(c.push_constant_count))
    workgroups = tuple(c.workgroup_count) if own_workgroups and kind == "dispatch" else (0, 0, 0)
    return Command(kind, executable, c.export_ordinal, bindings, push, c.fill_pattern, width,
                   workgroups)


@_callback("pyree_status_t(void *, uint32_t, const pyree_hal_command_t *, uint32_t, "
           "pyree_handle_t *)")
def _create_command_buffer(device, count, commands, table_size, out):
    # in the layout this device's struct declares (an older revision's: shorter commands)
    stride = command_size(device._struct)
    base = ffi.cast("char *", commands)
    decoded = [_decode_command(device, ffi.cast("pyree_hal_command_t *", base + i * stride)[0],
                               table_size, f"command {i}", stride == COMMAND_SIZE)
               for i in range(count)]
    out[0] = device._register("command buffer", device.create_command_buffer(decoded, table_size))


@_callback("pyree_status_t(void *, pyree_handle_t)")
def _release_command_buffer(device, handle):
    device.release_command_buffer(device._unregister(handle, "command buffer"))


@_callback("pyree_status_t(void *, pyree_handle_t, uint32_t, const pyree_handle_t *, "
           "const pyree_hal_semaphore_list_t *, const pyree_hal_semaphore_list_t *)")
def _queue_submit(device, handle, table_size, table, wait, signal):
    key = (handle, *table[0:table_size]) if table_size else (handle,)
    known = device._submits.get(key)
    if known is None:
        releases = device._releases
        known = _decode_submit(device, handle, key[1:])
        if len(device._submits) >= _SUBMITS_KEPT:
            device._submits.clear()
        device._submits[key] = known
        if releases != device._releases:  # (a release after this read empties it itself)
            device._submits.pop(key, None)
    # a fresh list each time: the driver may keep it (a queue) or key a cache on its contents
    device.queue_submit(known[0], known[1][:], device._semaphores(wait),
                        device._semaphores(signal))


_SUBMITS_KEPT = 64


def _decode_submit(device, handle: int, handles: tuple) -> tuple[object, list]:
    """The command buffer and binding-table objects that a submit's handles name."""
    command_buffer = device._lookup(handle, "command buffer")
    objects = device._objects
    bindings = []
    for h in handles:
        buffer = objects.get(h) if h else None
        if h and (buffer is None or buffer[0] != "buffer"):
            device._lookup(h, "buffer")  # raises the error
        bindings.append(buffer[1] if h else None)
    return command_buffer, bindings


@_callback("pyree_status_t(void *, pyree_handle_t, uint32_t, const pyree_handle_t *, "
           "const pyree_hal_semaphore_list_t *, const pyree_hal_semaphore_list_t *, "
           "pyree_handle_t *)")
def _queue_submit_timed(device, handle, table_size, table, wait, signal, out):
    command_buffer, objects = _decode_submit(device, handle,
                                             tuple(table[0:table_size]) if table_size else ())
    timing = device.queue_submit_timed(command_buffer, objects, device._semaphores(wait),
                                       device._semaphores(signal))
    out[0] = device._register("timing", timing)


@_callback("pyree_status_t(void *, pyree_handle_t, uint32_t, pyree_hal_command_time_t *, "
           "uint32_t *)")
def _read_timing(device, handle, capacity, out, out_count):
    timing = device._lookup(handle, "timing")
    del device._objects[handle]  # read once, failed or not (no cached submit names a timing)
    times = device.read_timing(timing)
    out_count[0] = len(times)
    for i, (command, begin, end) in enumerate(times[:capacity]):
        entry = out[i]
        entry.command, entry.begin_ns, entry.end_ns = command, begin, end


@_callback("pyree_status_t(void *, uint64_t, pyree_handle_t *)")
def _create_semaphore(device, initial, out):
    out[0] = device._register("semaphore", device.create_semaphore(initial))


@_callback("pyree_status_t(void *, pyree_handle_t)")
def _release_semaphore(device, handle):
    device._unregister(handle, "semaphore")


@_callback("pyree_status_t(void *, pyree_handle_t, uint64_t *)")
def _semaphore_query(device, handle, out):
    out[0] = device._lookup(handle, "semaphore").query()


@_callback("pyree_status_t(void *, pyree_handle_t, uint64_t)")
def _semaphore_signal(device, handle, value):
    device._lookup(handle, "semaphore").signal(value)


@_callback("pyree_status_t(void *, pyree_handle_t, uint64_t, uint64_t)")
def _semaphore_wait(device, handle, value, timeout_ns):
    entry = device._objects.get(handle)
    if entry is None or entry[0] != "semaphore":
        device._lookup(handle, "semaphore")  # raises the error
    entry[1].wait(value, timeout_ns)


_DEVICE_CALLBACKS = {
    "last_error": _last_error, "release": _release, "allocate": _allocate,
    "release_buffer": _release_buffer, "write_buffer": _write_buffer, "read_buffer": _read_buffer,
    "load_executable": _load_executable, "release_executable": _release_executable,
    "create_command_buffer": _create_command_buffer,
    "release_command_buffer": _release_command_buffer, "queue_submit": _queue_submit,
    "create_semaphore": _create_semaphore, "release_semaphore": _release_semaphore,
    "semaphore_query": _semaphore_query, "semaphore_signal": _semaphore_signal,
    "semaphore_wait": _semaphore_wait,
}
_LIVE: set = set()  # devices and drivers handed out to C, kept alive until released


def _device_struct(device: PythonDevice):
    device._handle = ffi.new_handle(device)
    device._format = ffi.new("char[]", device.executable_format.encode())
    vt = device._struct = ffi.new("pyree_hal_device_v1_t *")
    vt.abi_version, vt.struct_size = ABI_VERSION, ffi.sizeof("pyree_hal_device_v1_t")
    vt.self, vt.executable_format = device._handle, device._format
    vt.command_size = COMMAND_SIZE
    for field, callback in _DEVICE_CALLBACKS.items():
        setattr(vt, field, callback)
    if getattr(device, "allocate_mapped", None) is not None:
        vt.allocate_mapped = _allocate_mapped
    if getattr(device, "import_host", None) is not None:
        vt.import_host = _import_host
    if getattr(device, "dlpack_device", None) is not None:
        vt.dlpack_device, vt.buffer_address = _dlpack_device, _buffer_address
        vt.import_device = _import_device
        if getattr(device, "stream_wait", None) is not None:
            vt.stream_wait = _stream_wait
    if getattr(device, "queue_submit_timed", None) is not None:
        vt.queue_submit_timed, vt.read_timing = _queue_submit_timed, _read_timing
    _LIVE.add(device)
    return vt


# -- driver callbacks ----------------------------------------------------------------------------

@_callback("pyree_status_t(void *)")
def _query_available(driver):
    driver.query_available()


@_callback("pyree_status_t(void *, uint32_t, pyree_hal_device_info_t *, uint32_t *)")
def _enumerate_devices(driver, capacity, out_infos, out_count):
    infos = driver.enumerate_devices()
    out_count[0] = len(infos)
    for i, info in enumerate(infos[:capacity]):
        out_infos[i].path = info.path.encode()[:127]
        out_infos[i].name = info.name.encode()[:127]


@_callback("pyree_status_t(void *, const char *, pyree_hal_device_v1_t **)")
def _create_device(driver, path, out):
    out[0] = _device_struct(driver.create_device(_string(path)))


def export_driver(driver: PythonDriver) -> int:
    """Builds the driver's ABI struct, keeps it alive for the process, returns its address."""
    driver._errors = _ErrorSlot()
    driver._handle = ffi.new_handle(driver)
    driver._name = ffi.new("char[]", driver.name.encode())
    vt = driver._struct = ffi.new("pyree_hal_driver_v1_t *")
    vt.abi_version, vt.struct_size = ABI_VERSION, ffi.sizeof("pyree_hal_driver_v1_t")
    vt.name, vt.self = driver._name, driver._handle
    vt.last_error, vt.query_available = _last_error, _query_available
    vt.enumerate_devices, vt.create_device = _enumerate_devices, _create_device
    _LIVE.add(driver)
    return int(ffi.cast("uintptr_t", vt))
