"""Python wrappers over a driver's ABI structs: Driver, Device, Buffer, Executable, CommandBuffer,
Semaphore. Every call checks its status and raises DriverError with the driver's own message.

Objects release their handle when garbage collected (or on ``release()``); each holds its Device,
so a device outlives everything made from it.
"""

from __future__ import annotations

import math
import threading

from pyree.runtime.errors import DriverError
from pyree.runtime.hal.ffi import (
    COMMAND_SIZE,
    COMMAND_SIZE_4,
    INFINITE_TIMEOUT_NS,
    PROCESS,
    STATUS,
    check,
    check_struct,
    command_size,
    ffi,
    has_field,
)
from pyree.runtime.hal.memory_statistics import MemoryStatistics
from pyree.runtime.records import Record

# Parsed once: ffi.new with a type string re-parses it on every call of the hot path.
_DEVICE_INFOS = ffi.typeof("pyree_hal_device_info_t[]")
_DEVICE_OUT = ffi.typeof("pyree_hal_device_v1_t **")
_SEMAPHORE_LISTS = ffi.typeof("pyree_hal_semaphore_list_t[]")
_HANDLE_OUT = ffi.typeof("pyree_handle_t *")
_HOST_OUT = ffi.typeof("void **")
_HANDLES = ffi.typeof("pyree_handle_t[]")
_U32_OUT = ffi.typeof("uint32_t *")
_U64_OUT = ffi.typeof("uint64_t *")
_U64S = ffi.typeof("uint64_t[]")
_I32_OUT = ffi.typeof("int32_t *")
_COMMAND_TIMES = ffi.typeof("pyree_hal_command_time_t[]")
_COMMANDS = ffi.typeof("pyree_hal_command_t[]")
_COMMAND = ffi.typeof("pyree_hal_command_t *")


class DeviceInfo(Record):
    uri: str    # "local-task://", "cuda://GPU-<uuid>"
    name: str


class Driver:
    def __init__(self, name: str, struct):
        self.name = name
        self._vt = struct

    def _check(self, status: int, what: str) -> None:
        check(status, self._vt.last_error, self._vt.self, f"driver '{self.name}': {what}")

    def query_available(self) -> None:
        self._check(self._vt.query_available(self._vt.self), "not available")

    def enumerate_devices(self) -> list[DeviceInfo]:
        count = ffi.new(_U32_OUT)
        self._check(self._vt.enumerate_devices(self._vt.self, 0, ffi.NULL, count), "enumerate devices")
        infos = ffi.new(_DEVICE_INFOS, max(count[0], 1))
        capacity = count[0]
        self._check(self._vt.enumerate_devices(self._vt.self, capacity, infos, count),
                    "enumerate devices")
        return [DeviceInfo(f"{self.name}://{ffi.string(infos[i].path).decode(errors='replace')}",
                           ffi.string(infos[i].name).decode(errors="replace"))
                for i in range(min(count[0], capacity))]

    def create_device(self, path: str) -> Device:
        out = ffi.new(_DEVICE_OUT)
        self._check(self._vt.create_device(self._vt.self, path.encode(), out),
                    f"create device '{self.name}://{path}'")
        check_struct(out[0], "pyree_hal_device_v1_t", f"device of driver '{self.name}'")
        return Device(out[0], self, f"{self.name}://{path}" if path else self.name)


