"""The one cffi FFI of the runtime: hal.h + cpu_kernel.h, and status codes turned into errors.

The headers in ``pyree/runtime/abi`` are the one source of truth; ``_ffi_abi`` is their parse,
generated from them by ``ffi_build`` (parsing them at import was a large part of every process's
start).
"""

from __future__ import annotations

import atexit
import threading

from pyree.runtime.errors import DriverError
from pyree.runtime.hal._ffi_abi import ffi

# The headers' #define constants, as cffi parsed them into _ffi_abi (an ABI-mode library of the
# process itself: nothing is looked up but what is asked for), so no process reads hal.h again
# with regular expressions.
_CONSTANTS = ffi.dlopen(None)
ABI_VERSION = _CONSTANTS.PYREE_HAL_ABI_VERSION
# The first field each revision appended, per struct: an older driver's struct ends before it.
REVISION_FIELDS = {"pyree_hal_device_v1_t": ("allocate_mapped", "import_host", "dlpack_device",
                                            "queue_submit_timed", "command_size")}
COMMAND_SIZE = ffi.sizeof("pyree_hal_command_t")
# A revision 4 command ends before workgroup_count: its size, padded as the C compiler pads it.
_ALIGN = ffi.alignof("pyree_hal_command_t")
COMMAND_SIZE_4 = -(-ffi.offsetof("pyree_hal_command_t", "workgroup_count") // _ALIGN) * _ALIGN
STATUS = {name.removeprefix("PYREE_STATUS_"): getattr(_CONSTANTS, name)
          for name in dir(_CONSTANTS) if name.startswith("PYREE_STATUS_")}
STATUS_NAMES = {code: name for name, code in STATUS.items()}
OK = STATUS["OK"]
DEADLINE_EXCEEDED = STATUS["DEADLINE_EXCEEDED"]
INFINITE_TIMEOUT_NS = (1 << 64) - 1


class _Process:
    """Set once the interpreter starts exiting. Finalizers then stop calling into drivers: a
    Python driver's callbacks and a library's code may already be torn down, and the OS
    reclaims everything anyway."""

    exiting = False


PROCESS = _Process()
atexit.register(setattr, PROCESS, "exiting", True)


def error_message(last_error, self_ptr) -> str:
    """The object's last_error string, or a placeholder when it has none."""
    message = last_error(self_ptr) if last_error != ffi.NULL else ffi.NULL
    return ffi.string(message).decode("utf-8", "replace") if message != ffi.NULL else "(no message)"


class _Interrupted(threading.local):
    """Set in the calling thread by a Python driver's callback that caught KeyboardInterrupt
    (Ctrl-C while the driver ran), which cffi would otherwise print and turn into INTERNAL."""

    pending = False


INTERRUPTED = _Interrupted()


def check(status: int, last_error, self_ptr, what: str) -> None:
    """Raises DriverError("<what>: <STATUS>: <driver message>") unless status is OK, or the
    KeyboardInterrupt that a Python driver's callback caught."""
    if status != OK:
        message = error_message(last_error, self_ptr)
        if INTERRUPTED.pending:
            INTERRUPTED.pending = False
            raise KeyboardInterrupt
        name = STATUS_NAMES.get(status, f"status {status}")
        raise DriverError(f"{what}: {name}: {message}", status, name)


def has_field(ptr, type_name: str, field: str) -> bool:
    """Whether a checked struct reaches ``field`` (a later revision's) and the driver set it."""
    end = ffi.offsetof(type_name, field) + ffi.sizeof(getattr(ptr, field))
    return ptr.struct_size >= end and getattr(ptr, field) != ffi.NULL


def command_size(device) -> int:
    """The stride of the command arrays a device (a checked ``pyree_hal_device_v1_t *``)
    reads: its ``command_size`` from revision 5 on, revision 4's before."""
    end = ffi.offsetof("pyree_hal_device_v1_t", "command_size") + 4
    return device.command_size if device.struct_size >= end else COMMAND_SIZE_4


def check_struct(ptr, type_name: str, what: str) -> None:
    """Refuses an ABI struct whose abi_version differs from this runtime's, or whose struct_size
    is not that of one of its revisions."""
    if ptr == ffi.NULL:
        raise DriverError(f"{what} returned no {type_name}", STATUS["INTERNAL"], "INTERNAL")
    size = ffi.sizeof(type_name)
    revisions = {size, *(ffi.offsetof(type_name, f) for f in REVISION_FIELDS.get(type_name, ()))}
    if ptr.abi_version != ABI_VERSION or ptr.struct_size not in revisions:
        raise DriverError(f"{what} was built for HAL ABI version {ptr.abi_version} "
                          f"({type_name} of {ptr.struct_size} bytes); this runtime has version "
                          f"{ABI_VERSION} ({size} bytes): install a matching driver",
                          STATUS["FAILED_PRECONDITION"], "FAILED_PRECONDITION")
