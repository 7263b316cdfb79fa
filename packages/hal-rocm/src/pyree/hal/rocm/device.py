"""One ROCm device: hipSetDevice per calling thread, one non-blocking stream, hipMalloc memory,
pinned staging, executable cache, direct command buffers and event-based timeline semaphores,
behind the runtime's Python-driver SDK (``pyree.runtime.hal.python_driver``); traced
submissions are timed with events (timing.py)."""

from __future__ import annotations

import threading
from urllib.parse import parse_qs

from pyree.hal.rocm.allocator import Allocator, DeviceBuffer, Staging, void
from pyree.hal.rocm.command_buffer import MODES, CommandBuffer
from pyree.hal.rocm.events import EventPool
from pyree.hal.rocm.executable import ExecutableCache
from pyree.hal.rocm.semaphore import RocmSemaphore
from pyree.hal.rocm.symbols import HipError, check, ffi
from pyree.hal.rocm.timing import HipEvents
from pyree.runtime.hal.event_timing import EventTimer, EventTiming
from pyree.runtime.hal.python_driver import HalError, PythonDevice, submit_in_stream_order

_NON_BLOCKING = 1   # hipStreamNonBlocking
_PATTERN_BYTES = 4096  # an 8-byte fill pattern, repeated, in pinned memory


def parse_device_path(path: str) -> str:
    """``"0"``, ``"GPU-<uuid>"`` or ``""`` (device 0); ``?command_buffer=direct`` is accepted, as
    the only mode ROCm has."""
    selector, _, query = path.partition("?")
    params = parse_qs(query, keep_blank_values=True)
    unknown = set(params) - {"command_buffer"}
    if unknown:
        raise HalError("INVALID_ARGUMENT", f"unknown rocm device parameter(s) {sorted(unknown)}; "
                                           "accepted: command_buffer=direct")
    for mode in params.get("command_buffer", []):
        if mode not in MODES:
            raise HalError("INVALID_ARGUMENT", f"unknown command buffer mode '{mode}' for rocm: "
                                               "ROCm command buffers are direct only (as in "
                                               "IREE's ROCm driver); accepted: command_buffer=direct")
    return selector


