"""One Vulkan device: a compute queue, the allocator and staging copies, the executable cache,
command buffers and timeline semaphores, behind the runtime's Python-driver SDK.

Queue order: every submission signals the device's own timeline semaphore with the next value,
so "everything submitted so far is done" is one wait (host copies, freeing memory, release).
The device has one queue and every recording starts with a full barrier, so a submission already
runs after everything submitted before it: a wait on a value that an earlier submission on this
queue signals is dropped rather than passed to vkQueueSubmit (a wait on a value not yet signalled
can hold the submission back until the previous one finishes, so calls could not overlap).

A traced submission (hal.h revision 4) runs a recording of its own with a timestamp around each
command (timing.py); a queue without timestamps offers no timed submit.
"""

from __future__ import annotations

import threading

from pyree.hal.vulkan import physical_device as P
from pyree.hal.vulkan.allocator import Allocator, Buffer, check_range
from pyree.hal.vulkan.command_buffer import ACCESS_HOST_READ, STAGE_HOST, CommandBuffer, full_barrier
from pyree.hal.vulkan.executable import ExecutableCache
from pyree.hal.vulkan.pipeline_cache import PipelineCacheFiles
from pyree.hal.vulkan.semaphore import VulkanSemaphore
from pyree.hal.vulkan.submission import SubmitInfo
from pyree.hal.vulkan.symbols import Functions, VulkanError, check, device_functions, ffi
from pyree.hal.vulkan.timing import Clock, Timing, create_pool, read_ticks
from pyree.runtime.hal.python_driver import HalError, PythonDevice

STYPE_DEVICE_QUEUE_CREATE_INFO, STYPE_DEVICE_CREATE_INFO = 2, 3
STYPE_COMMAND_POOL_CREATE_INFO, STYPE_COMMAND_BUFFER_ALLOCATE = 39, 40
STYPE_COMMAND_BUFFER_BEGIN = 42
POOL_RESET_COMMAND_BUFFER = 0x2
USAGE_ONE_TIME = 0x1
STAGING_CHUNK = 64 << 20


