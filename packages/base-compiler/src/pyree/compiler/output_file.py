"""Every file the compiler writes is written whole or not at all.

A module or parameter file is often read while it is being replaced: a server still serving the
last build, a runtime that maps parameter files. Opening the old file for writing truncates it
under its readers, and an error or Ctrl-C half way leaves half a file. So the bytes go to a new
file beside it (same folder, hence same file system), are flushed to disk, and the new file is
renamed over the old name: a reader sees the old file or the new one, never a mixture, and the
old file's readers keep their inode. (The runtime has its own copy of this: the two packages
share no code; see the runtime's output_file.py.)
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import BinaryIO

# Temporary files being written now: an interrupted tool that exits without unwinding removes
# them first (tools/interrupt.py).
_PARTIAL: set[str] = set()


def remove_partial_outputs() -> None:
    """Removes every temporary file being written (its target keeps its old content)."""
    for temp in list(_PARTIAL):
        try:
            os.unlink(temp)
        except OSError:
            pass


def write_output(path: str | os.PathLike, write: Callable[[BinaryIO], None] | bytes | str) -> None:
    """Writes ``path`` atomically: ``write`` (bytes, text, or a function given the open binary
    file) fills a temporary file in the same folder, which is fsynced and renamed over ``path``.
    An existing file keeps its permissions; a symlink is written through, as ``open`` would; a
    path that is not a regular file (``/dev/null``, a FIFO) is written directly. On any error or
    interrupt the temporary file is removed and ``path`` is unchanged; OSError names the path."""
    fill = write if callable(write) else _writer(write)
    target = os.path.realpath(path)
    try:
        old = os.stat(target)
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode):
        with open(target, "wb") as f:
            fill(f)
        return
    folder, name = os.path.split(target)
    temp = os.path.join(folder, f".{name}.{os.urandom(6).hex()}.tmp")
    _PARTIAL.add(temp)
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as e:
        _PARTIAL.discard(temp)
        raise OSError(e.errno, f"cannot create a file in {folder or '.'}: {e.strerror}",
                      os.fspath(path)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            if old is not None:
                os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode))
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    finally:
        _PARTIAL.discard(temp)


def _writer(data: bytes | str) -> Callable[[BinaryIO], None]:
    data = data.encode() if isinstance(data, str) else data
    return lambda f: f.write(data)
