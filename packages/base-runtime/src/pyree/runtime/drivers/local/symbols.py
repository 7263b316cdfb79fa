"""The C library entry points the local drivers call, found in the process itself
(``dlopen(NULL)``): dlopen, dlsym, dlclose and dlerror load kernel libraries (executable.py),
memset fills (command_buffer.py). The runtime's FFI declares them (hal/ffi_build.py)."""

from __future__ import annotations

from pyree.runtime.hal.ffi import ffi

libc = ffi.dlopen(None)


def dlerror() -> str:
    """The dynamic loader's message for its last failure."""
    message = libc.dlerror()
    return ffi.string(message).decode(errors="replace") if message != ffi.NULL else "unknown"
