"""--pyree-trace=FILE: the tools' calls traced (vm/trace.py) into FILE, Chrome trace-event JSON
that Perfetto and chrome://tracing open, written whole or not at all; the dispatches by device
time are printed on stderr after the run, where IREE's tools print their --print_statistics."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

from pyree.runtime.tools.flags import FlagParser


def add_trace_flag(parser: FlagParser) -> None:
    parser.add_flag(
        "--pyree-trace",
        metavar="FILE",
        help="trace the calls into FILE (Chrome trace-event JSON: open it in ui.perfetto.dev) "
        "and print each kernel's device time on stderr",
    )


@contextmanager
def traced(path: str | None):
    """Traces what runs inside into ``path``, if one is given, then prints the summary."""
    if not path:
        yield
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):  # found now, not once a long run is over
        raise OSError(2, f"cannot write the trace: no folder {folder}", path)
    from pyree.runtime.vm.trace import Trace

    trace = Trace(path).start()
    try:
        yield
    finally:
        trace.stop()
    print(trace.format_summary(), file=sys.stderr)
