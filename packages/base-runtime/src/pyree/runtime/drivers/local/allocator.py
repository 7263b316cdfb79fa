"""Host memory for the local devices: buffers of their own, 64-byte aligned, and memory the
runtime or another library owns, used in place."""

from __future__ import annotations

from pyree.runtime.hal.ffi import ffi
from pyree.runtime.hal.python_driver import HalError

ALIGNMENT = 64
# Uncleared memory, as malloc gives it: a large buffer's pages are touched only when written.
_allocate = ffi.new_allocator(should_clear_after_alloc=False)


class HostBuffer:
    """``size`` bytes of host memory (``bytes``, a memoryview), 64-byte aligned except another
    library's memory imported for a call (import_device), which is aligned to its elements:
    kernels assume no more."""

    def __init__(self, size: int, address: int | None = None, alignment: int = ALIGNMENT):
        if address is not None:  # memory the runtime or another library owns (import_*)
            if address % alignment:
                raise HalError("INVALID_ARGUMENT", f"imported host memory at {address:#x} is not "
                                                   f"{alignment}-byte aligned")
            self.bytes = memoryview(ffi.buffer(ffi.cast("char *", address), size))
            self.address, self.size = address, size
            return
        try:
            self._memory = _allocate("char[]", size + ALIGNMENT)
        except (MemoryError, OverflowError):
            raise HalError("RESOURCE_EXHAUSTED", f"cannot allocate {size} bytes of host memory") from None
        start = -int(ffi.cast("uintptr_t", self._memory)) % ALIGNMENT
        self.bytes = memoryview(ffi.buffer(self._memory))[start:start + size]
        self.address = int(ffi.cast("uintptr_t", self._memory)) + start
        self.size = size

    def range(self, offset: int, length: int, what: str) -> memoryview:
        if offset + length > self.size:
            raise HalError("OUT_OF_RANGE", f"{what}: bytes [{offset}, +{length}) lie outside a "
                                           f"{self.size}-byte buffer")
        return self.bytes[offset:offset + length]