class Device:
    def __init__(self, struct, driver: Driver, uri: str):
        self._vt = struct
        self.driver = driver
        self.uri = uri
        self.executable_format = ffi.string(struct.executable_format).decode()
        # whether the driver offers host-addressable buffers (hal.h, revision 1)
        self.maps_memory = has_field(struct, "pyree_hal_device_v1_t", "allocate_mapped")
        # whether it uses host memory in place (hal.h, revision 2)
        self.imports_host = has_field(struct, "pyree_hal_device_v1_t", "import_host")
        # (DLPack device type, device id, stream) where it shares memory in place (revision 3)
        self.dlpack = self._dlpack_device() \
            if has_field(struct, "pyree_hal_device_v1_t", "dlpack_device") else None
        self._waits_streams = has_field(struct, "pyree_hal_device_v1_t", "stream_wait")
        # whether it times each command of a submission (revision 4)
        self.times_commands = has_field(struct, "pyree_hal_device_v1_t", "queue_submit_timed")
        # the command layout it reads: with per-dispatch workgroup counts from revision 5 on
        self.command_size = command_size(struct)
        if self.command_size not in (COMMAND_SIZE, COMMAND_SIZE_4):
            raise DriverError(f"device '{uri}' reads commands of {self.command_size} bytes; this "
                              f"runtime writes {COMMAND_SIZE} (HAL ABI revision 5): install a "
                              f"matching driver", STATUS["FAILED_PRECONDITION"],
                              "FAILED_PRECONDITION")
        self.workgroup_counts = self.command_size == COMMAND_SIZE
        # read once: every call's submit and wait would otherwise read them from the C struct
        self._self, self._submit, self._wait = struct.self, struct.queue_submit, struct.semaphore_wait
        self._query = struct.semaphore_query
        self.statistics = MemoryStatistics()

    def _check(self, status: int, what: str) -> None:
        vt = self._vt
        if vt is None:
            raise DriverError(f"device '{self.uri}': {what}: the device was released",
                              STATUS["FAILED_PRECONDITION"], "FAILED_PRECONDITION")
        check(status, vt.last_error, vt.self, f"device '{self.uri}': {what}")

    def __del__(self):
        vt, self._vt = getattr(self, "_vt", None), None
        # a resource the collector resurrected may still be asked (LoadedModule.__del__): it
        # gets an error, never a call into the released driver
        self._submit = self._wait = self._query = _released
        try:
            if vt is not None and not PROCESS.exiting:
                vt.release(vt.self)
        except Exception:  # nothing useful to do with a failure while collecting garbage
            pass

    def __repr__(self) -> str:
        return f"Device({self.uri!r})"

    def allocate(self, size: int) -> Buffer:
        out = ffi.new(_HANDLE_OUT)
        self._check(self._vt.allocate(self._vt.self, size, out), f"allocate {size} bytes")
        return self._counted(Buffer(self, out[0], size), "DEVICE_LOCAL")

    def allocate_mapped(self, size: int) -> Buffer:
        """A buffer the host reads and writes in place (only while no work using it is pending);
        only where ``maps_memory``."""
        out, host = ffi.new(_HANDLE_OUT), ffi.new(_HOST_OUT)
        self._check(self._vt.allocate_mapped(self._vt.self, size, out, host),
                    f"allocate {size} mapped bytes")
        buffer = self._counted(Buffer(self, out[0], size), "HOST_LOCAL")
        buffer.host = memoryview(ffi.buffer(host[0], size) if size else bytearray())
        buffer._views = {}
        return buffer

    def _counted(self, buffer: Buffer, heap: str) -> Buffer:
        self.statistics.allocated(heap, buffer.size)
        buffer._heap = heap
        return buffer

    def import_host(self, pointer, size: int, owner) -> Buffer:
        """A buffer that is the ``size`` writable, 64-byte-aligned bytes at ``pointer`` (a cdata),
        without a copy; only where ``imports_host``. The buffer keeps ``owner`` (what keeps those
        bytes mapped) alive."""
        out = ffi.new(_HANDLE_OUT)
        self._check(self._vt.import_host(self._vt.self, pointer, size, out),
                    f"import {size} bytes of host memory")
        buffer = Buffer(self, out[0], size)
        buffer._source = owner
        return buffer

    def _dlpack_device(self) -> tuple[int, int, int]:
        kind, index, stream = ffi.new(_I32_OUT), ffi.new(_I32_OUT), ffi.new(_U64_OUT)
        self._check(self._vt.dlpack_device(self._vt.self, kind, index, stream), "dlpack_device")
        return kind[0], index[0], stream[0]

    def buffer_address(self, buffer: Buffer) -> int:
        """Where ``buffer``'s bytes are on the device ``dlpack`` names; only where ``dlpack``."""
        out = ffi.new(_U64_OUT)
        self._check(self._vt.buffer_address(self._vt.self, buffer.handle, out), "buffer_address")
        return out[0]

    def import_device(self, address: int, size: int, owner) -> Buffer:
        """A buffer that is another library's ``size`` bytes at ``address`` on the device
        ``dlpack`` names, without a copy; it keeps ``owner`` (what keeps them alive) alive."""
        out = ffi.new(_HANDLE_OUT)
        self._check(self._vt.import_device(self._vt.self, address, size, out),
                    f"import {size} bytes at {address:#x}")
        buffer = Buffer(self, out[0], size)
        buffer._source = owner
        return buffer

    def stream_wait(self, stream: int) -> None:
        """Later work waits for what ``stream`` (DLPack numbering) has queued; a no-op on a
        device without streams."""
        if self._waits_streams:
            self._check(self._vt.stream_wait(self._vt.self, stream), f"wait for stream {stream}")

    def load_executable(self, params) -> Executable:
        """``params``: a filled ``pyree_hal_executable_params_t *`` (see vm/executables.py)."""
        out = ffi.new(_HANDLE_OUT)
        self._check(self._vt.load_executable(self._vt.self, params, out), "load executable")
        return Executable(self, out[0])

    def command_array(self, count: int) -> tuple[object, list]:
        """A zeroed array of ``count`` commands in the layout this device reads, for
        ``create_command_buffer``: (the array, each command's struct). A device older than
        revision 5 reads shorter commands: each is a struct view at its own offset whose
        ``workgroup_count`` must not be written (``workgroup_counts`` is False)."""
        if self.workgroup_counts:
            array = ffi.new(_COMMANDS, max(count, 1))
            return array, [array[i] for i in range(count)]
        array = ffi.new("char[]", count * COMMAND_SIZE_4 + COMMAND_SIZE)
        return array, [ffi.cast(_COMMAND, array + i * COMMAND_SIZE_4)[0] for i in range(count)]

    def create_command_buffer(self, commands, count: int, binding_table_size: int) -> CommandBuffer:
        """``commands``: the array of ``command_array``, filled in."""
        out = ffi.new(_HANDLE_OUT)
        self._check(self._vt.create_command_buffer(self._vt.self, count,
                                                   ffi.cast(_COMMAND, commands),
                                                   binding_table_size, out),
                    "record command buffer")
        return CommandBuffer(self, out[0], binding_table_size)

    def create_semaphore(self, initial_value: int = 0) -> Semaphore:
        out = ffi.new(_HANDLE_OUT)
        self._check(self._vt.create_semaphore(self._vt.self, initial_value, out), "create semaphore")
        return Semaphore(self, out[0])

    def queue_submit(self, command_buffer: CommandBuffer, binding_table: list,
                     wait: list[tuple[Semaphore, int]], signal: list[tuple[Semaphore, int]]):
        """One crossing: runs a recorded command buffer on these buffers once ``wait`` is reached,
        then signals ``signal``. Does not wait for completion."""
        n, waits = len(binding_table), len(wait)
        count = waits + len(signal)
        arrays = command_buffer.submit_arrays
        if arrays.table_size < n or arrays.capacity < count:
            arrays = command_buffer.submit_arrays = _SubmitArrays(
                max(arrays.table_size, n), max(arrays.capacity, count))
        if not arrays.lock.acquire(False):  # another thread submits it right now
            arrays = _SubmitArrays(n, count)
            arrays.lock.acquire()
        try:
            handles = [b.handle if b is not None else 0 for b in binding_table]
            if handles != arrays.last_table:  # a static-shape function reuses its buffers
                arrays.table[0:n] = arrays.last_table = handles
            semaphores, values = zip(*(wait + signal)) if count else ((), ())
            if semaphores != arrays.last_semaphores or waits != arrays.split:
                arrays.set_semaphores(semaphores, waits)
            arrays.values[0:count] = values  # only the values change from call to call
            status = self._submit(self._self, command_buffer.handle, n, arrays.table, arrays.lists,
                                  arrays.signal_list)
        finally:
            arrays.lock.release()
        if status:
            self._check(status, "submit")

    def queue_submit_timed(self, command_buffer: CommandBuffer, binding_table: list,
                           wait: list[tuple[Semaphore, int]],
                           signal: list[tuple[Semaphore, int]]) -> int:
        """``queue_submit`` with each command's device time taken; only where
        ``times_commands``. Returns the timing handle that ``read_timing`` reads. (A traced
        call's path: the arrays are made afresh, not kept with the command buffer.)"""
        pairs = wait + signal
        arrays = _SubmitArrays(len(binding_table), len(pairs))
        arrays.table[0:len(binding_table)] = [b.handle if b is not None else 0
                                              for b in binding_table]
        arrays.set_semaphores(tuple(semaphore for semaphore, _ in pairs), len(wait))
        arrays.values[0:len(pairs)] = [value for _, value in pairs]
        out = ffi.new(_HANDLE_OUT)
        self._check(self._vt.queue_submit_timed(self._self, command_buffer.handle,
                                                len(binding_table), arrays.table, arrays.lists,
                                                arrays.signal_list, out), "timed submit")
        return out[0]

    def read_timing(self, timing: int, capacity: int) -> list[tuple[int, int, int]]:
        """(command index, begin ns, end ns) of each timed command of the submission that
        ``timing`` names, once it has finished (times on the host's monotonic clock); releases
        the timing. Raises the submission's error if it failed."""
        times, count = ffi.new(_COMMAND_TIMES, max(capacity, 1)), ffi.new(_U32_OUT)
        self._check(self._vt.read_timing(self._self, timing, capacity, times, count),
                    "read timing")
        return [(t.command, t.begin_ns, t.end_ns) for t in times[0:min(count[0], capacity)]]


