"""Standard streams for a compiler tool started without them (the runtime's tools do the same
in ``pyree.runtime.tools.cli``: the packages share no code but the schemas)."""

from __future__ import annotations

import os
import sys


def keep_standard_streams() -> None:
    """A tool started with stdout or stderr closed (a daemon, ``cmd >&-``) writes them to
    /dev/null: Python leaves ``sys.stdout`` None there, and the first print ended the tool
    with a traceback. The descriptor is taken first, so no file the tool opens becomes it."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        setattr(sys, name, open(fd, "w", closefd=False))  # noqa: SIM115  (the process's own)
