"""Every file the runtime writes (a tool's result or report, a trace) is written whole or not at all.

A result file (``--output=@y.npy``) or a benchmark report may be read by another process while a
new run replaces it, and an error or Ctrl-C half way through must not leave half a file. So the
bytes go to a new file beside the old one (same folder, hence same file system), are flushed to
disk, and the new file is renamed over the old name. (The compiler has its own copy of this,
``pyree/compiler/output_file.py``: the two packages share no code.)
"""

from __future__ import annotations

import os
import stat


def write_output(path: str, data: bytes | str, *, append: bool = False) -> None:
    """Writes ``data`` to ``path`` atomically (``append``: after the file's current bytes): a
    temporary file in the same folder is filled, fsynced and renamed over ``path``. An existing
    file keeps its permissions; a symlink is written through, as ``open`` would; a path that is
    not a regular file (``/dev/null``, a FIFO) is written directly. On any error or interrupt
    the temporary file is removed and ``path`` is unchanged; OSError names the path."""
    data = data.encode() if isinstance(data, str) else data
    target = os.path.realpath(path)
    try:
        old = os.stat(target)
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode):
        with open(target, "ab" if append else "wb") as f:
            f.write(data)
        return
    folder, name = os.path.split(target)
    temp = os.path.join(folder, f".{name}.{os.urandom(6).hex()}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as e:
        raise OSError(e.errno, f"cannot create a file in {folder or '.'}: {e.strerror}",
                      path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            if old is not None:
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
                if append:
                    with open(target, "rb") as previous:
                        while chunk := previous.read(1 << 20):
                            f.write(chunk)
            f.write(data)
            f.flush()
            os.fsync(fd)
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
