"""Ctrl-C in the compiler's command-line tools: one line on stderr and exit status 130, at once.

Python runs a signal's handler only between two bytecodes of the main thread, so Ctrl-C during
one long native call (LLVM optimizing a large module, torch-mlir lowering a model) waited for
that call to end, and then unwound with a traceback. The main thread turns KeyboardInterrupt into
the line and the status (``interrupted``); a tool run as a process also watches for SIGINT from a
thread (``watch``): the signal module writes each signal's number to a wakeup descriptor the
moment it arrives, whatever the main thread is doing, and if the process is still running
``GRACE_S`` after it, the watcher ends it: it kills the code-generation workers, removes the
temporary file of an output being written, prints the same line and exits 130. Outputs are
written whole or not at all (output_file.py), so no partial output is ever left behind.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from pyree.compiler.codegen.common import parallel
from pyree.compiler.output_file import remove_partial_outputs
from pyree.compiler.progress import write_line

EXIT_INTERRUPTED = 130
# How long the main thread has to end the process itself before the watcher does.
GRACE_S = 1.0

# Taken by whichever thread reports the interrupt first; never released, so the line is printed
# once and the other thread stays silent while the process ends.
_REPORTED = threading.Lock()


def watch(tool: str) -> None:
    """Starts the watcher thread; for a tool run as a process, called from its main thread."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    # a pyree-* thread: it waits in a read, holding no lock, so code generation may still fork
    threading.Thread(target=_watch, args=(read, tool), name="pyree-interrupt-watcher",
                     daemon=True).start()


def interrupted(tool: str) -> int:
    """The main thread's answer to KeyboardInterrupt: the line (unless the watcher is already
    ending the process) and the exit status. Later Ctrl-Cs are ignored while the tool exits."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if _REPORTED.acquire(blocking=False):
        _say(tool)
    return EXIT_INTERRUPTED


def _watch(read: int, tool: str) -> None:
    while signal.SIGINT not in os.read(read, 64):
        pass
    time.sleep(GRACE_S)
    if not _REPORTED.acquire(blocking=False):
        return  # the main thread has it in hand
    parallel.kill_workers()
    remove_partial_outputs()
    _say(tool)
    os._exit(EXIT_INTERRUPTED)


def _say(tool: str) -> None:
    write_line(f"{tool}: interrupted")