class RocmDevice(PythonDevice):
    executable_format = "rocm"

    def __init__(self, lib, dev: int, ordinal: int, name: str):
        super().__init__()
        self.lib, self.dev, self.ordinal, self.name = lib, dev, ordinal, name
        self._local = threading.local()
        self._make_current()
        out = ffi.new("void **")
        check(lib.hipStreamCreateWithFlags(out, _NON_BLOCKING), "hipStreamCreateWithFlags")
        self.stream = out[0]
        self.events = EventPool(lib)
        self.allocator = Allocator(lib, self.stream, name)
        self.staging = Staging(lib, self.stream, self.events)
        self.executables = ExecutableCache(lib, name)
        self._patterns: dict[int, object] = {}  # 8-byte fill pattern -> pinned repeats of it
        self._last_kernels: list[str] = []
        self.timer = EventTimer(HipEvents(lib))

    def _make_current(self) -> None:
        """HIP's current device is per thread, like CUDA's current context."""
        if getattr(self._local, "current", False):
            return
        check(self.lib.hipSetDevice(self.dev), f"hipSetDevice({self.dev})")
        self._local.current = True

    def describe_fault(self, error: HipError) -> HalError:
        """An asynchronous HIP error, naming the kernels submitted last."""
        kernels = ", ".join(self._last_kernels) or "none"
        return HalError("INTERNAL", f"GPU work on {self.name} failed: {error.message} "
                                    f"(kernels of the last submission: {kernels})")

    # -- memory ------------------------------------------------------------------------------
    def allocate(self, size: int) -> DeviceBuffer:
        self._make_current()
        return self.allocator.allocate(size)

    def release_buffer(self, buffer: DeviceBuffer) -> None:
        self.allocator.free(buffer)

    def _range(self, buffer: DeviceBuffer, offset: int, length: int, what: str) -> int:
        if offset + length > buffer.size:
            raise HalError("OUT_OF_RANGE", f"{what} of [{offset}, {offset + length}) is outside "
                                           f"the {buffer.size}-byte buffer")
        return buffer.ptr + offset

    def write_buffer(self, buffer: DeviceBuffer, offset: int, source: memoryview) -> None:
        self._make_current()
        if len(source):
            address = self._range(buffer, offset, len(source), "write")
            try:
                self.staging.upload(address, source)
            except HipError as e:
                raise self.describe_fault(e) from None

    def read_buffer(self, buffer: DeviceBuffer, offset: int, target: memoryview) -> None:
        self._make_current()
        if len(target):
            address = self._range(buffer, offset, len(target), "read")
            try:
                self.staging.download(address, target)
            except HipError as e:
                raise self.describe_fault(e) from None

    def fill(self, ptr: int, length: int, pattern: int, width: int) -> None:
        """Queues a fill of ``length`` bytes at ``ptr`` with a ``width``-byte pattern."""
        lib, stream = self.lib, self.stream
        pattern &= (1 << (8 * width)) - 1
        if width == 8 and pattern & 0xFFFFFFFF == pattern >> 32:
            width, pattern = 4, pattern & 0xFFFFFFFF
        if width == 1:
            check(lib.hipMemsetD8Async(void(ptr), pattern, length, stream), "hipMemsetD8Async")
        elif width == 2:
            check(lib.hipMemsetD16Async(void(ptr), pattern, length // 2, stream),
                  "hipMemsetD16Async")
        elif width == 4:
            signed = pattern - (1 << 32) if pattern >> 31 else pattern  # the entry point takes int
            check(lib.hipMemsetD32Async(void(ptr), signed, length // 4, stream),
                  "hipMemsetD32Async")
        else:
            self._fill64(ptr, length, pattern)

    def _fill64(self, ptr: int, length: int, pattern: int) -> None:
        """An 8-byte pattern whose halves differ: one copy of up to _PATTERN_BYTES from a pinned
        block of repeats (written once per pattern, never changed), then device-to-device copies
        of what is already filled, doubling each time."""
        lib, stream = self.lib, self.stream
        block = self._patterns.get(pattern)
        if block is None:
            out = ffi.new("void **")
            check(lib.hipHostMalloc(out, _PATTERN_BYTES, 0), "hipHostMalloc(fill pattern)")
            block = out[0]
            words = ffi.cast("uint64_t *", block)
            for i in range(_PATTERN_BYTES // 8):
                words[i] = pattern
            self._patterns[pattern] = block
        done = min(length, _PATTERN_BYTES)
        check(lib.hipMemcpyHtoDAsync(void(ptr), block, done, stream),
              f"hipMemcpyHtoDAsync({done} bytes of fill pattern)")
        while done < length:
            n = min(done, length - done)
            check(lib.hipMemcpyDtoDAsync(void(ptr + done), void(ptr), n, stream),
                  f"hipMemcpyDtoDAsync({n} bytes of fill)")
            done += n

    # -- executables and command buffers -----------------------------------------------------
    def load_executable(self, params):
        self._make_current()
        return self.executables.load(params)

    def release_executable(self, executable) -> None:
        self._make_current()
        self.executables.release(executable)

    def create_command_buffer(self, commands, binding_table_size: int) -> CommandBuffer:
        return CommandBuffer(self, commands, binding_table_size)

    def create_semaphore(self, initial_value: int) -> RocmSemaphore:
        return RocmSemaphore(self.lib, self.events, self.stream, initial_value,
                             self.describe_fault)

    def queue_submit(self, command_buffer: CommandBuffer, binding_table: list, waits: list,
                     signals: list) -> None:
        self._make_current()

        def issue():
            command_buffer.issue(binding_table)
            self._last_kernels = command_buffer.kernel_names

        submit_in_stream_order(self, self.stream, issue, waits, signals, RocmSemaphore,
                               self._fault)

    def queue_submit_timed(self, command_buffer: CommandBuffer, binding_table: list, waits: list,
                           signals: list) -> EventTiming:
        self._make_current()
        timing = self.timer.start(command_buffer.op_commands)

        def issue():
            command_buffer.issue_timed(binding_table, timing.events)
            self._last_kernels = command_buffer.kernel_names

        try:
            submit_in_stream_order(self, self.stream, issue, waits, signals, RocmSemaphore,
                                   self._fault)
        except HalError:
            self.timer.give_back(timing)  # (recording an event again is allowed)
            raise
        return timing

    def read_timing(self, timing: EventTiming) -> list[tuple[int, int, int]]:
        self._make_current()
        try:
            return self.timer.read(timing)
        except HipError as e:
            raise self._fault(e) from None

    def _fault(self, e: HalError) -> HalError:
        """An asynchronous failure, naming the kernels submitted last."""
        return self.describe_fault(e) if isinstance(e, HipError) and e.status == "INTERNAL" else e

    def synchronize(self) -> None:
        try:
            check(self.lib.hipStreamSynchronize(self.stream), "hipStreamSynchronize")
        except HipError as e:
            raise self.describe_fault(e) from None

    def release(self) -> None:
        self._make_current()
        try:
            self.lib.hipStreamSynchronize(self.stream)
        finally:
            self.staging.destroy()
            self.allocator.destroy()
            for block in self._patterns.values():
                self.lib.hipHostFree(block)
            self.events.destroy()
            self.timer.destroy()
            self.lib.hipStreamDestroy(self.stream)
