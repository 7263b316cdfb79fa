"""One parameter file, open: its index is read with ``pread`` into memory the runtime owns, its
tensors are copied the same way or, for a device that reads host memory in place, handed out
from a mapping that a lease guards (lease.py).

Reading never goes through a mapping that the file's owner could cut short: a truncated or
rewritten file gives a short read or a changed identity, so an error names the file, and never
a SIGBUS. The identity (device, inode, size, modification and change times) is taken at open and
compared after every copy: a file changed since it was indexed is refused, because its index no
longer says where its tensors are.
"""

from __future__ import annotations

import os
import stat
import threading

from pyree.runtime.parameters.entry import ParameterError


class ParameterFile:
    """Reads like a bytes object (``len``, slices) through ``pread``."""

    def __init__(self, path: str):
        self.path = path
        try:  # non-blocking: opening a FIFO must not wait for a writer before it is refused
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as e:
            raise ParameterError(f"cannot open parameter file '{path}': {e.strerror or e}") \
                from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise ParameterError(f"parameter file '{path}' is not a regular file (a device, a "
                                 f"FIFO or a folder): give the path of an .irpa or .safetensors "
                                 f"file")
        self._fd = fd
        self._identity = _identity(info)
        self.size = info.st_size
        self._mapping = None  # the leased mapping, once a tensor is used in place
        self._leasable = True
        self._lock = threading.Lock()  # one mapping and lease per file, loads on any thread

    def __del__(self):
        if hasattr(self, "_fd"):
            os.close(self._fd)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, span: slice) -> bytearray:
        start, stop, _ = span.indices(self.size)
        return self.copy(start, max(stop - start, 0))

    def copy(self, offset: int, length: int) -> bytearray:
        """``length`` bytes at ``offset``, read now; ParameterError when the file has changed."""
        data = bytearray(length)
        view, done = memoryview(data), 0
        while done < length:
            got = os.preadv(self._fd, [view[done:]], offset + done)
            if got <= 0:
                break
            done += got
        del view
        if done < length or self.changed():
            raise self.changed_error()
        return data

    def in_place(self, offset: int, length: int) -> memoryview | None:
        """``length`` bytes at ``offset`` as pages of the leased mapping, for a device that reads
        host memory in place; None where the file cannot be leased, or its lease has broken
        (someone opened it for writing): the caller copies, and ``copy`` tells whether the
        file did change."""
        with self._lock:
            if self._mapping is None and self._leasable:
                from pyree.runtime.parameters.lease import map_leased

                self._mapping = map_leased(self._fd)
                self._leasable = self._mapping is not None
                if self._mapping is not None and self.changed():  # before the lease: unseen
                    raise self.changed_error()
        return self._mapping.use(offset, length) if self._mapping is not None else None

    def changed(self) -> bool:
        return _identity(os.fstat(self._fd)) != self._identity

    def changed_error(self) -> ParameterError:
        return ParameterError(f"parameter file '{self.path}' was changed (rewritten or "
                              f"truncated) after it was opened: its index no longer says where "
                              f"its tensors are; open it again (load_module(..., parameters=...)"
                              f" or --parameters)")


def _identity(info: os.stat_result) -> tuple:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns
