"""Command buffers: the VM records a function's commands once against binding-table slots; each
call brings its own buffers. A ``CommandBuffer`` keeps one recorded VkCommandBuffer (with its
descriptor sets written) per distinct set of buffers, keyed by the buffers' serials, and
resubmits it. The allocator's size pool hands a static-shape function the same buffers call after
call, so after the first call a submit is one vkQueueSubmit. At most ``RECORDINGS_PER_FUNCTION``
are kept; the oldest is freed once the GPU is done with it. Each dispatch runs its command's
workgroup count (hal.h revision 5: a function with run-time sizes is recorded once per size,
with that size's counts and push constants), and none where it has a 0.

A traced submission (hal.h revision 4) gets a recording of its own, used once, that writes a
timestamp before and after each command but barriers (``timed``: their indexes) into a query pool
(timing.py).

Every recording starts with a full memory barrier (earlier submissions on the queue happen
before) and, when one of its buffers is host-mapped, ends with one that makes its writes visible
to the host (unmapped buffers reach the host only through the device's staging copy, which has its
own); ``barrier`` commands become compute/transfer pipeline barriers. Bindings are checked
against each kernel's declared minimum lengths when recorded and against the actual buffers for
each new set of buffers, so a bad module cannot make a shader touch memory outside its buffers.

A binding whose offset is not a multiple of the device's ``minStorageBufferOffsetAlignment`` (a
view that starts mid-row: ``x[1:]`` of f32 starts at byte 4) cannot be bound where it is: its
range is copied into a buffer of the recording's own before the dispatch, bound there at offset
0, and copied back after it (barriers between), so the kernel sees and leaves the same bytes. A
range that overlaps another binding of the same dispatch is refused instead (its copy back could
undo the other's writes).
"""

from __future__ import annotations

from collections import OrderedDict

from pyree.hal.vulkan.symbols import check, ffi
from pyree.runtime.hal.python_driver import Command, HalError

RECORDINGS_PER_FUNCTION = 4
BIND_POINT_COMPUTE = 1
STAGE_TRANSFER, STAGE_HOST, STAGE_ALL_COMMANDS = 0x1000, 0x4000, 0x10000
ACCESS_HOST_READ, ACCESS_MEMORY_READ, ACCESS_MEMORY_WRITE = 0x2000, 0x8000, 0x10000
STAGE_COMPUTE = 0x20
STAGE_BOTTOM_OF_PIPE = 0x2000  # a timestamp there: once every earlier command has finished
DESCRIPTOR_STORAGE_BUFFER = 7
STYPE_DESCRIPTOR_POOL, STYPE_DESCRIPTOR_SET_ALLOCATE, STYPE_WRITE_DESCRIPTOR_SET = 33, 34, 35
STYPE_COMMAND_BUFFER_ALLOCATE, STYPE_COMMAND_BUFFER_BEGIN, STYPE_MEMORY_BARRIER = 40, 42, 46
USAGE_SIMULTANEOUS = 0x4
UPDATE_LIMIT = 65536  # vkCmdUpdateBuffer's largest write


class Recording:
    __slots__ = ("handle", "pool", "last_value", "staging")

    def __init__(self, handle, pool: int):
        self.handle = handle    # VkCommandBuffer
        self.pool = pool        # VkDescriptorPool (0 when no dispatch)
        self.last_value = 0     # the device timeline value of its latest submission
        self.staging = []       # buffers that misaligned bindings are bound through


def full_barrier(vk, cb, dst_stage=STAGE_ALL_COMMANDS, dst_access=ACCESS_MEMORY_READ | ACCESS_MEMORY_WRITE):
    barrier = ffi.new("VkMemoryBarrier *", {"sType": STYPE_MEMORY_BARRIER,
                                            "srcAccessMask": ACCESS_MEMORY_WRITE,
                                            "dstAccessMask": dst_access})
    vk.vkCmdPipelineBarrier(cb, STAGE_ALL_COMMANDS, dst_stage, 0, 1, barrier, 0, ffi.NULL, 0, ffi.NULL)


class CommandBuffer:
    def __init__(self, device, commands: list[Command], table_size: int):
        self.device, self.vk = device, device.vk
        self.commands = commands
        self.table_size = table_size
        self.kernel_names = []
        self.timed = tuple(i for i, c in enumerate(commands) if c.kind != "barrier")
        self._recordings: OrderedDict[tuple, Recording] = OrderedDict()
        for i, c in enumerate(commands):
            self._validate(i, c)

    def _validate(self, i: int, c: Command) -> None:
        """What Vulkan adds to the driver kit's checks of ``c``."""
        where = f"command {i} ({c.kind})"
        if c.kind == "dispatch":
            if len(c.push_constants) * 4 > 128:
                raise HalError("INVALID_ARGUMENT", f"{where}: {len(c.push_constants)} push "
                                                   "constants exceed 128 bytes")
            limit = self.device.physical.limits["maxComputeWorkGroupCount"]
            if any(n > m for n, m in zip(c.workgroup_count, limit)):  # (the export's: at load)
                raise HalError("OUT_OF_RANGE", f"{where}: workgroup count "
                                               f"{c.workgroup_count} exceeds the device's "
                                               f"{tuple(limit)}")
            self.kernel_names.append(c.executable.kernels[c.export_ordinal].name)
        elif c.kind == "fill":
            (t,) = c.bindings
            if (t.offset % 4 or t.length % 4) and 4 % c.fill_pattern_length:
                raise HalError("UNIMPLEMENTED", f"{where}: the vulkan driver fills a range that is "
                                                "not 4-byte aligned only with a pattern of 1, 2 "
                                                f"or 4 bytes, not {c.fill_pattern_length} at "
                                                f"[{t.offset}, {t.offset + t.length})")

    # -- submission ------------------------------------------------------------------------------
    def recording_for(self, table: list) -> Recording:
        key = tuple(b.serial if b is not None else 0 for b in table)
        recording = self._recordings.get(key)
        if recording is not None:
            self._recordings.move_to_end(key)
            return recording
        if len(self._recordings) >= RECORDINGS_PER_FUNCTION:
            _, oldest = self._recordings.popitem(last=False)
            self.device.wait_for(oldest.last_value)
            self.free(oldest)
        recording = self._record(table)
        self._recordings[key] = recording
        return recording

    def _buffer(self, table, slot: int, offset: int, length: int, where: str):
        buf = table[slot] if slot < len(table) else None
        if buf is None:
            raise HalError("INVALID_ARGUMENT", f"{where}: binding slot {slot} is empty")
        if offset + length > buf.size:
            raise HalError("OUT_OF_RANGE", f"{where}: binding [{offset}, {offset + length}) exceeds "
                                           f"its {buf.size}-byte buffer")
        return buf

    def record_timed(self, table: list, query_pool: int) -> Recording:
        """A recording for one traced submission: timestamps 2k and 2k + 1 into ``query_pool``
        around the k-th command of ``timed``. Not kept: ``free`` it once it has run."""
        return self._record(table, query_pool)

    def _record(self, table: list, query_pool: int = 0) -> Recording:
        vk, dev = self.vk, self.device
        dispatches = [c for c in self.commands if c.kind == "dispatch"
                      and all(c.workgroups(c.executable.kernels[c.export_ordinal].grid))]
        pool = self._descriptor_pool(dispatches)
        try:
            handle = dev.allocate_command_buffer()
        except HalError:
            if pool:
                vk.vkDestroyDescriptorPool(dev.device, pool, ffi.NULL)
            raise
        recording = Recording(handle, pool)
        try:
            self._fill_in(recording, table, dispatches, query_pool)
        except HalError:
            self.free(recording)
            raise
        return recording

    def _descriptor_pool(self, dispatches) -> int:
        if not dispatches:
            return 0
        vk, dev = self.vk, self.device
        descriptors = sum(len(c.bindings) for c in dispatches)
        size = ffi.new("VkDescriptorPoolSize *", {"type": DESCRIPTOR_STORAGE_BUFFER,
                                                  "descriptorCount": max(descriptors, 1)})
        info = ffi.new("VkDescriptorPoolCreateInfo *", {
            "sType": STYPE_DESCRIPTOR_POOL, "maxSets": len(dispatches), "poolSizeCount": 1,
            "pPoolSizes": size})
        pool = ffi.new("VkDescriptorPool *")
        check(vk.vkCreateDescriptorPool(dev.device, info, ffi.NULL, pool), "vkCreateDescriptorPool")
        return pool[0]

    def _fill_in(self, recording: Recording, table: list, dispatches, query_pool: int) -> None:
        vk, dev, cb = self.vk, self.device, recording.handle
        sets = {}
        if dispatches:
            layouts = ffi.new("VkDescriptorSetLayout[]",
                              [c.executable.kernels[c.export_ordinal].set_layout for c in dispatches])
            out = ffi.new("VkDescriptorSet[]", len(dispatches))
            info = ffi.new("VkDescriptorSetAllocateInfo *", {
                "sType": STYPE_DESCRIPTOR_SET_ALLOCATE, "descriptorPool": recording.pool,
                "descriptorSetCount": len(dispatches), "pSetLayouts": layouts})
            check(vk.vkAllocateDescriptorSets(dev.device, info, out), "vkAllocateDescriptorSets")
            sets = {id(c): out[i] for i, c in enumerate(dispatches)}
        begin = ffi.new("VkCommandBufferBeginInfo *", {"sType": STYPE_COMMAND_BUFFER_BEGIN,
                                                       "flags": USAGE_SIMULTANEOUS})
        check(vk.vkBeginCommandBuffer(cb, begin), "vkBeginCommandBuffer")
        if query_pool:
            vk.vkCmdResetQueryPool(cb, query_pool, 0, 2 * len(self.timed))
        full_barrier(vk, cb)
        alignment = dev.physical.limits["minStorageBufferOffsetAlignment"]
        query = 0
        for i, c in enumerate(self.commands):
            where = f"command {i} ({c.kind})"
            if query_pool and c.kind != "barrier":  # (recording, not replaying: no hot path)
                vk.vkCmdWriteTimestamp(cb, STAGE_BOTTOM_OF_PIPE, query_pool, query)
            if c.kind == "barrier":
                full_barrier(vk, cb)
            elif c.kind == "dispatch":
                if id(c) in sets:
                    self._dispatch(recording, c, sets[id(c)], table, where, alignment)
            elif c.kind == "copy":
                src, dst = c.bindings
                s = self._buffer(table, src.slot, src.offset, src.length, where)
                d = self._buffer(table, dst.slot, dst.offset, dst.length, where)
                if src.length:
                    region = ffi.new("VkBufferCopy *", {"srcOffset": src.offset,
                                                        "dstOffset": dst.offset, "size": src.length})
                    vk.vkCmdCopyBuffer(cb, s.handle, d.handle, 1, region)
            else:
                (t,) = c.bindings
                buf = self._buffer(table, t.slot, t.offset, t.length, where)
                if t.length:
                    self._fill(recording, buf.handle, t.offset, t.length, c.fill_pattern,
                               c.fill_pattern_length)
            if query_pool and c.kind != "barrier":
                vk.vkCmdWriteTimestamp(cb, STAGE_BOTTOM_OF_PIPE, query_pool, query + 1)
                query += 2
        if any(b is not None and b.mapped is not None for b in table):
            full_barrier(vk, cb, STAGE_HOST, ACCESS_HOST_READ)
        check(vk.vkEndCommandBuffer(cb), "vkEndCommandBuffer")

    def _dispatch(self, recording: Recording, c: Command, descriptor_set, table, where: str,
                  alignment: int) -> None:
        vk, dev, cb = self.vk, self.device, recording.handle
        k = c.executable.kernels[c.export_ordinal]
        n = len(c.bindings)
        infos = ffi.new("VkDescriptorBufferInfo[]", max(n, 1))
        writes = ffi.new("VkWriteDescriptorSet[]", max(n, 1))
        staged = []  # (binding's buffer, its offset, the staging buffer, length)
        for j, b in enumerate(c.bindings):
            buf = self._buffer(table, b.slot, b.offset, b.length, where)
            handle, offset = buf.handle, b.offset
            if b.offset % alignment and b.length:
                if any(i != j and o.slot == b.slot and o.offset < b.offset + b.length
                       and b.offset < o.offset + o.length for i, o in enumerate(c.bindings)):
                    raise HalError("INVALID_ARGUMENT", f"{where}: binding {j} of kernel '{k.name}' "
                                                       f"starts at offset {b.offset}, not a multiple "
                                                       f"of the device's {alignment}-byte alignment, "
                                                       "and overlaps another binding of the dispatch")
                stage = dev.allocate(b.length)
                recording.staging.append(stage)
                staged.append((buf.handle, b.offset, stage.handle, b.length))
                handle, offset = stage.handle, 0
            infos[j].buffer, infos[j].offset, infos[j].range = handle, offset, b.length
            w = writes[j]
            w.sType, w.dstSet, w.dstBinding = STYPE_WRITE_DESCRIPTOR_SET, descriptor_set, j
            w.descriptorCount, w.descriptorType = 1, DESCRIPTOR_STORAGE_BUFFER
            w.pBufferInfo = infos + j
        vk.vkUpdateDescriptorSets(dev.device, n, writes, 0, ffi.NULL)
        for source, offset, stage, length in staged:
            region = ffi.new("VkBufferCopy *", {"srcOffset": offset, "dstOffset": 0, "size": length})
            vk.vkCmdCopyBuffer(cb, source, stage, 1, region)
        if staged:
            full_barrier(vk, cb)
        vk.vkCmdBindPipeline(cb, BIND_POINT_COMPUTE, k.pipeline)
        sets = ffi.new("VkDescriptorSet *", descriptor_set)
        vk.vkCmdBindDescriptorSets(cb, BIND_POINT_COMPUTE, k.pipeline_layout, 0, 1, sets, 0, ffi.NULL)
        if c.push_constants:
            values = ffi.new("uint32_t[]", list(c.push_constants))
            vk.vkCmdPushConstants(cb, k.pipeline_layout, STAGE_COMPUTE, 0, 4 * len(values), values)
        vk.vkCmdDispatch(cb, *c.workgroups(k.grid))
        if staged:
            full_barrier(vk, cb)
            for target, offset, stage, length in staged:
                region = ffi.new("VkBufferCopy *", {"srcOffset": 0, "dstOffset": offset, "size": length})
                vk.vkCmdCopyBuffer(cb, stage, target, 1, region)
            full_barrier(vk, cb)

    def _fill(self, recording: Recording, buffer: int, offset: int, length: int, pattern: int,
              width: int) -> None:
        """``length`` bytes at ``offset`` of ``buffer``, ``pattern`` (``width`` bytes) repeated
        from ``offset`` on. vkCmdFillBuffer takes only 4-byte aligned ranges (13 int8 or f16
        values are not one): their aligned interior is filled, and the < 4 bytes before and after
        it copied (a copy takes any range) from a buffer of the recording's own holding the
        pattern, as IREE's driver does with a shader."""
        vk, cb = self.vk, recording.handle
        pattern &= (1 << (8 * width)) - 1
        if width == 8 and pattern & 0xFFFFFFFF == pattern >> 32:
            width, pattern = 4, pattern & 0xFFFFFFFF
        if (offset % 4 or length % 4) and 4 % width == 0:
            cycle = pattern.to_bytes(width, "little") * (8 // width)  # phase 0 at ``offset``
            start, end = -(-offset // 4) * 4, offset + length
            stop = max(start, end - end % 4)
            stage = self.device.allocate(8)
            recording.staging.append(stage)
            vk.vkCmdFillBuffer(cb, stage.handle, 0, 8, int.from_bytes(cycle[:4], "little"))
            full_barrier(vk, cb, STAGE_TRANSFER)
            for first, last in ((offset, min(start, end)), (stop, end)):
                if last > first:
                    phase = (first - offset) % width
                    region = ffi.new("VkBufferCopy *", {"srcOffset": phase, "dstOffset": first,
                                                        "size": last - first})
                    vk.vkCmdCopyBuffer(cb, stage.handle, buffer, 1, region)
            if stop > start:
                phase = (start - offset) % width
                vk.vkCmdFillBuffer(cb, buffer, start, stop - start,
                                   int.from_bytes(cycle[phase:phase + 4], "little"))
            return
        if width < 4:
            pattern = int.from_bytes(pattern.to_bytes(width, "little") * (4 // width), "little")
            width = 4
        if width == 4:
            vk.vkCmdFillBuffer(cb, buffer, offset, length, pattern)
            return
        # An 8-byte pattern with distinct halves: write one chunk, then double it by copies.
        first = min(length, UPDATE_LIMIT)
        data = ffi.new("uint8_t[]", pattern.to_bytes(8, "little") * (first // 8))
        vk.vkCmdUpdateBuffer(cb, buffer, offset, first, data)
        done = first
        while done < length:
            full_barrier(vk, cb, STAGE_TRANSFER)
            n = min(done, length - done)
            region = ffi.new("VkBufferCopy *", {"srcOffset": offset, "dstOffset": offset + done,
                                                "size": n})
            vk.vkCmdCopyBuffer(cb, buffer, buffer, 1, region)
            done += n

    # -- lifetime --------------------------------------------------------------------------------
    def free(self, recording: Recording) -> None:
        """Frees a recording that no submission still runs."""
        self.device.free_command_buffer(recording.handle)
        if recording.pool:
            self.vk.vkDestroyDescriptorPool(self.device.device, recording.pool, ffi.NULL)
        with self.device.lock:  # (no submission runs it: destroyed, not pooled, which may wait)
            for buffer in recording.staging:
                self.device.allocator.destroy_buffer(buffer)
        recording.staging = []

    def destroy(self) -> None:
        """The caller has waited for every submission of this command buffer."""
        for recording in self._recordings.values():
            self.free(recording)
        self._recordings.clear()

    @property
    def last_value(self) -> int:
        return max((r.last_value for r in self._recordings.values()), default=0)
