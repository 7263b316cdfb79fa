"""Parameter pages used in place, kept the same while another process rewrites the file.

A CPU device reads a parameter file's tensors from its mapping, and a mapping follows the file:
a rewrite in place changes the answers of a module already loaded, and a truncation makes the
next read of a lost page kill the process with SIGBUS (a private mapping does not help; the
kernel drops even its copied pages on truncation). Copying every tensor at load would cost a
10 GB model 10 GB of memory per process, where the mapping shares the page cache.

So the file is guarded with a Linux read lease (fcntl F_SETLEASE): an open for writing or a
truncation by anyone first blocks in the kernel, which tells the lease holder. Told, the watcher
thread here copies the ranges used in place into anonymous memory and moves that memory over the
mapped range (mremap: atomic, the addresses the kernels hold stay valid, and they read the same
bytes before and after), then releases the lease and the writer goes on. So a loaded module
keeps its answers, pays for a copy only when the file is about to change, and never touches a
page that can vanish. The kernel waits ``/proc/sys/fs/lease-break-time`` (45 s by default) for
that; a copy that takes longer (a range of tens of GB not in the page cache) is the limit of
this guard. Where no lease can be had (not Linux, a file of another user without CAP_LEASE, a
file system without leases such as NFS, a file open for writing right now) nothing is used in
place: the tensors are copied at load (file.py).

The notification is a real-time signal directed at the watcher thread only, which blocks it and
waits for it; its disposition is set to ignored (if nobody set one), so that a break arriving in
the instant between taking a lease and directing its signal at the thread is harmless (the
thread checks the lease once more right after). A process forked after loading takes leases of
its own (``_lease_again_after_fork``).
"""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import signal
import struct
import sys
import threading
import weakref

SIGNAL = signal.SIGRTMAX - 3
F_SETOWN_EX, F_OWNER_TID = 15, 0  # fcntl(2); Python's fcntl module does not name them
_MREMAP_MAYMOVE, _MREMAP_FIXED = 1, 2
_PROT_READ_WRITE, _MAP_PRIVATE_ANONYMOUS = 3, 0x22
_MAP_FAILED = ctypes.c_void_p(-1).value
_PAGE = mmap.PAGESIZE


class LeasedMapping(mmap.mmap):
    """A parameter file mapped copy-on-write while this process holds a read lease on it. The
    ranges handed out in place are the watcher's to copy when the lease breaks; ``broken`` says
    that the file is being (or was) changed, after which nothing more is handed out. The lease
    lives as long as the mapping: its file descriptor closes with it."""

    fd: int
    ranges: list[tuple[int, int]]  # page-aligned [start, end) still read from the file
    broken: bool

    def use(self, offset: int, length: int) -> memoryview | None:
        """``length`` bytes at ``offset``, in place, or None once the lease has broken."""
        with _lock:
            if self.broken:
                return None
            end = min(offset + length + _PAGE - 1, len(self) + _PAGE - 1) // _PAGE * _PAGE
            self.ranges.append((offset // _PAGE * _PAGE, end))
            return memoryview(self)[offset:offset + length]

    def __del__(self):
        if hasattr(self, "fd"):
            os.close(self.fd)


def map_leased(fd: int) -> LeasedMapping | None:
    """The file ``fd`` (open read-only) mapped under a read lease, or None where no lease can be
    taken. The caller then checks that the file is still the one it indexed: a write before the
    lease was taken is not the lease's to see."""
    if sys.platform != "linux" or not _lease(fd):
        return None
    try:
        mapping = LeasedMapping(fd, 0, access=mmap.ACCESS_COPY)
    except OSError:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        return None
    # The lease, its signal and owner belong to the open file description, which a duplicate
    # shares: the mapping keeps one, the caller keeps its own descriptor.
    mapping.fd, mapping.ranges, mapping.broken = os.dup(fd), [], False
    _watch_over(mapping)
    return mapping


def _lease(fd: int) -> bool:
    """Takes a read lease on ``fd`` whose breaks are signalled to the watcher thread."""
    watcher = _watcher()
    try:
        fcntl.fcntl(fd, fcntl.F_SETSIG, SIGNAL)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
    except OSError:  # EAGAIN (open for writing), EACCES (not ours), EINVAL (no leases here)
        return False
    try:
        fcntl.fcntl(fd, F_SETOWN_EX, struct.pack("ii", F_OWNER_TID, watcher.native_id))
    except OSError:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        return False
    return True


def _watch_over(mapping: LeasedMapping) -> None:
    with _lock:
        _leased.add(mapping)
    if fcntl.fcntl(mapping.fd, fcntl.F_GETLEASE) != fcntl.F_RDLCK:  # broke before its signal
        signal.pthread_kill(_watcher().ident, SIGNAL)              # was directed at the thread


_lock = threading.Lock()
_leased: weakref.WeakSet[LeasedMapping] = weakref.WeakSet()
_thread: list[threading.Thread] = []
_libc = ctypes.CDLL(None, use_errno=True)
_libc.signal.restype, _libc.signal.argtypes = ctypes.c_void_p, [ctypes.c_int, ctypes.c_void_p]
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_long]
_libc.mremap.restype = ctypes.c_void_p
_libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int,
                         ctypes.c_void_p]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def _watcher() -> threading.Thread:
    """The thread that lease breaks are signalled to, started with the first lease."""
    with _lock:
        if not _thread:
            previous = _libc.signal(SIGNAL, 1)  # SIG_IGN
            if previous:  # someone handles it: keep theirs
                _libc.signal(SIGNAL, previous)
            ready = threading.Event()
            thread = threading.Thread(target=_watch, args=(ready,), daemon=True,
                                      name="pyree-parameter-leases")
            thread.start()
            ready.wait()
            _thread.append(thread)
        return _thread[0]


