"""CUDA's start, begun the moment the ``cuda`` driver is asked for: its entry point opens libcuda
and runs cuInit (the longest step of the start, waiting in the kernel driver without the GIL) on a
thread of its own before it imports the rest of the driver, and the driver's first use joins it.

Any use of the driver needs cuInit, and the driver is imported only when it is asked for
(listing drivers included), so nothing here is work a call may not need. Starting it before the
driver's own imports and the runtime's ABI plumbing puts that Python beside it instead of in
front of it (BENCHMARKS.md, issue 13).
"""

from __future__ import annotations

import os
import threading

from pyree.hal.cuda import symbols
from pyree.runtime.hal import tool_process
from pyree.runtime.hal.timeline import HalError

# CUDA's hardware work queues per device (CUDA's default 8), read once when cuInit runs.
CONNECTIONS_VARIABLE = "CUDA_DEVICE_MAX_CONNECTIONS"


class _Start:
    """The table and cuInit's status, or the error that stopped the start."""

    def __init__(self):
        self._status: list[int] = []
        self.error: HalError | None = None
        try:
            self.cu = symbols.load()
        except HalError as e:
            self.cu, self.error = None, e
            return
        self._thread = threading.Thread(target=lambda: self._status.append(self.cu.cuInit(0)),
                                        name="cuInit", daemon=True)
        self._thread.start()

    def finish(self) -> symbols.Libcuda:
        """The table once cuInit has returned; HalError when the library or cuInit failed."""
        if self.error is None:
            self._thread.join()
            try:
                symbols.check(self._status[0], "cuInit")
            except HalError as e:
                self.error = e
        if self.error is not None:
            raise self.error
        return self.cu


_start: _Start | None = None
_lock = threading.Lock()


def begin() -> None:
    """Starts CUDA once per process: the hardware-queue choice first (``one_queue``), then the
    library, then cuInit on its thread."""
    global _start
    with _lock:
        if _start is None:
            one_queue()
            _start = _Start()


def finish() -> symbols.Libcuda:
    """The loaded table after cuInit (starting CUDA now if nothing has); HalError naming what
    failed: the library, an entry point, or cuInit itself."""
    begin()
    return _start.finish()


def one_queue() -> None:
    """In a tool process (hal/tool_process.py), asks CUDA for one hardware work queue per device
    unless the user chose a number: every device of this HAL runs its work on one stream, and each
    queue of CUDA's default 8 adds to a context's creation and to its teardown at exit, a large
    part of a tool's start and end (BENCHMARKS.md, issue 13). Only there: in a library
    process, other CUDA users (torch's streams) may need the queues run side by side, and the
    variable is read once per process, by whichever cuInit runs first."""
    if os.environ.get(tool_process.VARIABLE) and CONNECTIONS_VARIABLE not in os.environ:
        os.environ[CONNECTIONS_VARIABLE] = "1"