def _released(*_) -> int:
    return STATUS["FAILED_PRECONDITION"]


class _Resource:
    """A handle owned by a device, released through ``_release`` (the vtable field's name)."""

    _release = ""

    def __init__(self, device: Device, handle: int):
        self.device = device
        self.handle = handle

    def release(self) -> None:
        handle, self.handle = self.handle, 0
        vt = self.device._vt
        if handle and vt is not None:
            self.device._check(getattr(vt, self._release)(vt.self, handle), self._release)

    def __del__(self):
        try:
            if not PROCESS.exiting:
                self.release()
        except Exception:  # nothing useful to do with a failure while collecting garbage
            pass


class Buffer(_Resource):
    """Device memory. ``write``/``read_into``/``read`` take and give any contiguous buffer
    (bytes, bytearray, memoryview, numpy arrays) without numpy; ``typed`` is numpy's view."""

    _release = "release_buffer"
    host: memoryview | None = None  # the bytes themselves (format "B"), for a mapped buffer
    _heap: str | None = None  # where the device allocated it (statistics); None if imported

    def __init__(self, device: Device, handle: int, size: int):
        super().__init__(device, handle)
        self.size = size

    def release(self) -> None:
        self.host = self._views = None  # the driver frees those bytes
        if self.handle and self._heap:
            self.device.statistics.freed(self._heap, self.size)
        super().release()

    def typed(self, dtype, shape: tuple):
        """A mapped buffer's first bytes as a numpy array (the buffer may be larger: a result's
        allocation may be); kept, as a static-shape function gets the same buffers call after
        call. (Only numpy callers ask: numpy is imported.)"""
        view = self._views.get((dtype, shape))
        if view is None:
            import numpy as np

            count = math.prod(shape)
            view = self._views[dtype, shape] = np.frombuffer(self.host, dtype, count).reshape(shape)
        return view

    def write(self, offset: int, data) -> None:
        """Copies a contiguous buffer (numpy array, bytes, memoryview) into the buffer."""
        view = memoryview(data).cast("B")
        if self.host is not None:
            self.host[offset:offset + len(view)] = view
            return
        source = ffi.from_buffer(view)
        self.device._check(self.device._vt.write_buffer(self.device._vt.self, self.handle, offset,
                                                        source, len(source)),
                           f"write {len(source)} bytes at offset {offset}")

    def read_into(self, offset: int, target):
        """Fills ``target`` (a writable contiguous buffer: numpy array, bytearray) with the
        bytes at ``offset``; returns it."""
        if self.host is not None:
            view = memoryview(target).cast("B")
            view[:] = self.host[offset:offset + len(view)]
            return target
        buf = ffi.from_buffer(target, require_writable=True)
        self.device._check(self.device._vt.read_buffer(self.device._vt.self, self.handle, offset,
                                                       buf, len(buf)),
                           f"read {len(buf)} bytes at offset {offset}")
        return target

    def read(self, offset: int, length: int) -> bytes:
        return bytes(self.read_into(offset, bytearray(length)))