def _watch(ready: threading.Event) -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {SIGNAL})
    ready.set()
    while True:
        signal.sigwaitinfo({SIGNAL})
        with _lock:
            leased = list(_leased)
        for mapping in leased:
            try:
                if fcntl.fcntl(mapping.fd, fcntl.F_GETLEASE) != fcntl.F_RDLCK:
                    _give_up(mapping)
            except OSError:  # the lease was already taken away: nothing left to release
                pass


def _lease_again_after_fork() -> None:
    """A forked child (a pre-forking server's worker) has the parent's pages but not its
    watcher, and the leases it inherited answer to the parent's thread, which copies only the
    parent's pages. So the child opens each file again for a lease of its own (the parent's
    keeps the file unchanged meanwhile), or, where it cannot, copies what it uses now."""
    global _lock
    _lock = threading.Lock()  # another thread may have held it at the fork
    _thread.clear()
    inherited = [m for m in _leased if not m.broken]
    _leased.clear()
    for mapping in inherited:
        try:
            fd = os.open(f"/proc/self/fd/{mapping.fd}", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            _own_copies(mapping)
            continue
        if _lease(fd):
            os.close(mapping.fd)
            mapping.fd = fd
            _watch_over(mapping)
        else:
            os.close(fd)
            _own_copies(mapping)


os.register_at_fork(after_in_child=_lease_again_after_fork)


def _give_up(mapping: LeasedMapping) -> None:
    """Moves owned copies of the ranges used in place over them, then releases the lease."""
    _own_copies(mapping)
    fcntl.fcntl(mapping.fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)


def _own_copies(mapping: LeasedMapping) -> None:
    """Replaces the ranges used in place by copies in anonymous memory; nothing more is handed
    out in place."""
    with _lock:
        mapping.broken = True
        ranges, mapping.ranges = _merged(mapping.ranges), []
        _leased.discard(mapping)
    anchor = ctypes.c_char.from_buffer(mapping)
    base = ctypes.addressof(anchor)
    del anchor
    for start, end in ranges:
        length = end - start
        copy = _libc.mmap(None, length, _PROT_READ_WRITE, _MAP_PRIVATE_ANONYMOUS, -1, 0)
        if copy == _MAP_FAILED:  # no memory: this range stays the file's
            continue
        view = memoryview((ctypes.c_char * length).from_address(copy)).cast("B")
        done = 0
        while done < length:  # the file's bytes, not the mapping's: a read cannot fault
            got = os.preadv(mapping.fd, [view[done:]], start + done)
            if got <= 0:  # the end of the file: the last page's tail, zero in both
                break
            done += got
        del view
        if done < min(length, len(mapping) - start):  # the lease was broken by force (timed
            _libc.munmap(copy, length)                 # out) and the file cut: nothing to copy
            continue
        if _libc.mremap(copy, length, length, _MREMAP_MAYMOVE | _MREMAP_FIXED,
                        base + start) == _MAP_FAILED:
            _libc.munmap(copy, length)


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
