"""One CUDA device: primary context, one non-blocking stream, pool allocator, pinned staging,
executable cache, command buffers and GPU timeline semaphores, behind the runtime's Python-driver
SDK (``pyree.runtime.hal.python_driver``); traced submissions are timed with events
(timing.py)."""

from __future__ import annotations

import os
import threading
from urllib.parse import parse_qs

from pyree.hal.cuda import symbols
from pyree.hal.cuda.allocator import Allocator, DeviceBuffer, MappedAllocator, MappedBuffer, Staging
from pyree.hal.cuda.command_buffer import MODES, CommandBuffer
from pyree.hal.cuda.executable import ExecutableCache
from pyree.hal.cuda.semaphore import CudaSemaphore, SemaphoreSlots
from pyree.hal.cuda.symbols import CudaError, check, create_event, ffi
from pyree.hal.cuda.timing import CudaEvents
from pyree.runtime.hal.event_timing import EventTimer, EventTiming
from pyree.runtime.hal.python_driver import HalError, PythonDevice, submit_in_stream_order

MODE_VARIABLE = "PYREE_CUDA_COMMAND_BUFFER_MODE"
DEFAULT_MODE = "graph"

# Fills with an 8-byte pattern whose halves differ (cuMemsetD32 covers the rest).
_FILL64_PTX = b"""
.version 7.0
.target sm_60
.address_size 64
.visible .entry pyree_fill64(.param .u64 dst, .param .u64 pattern, .param .u64 count)
{
  .reg .pred %p; .reg .b32 %r<4>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [dst]; ld.param.u64 %rd2, [pattern]; ld.param.u64 %rd3, [count];
  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %tid.x;
  mul.wide.u32 %rd4, %r1, %r2; cvt.u64.u32 %rd5, %r3; add.u64 %rd4, %rd4, %rd5;
  setp.ge.u64 %p, %rd4, %rd3;
  @%p bra DONE;
  shl.b64 %rd6, %rd4, 3; add.u64 %rd6, %rd1, %rd6; st.global.u64 [%rd6], %rd2;
DONE:
  ret;
}
\0"""


def parse_device_path(path: str) -> tuple[str, str]:
    """``"0?command_buffer=stream"`` -> ("0", "stream"); the mode defaults from the environment."""
    selector, _, query = path.partition("?")
    params = parse_qs(query)
    unknown = set(params) - {"command_buffer"}
    if unknown:
        raise HalError("INVALID_ARGUMENT", f"unknown cuda device parameter(s) {sorted(unknown)}; "
                                           "accepted: command_buffer=direct|stream|graph")
    mode = params.get("command_buffer", [os.environ.get(MODE_VARIABLE) or DEFAULT_MODE])[-1]
    if mode not in MODES:
        raise HalError("INVALID_ARGUMENT", f"unknown command buffer mode '{mode}' (from the "
                                           f"device URI or {MODE_VARIABLE}); accepted: "
                                           f"{', '.join(MODES)}")
    return selector, mode


class ExternalBuffer(DeviceBuffer):
    """Another library's device memory (a DLPack import): used in place, never freed here."""

    __slots__ = ()