class VulkanDevice(PythonDevice):
    executable_format = "spirv"

    def __init__(self, vki: Functions, physical: P.PhysicalDevice, cache_directory: str | None):
        super().__init__()
        self.physical, self.name = physical, physical.name
        priority = ffi.new("float *", 1.0)
        queue_info = ffi.new("VkDeviceQueueCreateInfo *", {
            "sType": STYPE_DEVICE_QUEUE_CREATE_INFO, "queueFamilyIndex": physical.queue_family,
            "queueCount": 1, "pQueuePriorities": priority})
        cooperative = bool(physical.features.get("cooperativeMatrix"))
        bfloat16 = bool(physical.features.get("shaderBFloat16Type"))
        # Every optional feature it has (and the extensions cooperative-matrix and bf16 shaders
        # need); pipeline creation feedback where the driver offers it, to count cache hits.
        features, keep = P.feature_chain(physical.features, cooperative, bfloat16)
        names = [P.COOPERATIVE_MATRIX_EXTENSION] if cooperative else []
        names += [P.BFLOAT16_EXTENSION] if bfloat16 else []
        self.creation_feedback = P.CREATION_FEEDBACK_EXTENSION in physical.extensions
        if self.creation_feedback:
            names.append(P.CREATION_FEEDBACK_EXTENSION)
        extension_names = [ffi.new("char[]", name) for name in names]
        extensions = ffi.new("char *[]", extension_names or 1)
        info = ffi.new("VkDeviceCreateInfo *", {
            "sType": STYPE_DEVICE_CREATE_INFO, "pNext": features, "queueCreateInfoCount": 1,
            "pQueueCreateInfos": queue_info, "enabledExtensionCount": len(names),
            "ppEnabledExtensionNames": extensions})
        device = ffi.new("VkDevice *")
        check(vki.vkCreateDevice(physical.handle, info, ffi.NULL, device),
              f"vkCreateDevice ({physical.name})")
        self.device = device[0]
        self.vk = vk = device_functions(vki, self.device)
        queue = ffi.new("VkQueue *")
        vk.vkGetDeviceQueue(self.device, physical.queue_family, 0, queue)
        self.queue = queue[0]
        pool_info = ffi.new("VkCommandPoolCreateInfo *", {
            "sType": STYPE_COMMAND_POOL_CREATE_INFO, "flags": POOL_RESET_COMMAND_BUFFER,
            "queueFamilyIndex": physical.queue_family})
        pool = ffi.new("VkCommandPool *")
        check(vk.vkCreateCommandPool(self.device, pool_info, ffi.NULL, pool), "vkCreateCommandPool")
        self.command_pool = pool[0]
        self.lock = threading.RLock()   # queue, command pool and timeline counter
        self.allocator = Allocator(vk, self.device, P.memory_types(vki, physical.handle), self.name)
        files = PipelineCacheFiles(cache_directory, physical) if cache_directory else None
        self.executables = ExecutableCache(vk, self.device, physical, files, self.creation_feedback)
        self.timeline = VulkanSemaphore(vk, self.device, 0)
        self.submitted = 0
        self._submit_info = SubmitInfo()
        self._created_semaphores: list[VulkanSemaphore] = []
        self._retired: list[CommandBuffer] = []
        self._staging: Buffer | None = None
        self._transfer = None
        self._last_kernels: list[str] = []
        self._clock = Clock(self) if physical.timestamp_bits else None
        if self._clock is None:
            self.queue_submit_timed = None  # the SDK then offers no timed submit
        self._unread: list[Timing] = []  # timed submissions not read yet (freed at release)

    # -- queue -----------------------------------------------------------------------------------
    def allocate_command_buffer(self):
        info = ffi.new("VkCommandBufferAllocateInfo *", {
            "sType": STYPE_COMMAND_BUFFER_ALLOCATE, "commandPool": self.command_pool,
            "level": 0, "commandBufferCount": 1})
        out = ffi.new("VkCommandBuffer *")
        with self.lock:
            check(self.vk.vkAllocateCommandBuffers(self.device, info, out), "vkAllocateCommandBuffers")
        return out[0]

    def free_command_buffer(self, handle) -> None:
        with self.lock:
            self.vk.vkFreeCommandBuffers(self.device, self.command_pool, 1,
                                         ffi.new("VkCommandBuffer *", handle))

    def _submit(self, command_buffer, waits, signals) -> int:
        """One vkQueueSubmit; waits/signals are (VulkanSemaphore, value). Returns the timeline
        value that marks its completion."""
        with self.lock:
            value = self.submitted + 1
            signals = signals + [(self.timeline, value)]
            info = self._submit_info.fill(command_buffer, waits, signals)
            check(self.vk.vkQueueSubmit(self.queue, 1, info, 0), f"vkQueueSubmit on {self.name}")
            self.submitted = value
            for sem, v in signals:
                sem.queued_value = max(sem.queued_value, v)
            return value

    def wait_for(self, value: int) -> None:
        try:
            self.timeline.wait(value)
        except VulkanError as e:
            kernels = ", ".join(self._last_kernels) or "none"
            raise HalError(e.status, f"GPU work on {self.name} failed: {e.message} (kernels of "
                                     f"the last submission: {kernels})") from None

    def idle(self) -> None:
        """Waits for everything submitted so far, then frees what waited on that."""
        self.wait_for(self.submitted)
        for cb in self._retired:
            cb.destroy()
        self._retired.clear()

    def queue_submit_timed(self, command_buffer: CommandBuffer, binding_table: list, waits: list,
                           signals: list) -> Timing:
        with self.lock:
            self._clock.calibrate_if_due()
            pool = create_pool(self.vk, self.device, 2 * len(command_buffer.timed))
            try:
                recording = command_buffer.record_timed(binding_table, pool)
            except HalError:
                self.vk.vkDestroyQueryPool(self.device, pool, ffi.NULL)
                raise
            timing = Timing(command_buffer, recording, pool)
            self._unread.append(timing)
        timing.value = self.queue_submit(command_buffer, binding_table, waits, signals, recording)
        return timing

    def read_timing(self, timing: Timing) -> list[tuple[int, int, int]]:
        self.wait_for(timing.value)  # a failure names the kernels; the timing is freed at release
        timed = timing.command_buffer.timed
        ticks = read_ticks(self.vk, self.device, timing.pool, 2 * len(timed))
        with self.lock:
            self._unread.remove(timing)
            self._free_timing(timing)
        host = self._clock.host_ns
        return [(index, host(ticks[2 * k]), host(ticks[2 * k + 1]))
                for k, index in enumerate(timed)]

    def _free_timing(self, timing: Timing) -> None:
        timing.command_buffer.free(timing.recording)
        self.vk.vkDestroyQueryPool(self.device, timing.pool, ffi.NULL)

    def queue_submit(self, command_buffer: CommandBuffer, binding_table: list, waits: list,
                     signals: list, recording=None) -> int:
        """Submits ``recording`` (None: the command buffer's for this table; a timed submission
        passes its own); returns the device timeline value that marks its completion."""
        try:
            device_waits = []
            for sem, value in waits:
                if not isinstance(sem, VulkanSemaphore):
                    sem.wait(value)  # a host-only semaphore: only the host can reach its value
                elif sem._failure is not None:
                    raise sem._failure
                elif value > sem.queued_value:  # else an earlier submission here signals it
                    device_waits.append((sem, value))
            device_signals = [(s, v) for s, v in signals if isinstance(s, VulkanSemaphore)]
            with self.lock:
                if recording is None:
                    recording = command_buffer.recording_for(binding_table)
                recording.last_value = self._submit(recording.handle, device_waits, device_signals)
                self._last_kernels = command_buffer.kernel_names
            host_signals = [(s, v) for s, v in signals if not isinstance(s, VulkanSemaphore)]
            if host_signals:
                self.wait_for(recording.last_value)
                for sem, value in host_signals:
                    sem.signal(value)
            return recording.last_value
        except HalError as e:
            for sem, _ in signals:
                sem.fail(e)
            raise

    # -- memory ----------------------------------------------------------------------------------
    def allocate(self, size: int) -> Buffer:
        with self.lock:
            return self.allocator.allocate(size)

    def allocate_mapped(self, size: int) -> tuple[Buffer, int]:
        with self.lock:
            buffer = self.allocator.allocate(size, host_visible=True)
        return buffer, int(ffi.cast("uintptr_t", buffer.mapped))

    def release_buffer(self, buffer: Buffer) -> None:
        with self.lock:
            self.allocator.release(buffer, self.idle)

    def write_buffer(self, buffer: Buffer, offset: int, source: memoryview) -> None:
        check_range(buffer, offset, len(source), "write")
        if not len(source):
            return
        with self.lock:
            self.idle()
            if buffer.mapped is not None:
                ffi.memmove(buffer.mapped + offset, source, len(source))
                return
            for start in range(0, len(source), STAGING_CHUNK):
                chunk = source[start:start + STAGING_CHUNK]
                staging = self._staging_buffer(len(chunk))
                ffi.memmove(staging.mapped, chunk, len(chunk))
                self._copy(staging, 0, buffer, offset + start, len(chunk))

    def read_buffer(self, buffer: Buffer, offset: int, target: memoryview) -> None:
        check_range(buffer, offset, len(target), "read")
        if not len(target):
            return
        with self.lock:
            self.idle()
            if buffer.mapped is not None:
                ffi.memmove(target, buffer.mapped + offset, len(target))
                return
            for start in range(0, len(target), STAGING_CHUNK):
                n = min(STAGING_CHUNK, len(target) - start)
                staging = self._staging_buffer(n)
                self._copy(buffer, offset + start, staging, 0, n)
                ffi.memmove(target[start:start + n], staging.mapped, n)

    def _staging_buffer(self, size: int) -> Buffer:
        if self._staging is None or self._staging.size < size:
            if self._staging is not None:
                self.allocator.destroy_buffer(self._staging)
                self._staging = None
            self._staging = self.allocator.create(max(size, 1 << 20), host_visible=True)
        return self._staging

    def _copy(self, src: Buffer, src_offset: int, dst: Buffer, dst_offset: int, n: int) -> None:
        """A synchronous buffer-to-buffer copy through the device's transfer command buffer."""
        vk = self.vk
        if self._transfer is None:
            self._transfer = self.allocate_command_buffer()
        cb = self._transfer
        begin = ffi.new("VkCommandBufferBeginInfo *", {"sType": STYPE_COMMAND_BUFFER_BEGIN,
                                                       "flags": USAGE_ONE_TIME})
        check(vk.vkBeginCommandBuffer(cb, begin), "vkBeginCommandBuffer")
        full_barrier(vk, cb)
        region = ffi.new("VkBufferCopy *", {"srcOffset": src_offset, "dstOffset": dst_offset,
                                            "size": n})
        vk.vkCmdCopyBuffer(cb, src.handle, dst.handle, 1, region)
        full_barrier(vk, cb, STAGE_HOST, ACCESS_HOST_READ)
        check(vk.vkEndCommandBuffer(cb), "vkEndCommandBuffer")
        self.wait_for(self._submit(cb, [], []))

    # -- executables, command buffers, semaphores ------------------------------------------------
    def load_executable(self, params):
        return self.executables.load(params)   # not under self.lock: see ExecutableCache

    def release_executable(self, executable) -> None:
        self.executables.release(executable)

    def create_command_buffer(self, commands, binding_table_size: int) -> CommandBuffer:
        return CommandBuffer(self, commands, binding_table_size)

    def release_command_buffer(self, command_buffer: CommandBuffer) -> None:
        with self.lock:
            self._retired.append(command_buffer)   # freed at the next idle()

    def create_semaphore(self, initial_value: int) -> VulkanSemaphore:
        sem = VulkanSemaphore(self.vk, self.device, initial_value)
        with self.lock:
            self._created_semaphores.append(sem)
        return sem

    def release(self) -> None:
        vk = self.vk
        vk.vkDeviceWaitIdle(self.device)   # also after a device loss: then it returns at once
        for cb in self._retired:
            cb.destroy()
        for timing in self._unread:
            self._free_timing(timing)
        self.executables.destroy_all()
        self.allocator.trim()
        if self._staging is not None:
            self.allocator.destroy_buffer(self._staging)
        for sem in self._created_semaphores + [self.timeline]:
            sem.destroy()
        vk.vkDestroyCommandPool(self.device, self.command_pool, ffi.NULL)
        vk.vkDestroyDevice(self.device, ffi.NULL)