class Executable(_Resource):
    _release = "release_executable"


class _SubmitArrays:
    """The C arrays one queue_submit passes (binding table, semaphore lists), kept with the
    command buffer and refilled in place: making them afresh was most of a submit's host time."""

    def __init__(self, table_size: int, capacity: int):
        self.lock = threading.Lock()
        self.table_size, self.capacity = table_size, capacity
        self.table = ffi.new(_HANDLES, max(table_size, 1))
        self.handles = ffi.new(_HANDLES, max(capacity, 1))
        self.values = ffi.new(_U64S, max(capacity, 1))
        self.lists = ffi.new(_SEMAPHORE_LISTS, 2)
        self.lists[0].semaphores, self.lists[0].values = self.handles, self.values
        self.signal_list = self.lists + 1
        self.split = -1            # the wait count lists[1] was last pointed past
        self.last_table: list = [] # the buffer handles ``table`` holds now
        self.last_semaphores: tuple = ()  # the Semaphores ``handles`` holds now

    def set_semaphores(self, semaphores: tuple, waits: int) -> None:
        """Points the wait and signal lists at ``semaphores`` (the first ``waits`` are waits)."""
        for i, semaphore in enumerate(semaphores):
            self.handles[i] = semaphore.handle
        self.last_semaphores = semaphores
        lists = self.lists
        lists[0].count, lists[1].count = waits, len(semaphores) - waits
        lists[1].semaphores, lists[1].values = self.handles + waits, self.values + waits
        self.split = waits


