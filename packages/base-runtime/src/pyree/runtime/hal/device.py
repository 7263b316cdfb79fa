"""Python wrappers over a driver's ABI structs: Driver, Device, Buffer, Executable, CommandBuffer,
Semaphore. Every call checks its status and raises DriverError with the driver's own message.

Objects release their handle when garbage collected (or on ``release()``); each holds its Device,
so a device outlives everything made from it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
from pyree.runtime.hal.ffi import INFINITE_TIMEOUT_NS, PROCESS, check, check_struct, ffi

# Parsed once: ffi.new with a type string re-parses it on every call of the hot path.
_DEVICE_INFOS = ffi.typeof("pyree_hal_device_info_t[]")
_DEVICE_OUT = ffi.typeof("pyree_hal_device_v1_t **")
_SEMAPHORE_LISTS = ffi.typeof("pyree_hal_semaphore_list_t[]")
_HANDLE_OUT = ffi.typeof("pyree_handle_t *")
_HANDLES = ffi.typeof("pyree_handle_t[]")
_U32_OUT = ffi.typeof("uint32_t *")
_U64_OUT = ffi.typeof("uint64_t *")
_U64S = ffi.typeof("uint64_t[]")


@dataclass(frozen=True)
class DeviceInfo:
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

    def _check(self, status: int, what: str) -> None:
        check(status, self._vt.last_error, self._vt.self, f"device '{self.uri}': {what}")

    def __del__(self):
        vt, self._vt = getattr(self, "_vt", None), None
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
        return Buffer(self, out[0], size)

    def load_executable(self, params) -> Executable:
        """``params``: a filled ``pyree_hal_executable_params_t *`` (see vm/executables.py)."""
        out = ffi.new(_HANDLE_OUT)
        self._check(self._vt.load_executable(self._vt.self, params, out), "load executable")
        return Executable(self, out[0])

    def create_command_buffer(self, commands, count: int, binding_table_size: int) -> CommandBuffer:
        out = ffi.new(_HANDLE_OUT)
        self._check(self._vt.create_command_buffer(self._vt.self, count, commands,
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
        if not arrays.lock.acquire(blocking=False):  # another thread submits it right now
            arrays = _SubmitArrays(n, count)
            arrays.lock.acquire()
        try:
            handles = [b.handle if b is not None else 0 for b in binding_table]
            if handles != arrays.last_table:  # a static-shape function reuses its buffers
                arrays.table[0:n] = arrays.last_table = handles
            pairs = wait + signal if signal else wait
            semaphores, values = arrays.handles, arrays.values
            for i, (semaphore, value) in enumerate(pairs):
                semaphores[i], values[i] = semaphore.handle, value
            lists = arrays.lists
            lists[0].count = waits
            if arrays.split != waits:
                arrays.split = waits
                lists[1].semaphores, lists[1].values = semaphores + waits, values + waits
            lists[1].count = count - waits
            status = self._vt.queue_submit(self._vt.self, command_buffer.handle, n, arrays.table,
                                           lists, arrays.signal_list)
        finally:
            arrays.lock.release()
        if status:
            self._check(status, "submit")


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
    _release = "release_buffer"

    def __init__(self, device: Device, handle: int, size: int):
        super().__init__(device, handle)
        self.size = size

    def write(self, offset: int, data) -> None:
        """Copies a contiguous bytes-like object (numpy array, bytes) into the buffer."""
        view = memoryview(data).cast("B") if not isinstance(data, np.ndarray) else data
        source = ffi.from_buffer(view)
        self.device._check(self.device._vt.write_buffer(self.device._vt.self, self.handle, offset,
                                                        source, len(source)),
                           f"write {len(source)} bytes at offset {offset}")

    def read_into(self, offset: int, target: np.ndarray) -> np.ndarray:
        buf = ffi.from_buffer(target, require_writable=True)
        self.device._check(self.device._vt.read_buffer(self.device._vt.self, self.handle, offset,
                                                       buf, len(buf)),
                           f"read {len(buf)} bytes at offset {offset}")
        return target

    def read(self, offset: int, length: int) -> bytes:
        return self.read_into(offset, np.empty(length, np.uint8)).tobytes()


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


class CommandBuffer(_Resource):
    _release = "release_command_buffer"

    def __init__(self, device: Device, handle: int, binding_table_size: int):
        super().__init__(device, handle)
        self.binding_table_size = binding_table_size
        self.submit_arrays = _SubmitArrays(binding_table_size, 4)


class Semaphore(_Resource):
    _release = "release_semaphore"

    def query(self) -> int:
        out = ffi.new(_U64_OUT)
        self.device._check(self.device._vt.semaphore_query(self.device._vt.self, self.handle, out),
                           "query semaphore")
        return out[0]

    def signal(self, value: int) -> None:
        self.device._check(self.device._vt.semaphore_signal(self.device._vt.self, self.handle,
                                                            value), f"signal semaphore to {value}")

    def wait(self, value: int, timeout_s: float | None = None) -> None:
        """Blocks until the semaphore reaches ``value``; DriverError DEADLINE_EXCEEDED on timeout,
        or the error of a failed submission that should have signalled it."""
        ns = INFINITE_TIMEOUT_NS if timeout_s is None else max(0, int(timeout_s * 1e9))
        self.device._check(self.device._vt.semaphore_wait(self.device._vt.self, self.handle, value,
                                                          ns), f"wait for semaphore value {value}")
