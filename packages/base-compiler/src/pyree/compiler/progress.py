"""Progress lines of a compile (``--pyree-progress``, ``CompileOptions.progress``): a line as each
stage starts, and within code generation, which is most of a large model's compile, a line each
time another tenth of a backend's kernels is done ("codegen for llvm-cpu: 80/200 kernels"), so
that a long silence is never mistaken for a hang."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable


def write_line(text: str) -> None:
    """``text`` and its newline on stderr in one write: print writes them apart, and a line
    another thread writes between (the interrupt watcher's, tools/interrupt.py) ran on from
    the unfinished one ("6/48 kernelspyree-compile: interrupted")."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


class StageLines:
    """A ``progress`` callback: each line with the elapsed time on stderr, held back until the
    compile has run ``delay`` seconds (a timer then prints what was held), so that short
    compiles stay silent."""

    def __init__(self, delay: float, name: str = "pyree-compile"):
        self._start = time.monotonic()
        self._name = name
        self._held: list[str] = []
        self._live = delay <= 0
        self._lock = threading.Lock()
        # pyree-* threads hold no lock a forked code-generation worker takes (codegen/common/parallel.py)
        self._timer = threading.Timer(delay, self._go_live)
        self._timer.name = "pyree-progress-timer"
        self._timer.daemon = True
        if not self._live:
            self._timer.start()

    def __call__(self, line: str) -> None:
        line = f"{self._name}: [{time.monotonic() - self._start:6.1f}s] {line}"
        with self._lock:
            if self._live:
                write_line(line)
            else:
                self._held.append(line)

    def _go_live(self) -> None:
        with self._lock:
            self._live = True
            for line in self._held:
                write_line(line)
            self._held.clear()

    def close(self) -> None:
        self._timer.cancel()


def reporter(progress) -> Callable[[str], None] | None:
    """The callable behind ``CompileOptions.progress``: True prints stage lines on stderr from the
    start, a callable is called with each line, None or False prints nothing."""
    if progress is True:
        return StageLines(0.0, "pyree.compiler")
    return progress or None


def kernel_progress(report: Callable[[str], None] | None, backend: str, total: int,
                    what: str = "kernels") -> Callable[[int], None]:
    """``advance(n)``, which a backend calls as ``n`` more of its ``total`` kernels are done; it
    calls ``report`` (``CompileOptions.progress`` as the pipeline passes it) each time the count
    crosses another tenth (so for every kernel of ten or fewer, and always for the last):
    "codegen for cuda: 3/4 {what}"."""
    done = 0

    def advance(n: int = 1) -> None:
        nonlocal done
        before, done = done, done + n
        if report and total and done * 10 // total > before * 10 // total:
            report(f"codegen for {backend}: {done}/{total} {what}")

    return advance