class CudaDevice(PythonDevice):
    executable_format = "cuda"

    def __init__(self, cu, dev: int, ordinal: int, name: str, mode: str):
        super().__init__()
        self.cu, self.dev, self.ordinal, self.name, self.mode = cu, dev, ordinal, name, mode
        context = ffi.new("CUcontext *")
        check(cu.cuDevicePrimaryCtxRetain(context, dev), "cuDevicePrimaryCtxRetain")
        self.context = context[0]
        self._local = threading.local()
        self._make_current()
        value = ffi.new("int *")
        capability = []
        for attribute in (symbols.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                          symbols.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR):
            check(cu.cuDeviceGetAttribute(value, attribute, dev), "compute capability")
            capability.append(value[0])
        self.capability = tuple(capability)
        self.stream, self.capture_stream = self._create_stream(), self._create_stream()
        self.capture_lock = threading.Lock()  # one capture at a time on capture_stream
        self.allocator = Allocator(cu, ordinal, self.stream, name)
        self.mapped = MappedAllocator(cu, self.stream)
        self.staging = Staging(cu, self.stream)
        self.executables = ExecutableCache(cu, self.capability, name)
        self.semaphore_slots = SemaphoreSlots(cu)
        self._fill64 = None
        self._fill_lock = threading.Lock()
        self._last_kernels: list[str] = []
        self.timer = EventTimer(CudaEvents(cu))

    def _create_stream(self):
        out = ffi.new("CUstream *")
        check(self.cu.cuStreamCreate(out, symbols.CU_STREAM_NON_BLOCKING), "cuStreamCreate")
        return out[0]

    def _make_current(self) -> None:
        if getattr(self._local, "current", False):
            return
        check(self.cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self._local.current = True

    def describe_fault(self, error: CudaError) -> HalError:
        """An asynchronous CUDA error, naming the kernels submitted last."""
        kernels = ", ".join(self._last_kernels) or "none"
        return HalError("INTERNAL", f"GPU work on {self.name} failed: {error.message} "
                                    f"(kernels of the last submission: {kernels})")

    # -- memory ------------------------------------------------------------------------------
    def allocate(self, size: int) -> DeviceBuffer:
        self._make_current()
        return self.allocator.allocate(size)

    def allocate_mapped(self, size: int) -> tuple[MappedBuffer, int]:
        self._make_current()
        buffer = self.mapped.allocate(size)
        return buffer, buffer.host

    def dlpack_device(self) -> tuple[int, int, int]:
        """kDLCUDA (2), this ordinal, and the stream all of this device's work runs on."""
        return 2, self.ordinal, symbols.address(self.stream)

    def buffer_address(self, buffer: DeviceBuffer) -> int:
        return buffer.ptr

    def import_device(self, address: int, size: int) -> ExternalBuffer:
        """A CUDA pointer of another library (torch, CuPy) in this device's memory. Every
        library here shares the device's primary context, so the pointer is valid as it is."""
        self._make_current()
        ordinal = ffi.new("int *")
        err = self.cu.cuPointerGetAttribute(ordinal, symbols.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                            address)
        if err != symbols.CUDA_SUCCESS or ordinal[0] != self.ordinal:
            where = f"device {ordinal[0]}" if err == symbols.CUDA_SUCCESS else "no CUDA device"
            raise HalError("INVALID_ARGUMENT", f"memory at {address:#x} is on {where}, not on "
                                               f"{self.name} (device {self.ordinal})")
        return ExternalBuffer(address, size)

    def stream_wait(self, stream: int) -> None:
        """Later work on this device's stream waits for what ``stream`` has queued so far (an
        event recorded there; CUDA's handles 1 and 2 are the legacy and per-thread default
        streams, as in DLPack's numbering)."""
        self._make_current()
        cu = self.cu
        event = create_event(cu)
        try:
            check(cu.cuEventRecord(event, ffi.cast("CUstream", stream)),
                  f"cuEventRecord(stream {stream:#x})")
            check(cu.cuStreamWaitEvent(self.stream, event, 0), "cuStreamWaitEvent")
        finally:
            cu.cuEventDestroy(event)

    def release_buffer(self, buffer: DeviceBuffer) -> None:
        self._make_current()
        if type(buffer) is ExternalBuffer:
            return
        if type(buffer) is MappedBuffer:
            self.mapped.free(buffer)
        else:
            self.allocator.free(buffer)

    def _range(self, buffer: DeviceBuffer, offset: int, length: int, what: str) -> int:
        if offset + length > buffer.size:
            raise HalError("OUT_OF_RANGE", f"{what} of [{offset}, {offset + length}) is outside "
                                           f"the {buffer.size}-byte buffer")
        return buffer.ptr + offset

    def write_buffer(self, buffer: DeviceBuffer, offset: int, source: memoryview) -> None:
        self._make_current()
        if len(source):
            self.staging.upload(self._range(buffer, offset, len(source), "write"), source)

    def read_buffer(self, buffer: DeviceBuffer, offset: int, target: memoryview) -> None:
        self._make_current()
        if len(target):
            try:
                self.staging.download(self._range(buffer, offset, len(target), "read"), target)
            except CudaError as e:
                raise self.describe_fault(e) from None

    def fill(self, stream, ptr: int, length: int, pattern: int, width: int) -> None:
        cu = self.cu
        pattern &= (1 << (8 * width)) - 1
        if width == 8 and pattern & 0xFFFFFFFF == pattern >> 32:
            width, pattern = 4, pattern & 0xFFFFFFFF
        if width == 1:
            check(cu.cuMemsetD8Async(ptr, pattern, length, stream), "cuMemsetD8Async")
        elif width == 2:
            check(cu.cuMemsetD16Async(ptr, pattern, length // 2, stream), "cuMemsetD16Async")
        elif width == 4:
            check(cu.cuMemsetD32Async(ptr, pattern, length // 4, stream), "cuMemsetD32Async")
        else:
            if self._fill64 is None:
                self._load_fill64()
            count = length // 8
            values = ffi.new("uint64_t[]", [ptr, pattern, count])
            params = ffi.new("void *[]", [values + i for i in range(3)])
            check(cu.cuLaunchKernel(self._fill64, -(-count // 256), 1, 1, 256, 1, 1, 0, stream,
                                    params, ffi.NULL), "launch of pyree_fill64")

    def _load_fill64(self) -> None:
        with self._fill_lock:  # once, whichever thread fills first
            if self._fill64 is None:
                cu, module, function = self.cu, ffi.new("CUmodule *"), ffi.new("CUfunction *")
                check(cu.cuModuleLoadData(module, _FILL64_PTX), "loading the fill kernel")
                check(cu.cuModuleGetFunction(function, module[0], b"pyree_fill64"), "pyree_fill64")
                self._fill64 = function[0]

    # -- executables and command buffers -----------------------------------------------------
    def load_executable(self, params):
        self._make_current()
        return self.executables.load(params)

    def release_executable(self, executable) -> None:
        self._make_current()
        self.executables.release(executable)

    def create_command_buffer(self, commands, binding_table_size: int) -> CommandBuffer:
        self._make_current()
        return CommandBuffer(self, commands, binding_table_size, self.mode)

    def release_command_buffer(self, command_buffer: CommandBuffer) -> None:
        self._make_current()
        command_buffer.destroy()

    def create_semaphore(self, initial_value: int) -> CudaSemaphore:
        self._make_current()
        return CudaSemaphore(self.semaphore_slots, self.stream, initial_value, self.describe_fault)

    def queue_submit(self, command_buffer: CommandBuffer, binding_table: list, waits: list,
                     signals: list) -> None:
        self._make_current()

        def issue():
            command_buffer.issue(binding_table)
            self._last_kernels = command_buffer.kernel_names

        submit_in_stream_order(self, self.stream, issue, waits, signals, CudaSemaphore)

    def queue_submit_timed(self, command_buffer: CommandBuffer, binding_table: list, waits: list,
                           signals: list) -> EventTiming:
        self._make_current()
        timing = self.timer.start(command_buffer.op_commands)

        def issue():
            command_buffer.issue_timed(binding_table, timing.events)
            self._last_kernels = command_buffer.kernel_names

        try:
            submit_in_stream_order(self, self.stream, issue, waits, signals, CudaSemaphore)
        except HalError:
            self.timer.give_back(timing)  # (recording an event again is allowed)
            raise
        return timing

    def read_timing(self, timing: EventTiming) -> list[tuple[int, int, int]]:
        self._make_current()
        try:
            return self.timer.read(timing)
        except CudaError as e:
            raise self.describe_fault(e) from None

    def synchronize(self) -> None:
        try:
            check(self.cu.cuStreamSynchronize(self.stream), "cuStreamSynchronize")
        except CudaError as e:
            raise self.describe_fault(e) from None

    def release(self) -> None:
        self._make_current()
        try:
            self.cu.cuStreamSynchronize(self.stream)
        finally:
            self.staging.destroy()
            self.mapped.destroy()
            self.semaphore_slots.destroy()
            self.timer.destroy()
            self.allocator.destroy()
            self.cu.cuStreamDestroy(self.capture_stream)
            self.cu.cuStreamDestroy(self.stream)
            self.cu.cuDevicePrimaryCtxRelease(self.dev)
