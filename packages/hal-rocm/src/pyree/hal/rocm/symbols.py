"""The library search, the symbol check and the status check for THE table of HIP entry points
this HAL uses (``ffi_build.DECLARATIONS``, pre-parsed into ``_ffi.py``; like IREE's dynamic
symbol tables, it documents what the driver needs from the host). ``load()`` opens libamdhip64
through cffi (ABI mode: no compiler, no ROCm headers) and resolves every symbol of the table at
once; a missing one makes the driver unavailable with a message naming it. Nothing outside the
table is called.
"""

from __future__ import annotations

import os
import re

from pyree.hal.rocm._ffi import ffi
from pyree.hal.rocm.ffi_build import DECLARATIONS
from pyree.runtime.hal.python_driver import HalError

SYMBOLS = tuple(re.findall(r"(hip\w+)\s*\(", DECLARATIONS))

LIBRARY_VARIABLE = "PYREE_HIP_LIBRARY"
LIBRARY_NAMES = ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5")

# hipError_t values the driver tests for
SUCCESS = 0
OUT_OF_MEMORY = 2
NO_DEVICE = 100
NOT_READY = 600
WRONG_CHIP = (200, 209)  # hipErrorInvalidImage, hipErrorNoBinaryForGpu

_STATUS_OF = {1: "INVALID_ARGUMENT", OUT_OF_MEMORY: "RESOURCE_EXHAUSTED", NO_DEVICE: "UNAVAILABLE",
              101: "NOT_FOUND", 500: "NOT_FOUND"}

_lib = None


def library_candidates() -> tuple[str, ...]:
    """``$PYREE_HIP_LIBRARY`` alone when set, else the sonames of ROCm 7 down to 5."""
    path = os.environ.get(LIBRARY_VARIABLE)
    return (path,) if path else LIBRARY_NAMES


def load():
    """The opened library with every symbol of the table resolved (once per process); HalError
    UNAVAILABLE naming each library tried, or the missing entry points."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for name in library_candidates():
        try:
            lib = ffi.dlopen(name)
        except OSError as e:  # cffi appends a note about find_library: not ours to show
            tried.append(f"{name} ({str(e).split('  Additionally,')[0]})")
            continue
        missing = []
        for symbol in SYMBOLS:
            try:
                getattr(lib, symbol)
            except ffi.error:  # out-of-line ABI mode's "symbol not found"
                missing.append(symbol)
        if missing:
            raise HalError("UNAVAILABLE", f"the HIP runtime {name} lacks entry points the HAL "
                                          f"needs: {', '.join(missing)}")
        _lib = lib
        return lib
    where = f"${LIBRARY_VARIABLE}" if os.environ.get(LIBRARY_VARIABLE) else "the system search"
    raise HalError("UNAVAILABLE", f"the HIP runtime library could not be loaded (no ROCm on this "
                                  f"host?); tried, from {where}: {'; '.join(tried)}")


class HipError(HalError):
    """A failed HIP call: the entry point, HIP's own error name and message, and what we did."""

    def __init__(self, status: str, message: str, code: int):
        super().__init__(status, message)
        self.code = code


def describe(err: int) -> str:
    """``hipErrorNoDevice: no ROCm-capable device is detected`` (the name alone when HIP's
    message repeats it), from the loaded library."""
    name = _lib.hipGetErrorName(err)
    text = _lib.hipGetErrorString(err)
    name = ffi.string(name).decode() if name != ffi.NULL else f"hipError_t {err}"
    text = ffi.string(text).decode() if text != ffi.NULL else ""
    return name if text in ("", name) else f"{name}: {text}"


def error(err: int, what: str) -> HipError:
    """The HipError for a failed hipError_t, for a caller that records it rather than raising."""
    return HipError(_STATUS_OF.get(err, "INTERNAL"), f"{what}: {describe(err)}", err)


def check(err: int, what: str) -> None:
    """Raises HipError for a hipError_t other than hipSuccess: HIP's name and message for it,
    after ``what`` we did."""
    if err != SUCCESS:
        raise error(err, what)