class CommandBuffer(_Resource):
    _release = "release_command_buffer"

    def __init__(self, device: Device, handle: int, binding_table_size: int):
        super().__init__(device, handle)
        self.binding_table_size = binding_table_size
        self.submit_arrays = _SubmitArrays(binding_table_size, 4)
        self.contents: tuple = ()  # what its commands are, for traces (set by vm/program.py)


class Semaphore(_Resource):
    _release = "release_semaphore"

    def query(self) -> int:
        out = ffi.new(_U64_OUT)
        device = self.device
        status = device._query(device._self, self.handle, out)
        if status:  # (the buffer pool queries once a call: no formatting on success)
            device._check(status, "query semaphore")
        return out[0]

    def signal(self, value: int) -> None:
        self.device._check(self.device._vt.semaphore_signal(self.device._vt.self, self.handle,
                                                            value), f"signal semaphore to {value}")

    def wait(self, value: int, timeout_s: float | None = None) -> None:
        """Blocks until the semaphore reaches ``value``; DriverError DEADLINE_EXCEEDED on timeout,
        or the error of a failed submission that should have signalled it."""
        ns = INFINITE_TIMEOUT_NS if timeout_s is None else max(0, int(timeout_s * 1e9))
        device = self.device
        status = device._wait(device._self, self.handle, value, ns)
        if status:  # the message is formatted only on failure: this is every call's last step
            self.device._check(status, f"wait for semaphore value {value}")
