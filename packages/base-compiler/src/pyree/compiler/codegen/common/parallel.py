"""Independent code-generation jobs on all of the build machine's cores.

LLVM's optimizer and code emitter are most of a compile's time, and llvmlite runs every LLVM call
under one global lock, so threads would take turns: the jobs run in worker processes, one per
core, each given its next job as it finishes one (so the parent can report progress and stays in
Python, where Ctrl-C acts at once). How a worker starts depends on the threads this process has:

- only pyree's own (named ``pyree-*``: pyree-compile's progress timer and interrupt watcher, which
  hold no lock a worker takes) and numpy's OpenBLAS pool (stopped by OpenBLAS itself around a
  fork): ``os.fork``, a few milliseconds, and the worker already holds every module the jobs
  need; forked workers end with the call (they would pin the memory of the compile they copied);
- any other (JAX and PyTorch run thread pools; an application may run its own): a fork would copy
  locks those threads may hold, so the workers are fresh interpreters (``subprocess``, which
  forks and executes at once and runs no at-fork hooks) that import only what the job function's
  module needs, kept for the next call until they have been idle ``IDLE_S`` seconds (a process
  that compiles again and again pays their start once). multiprocessing's forkserver and spawn
  would also run the application's ``__main__`` script again in every worker, which a library
  must not ask of its caller.

Either way a job's result depends on its input alone, so the output is the same bytes. Where
there is one core or one job, the jobs run here, one after another.
"""

from __future__ import annotations

import atexit
import collections
import ctypes
import os
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, Pipe, wait

from pyree.compiler.errors import CompileError

# LLVM modules a cuda executable's kernels are compiled as (``llvm_text.Module.parts``): a fixed
# number, so that the code is the same on every build machine; four keep two to four cores busy.
# (rocm cannot: ld.lld keeps one metadata note per object, and a code object may have only one.)
PARTS = 4

# Names of the threads pyree itself starts; a worker may be forked beside them (see above).
THREAD_PREFIX = "pyree-"

# Seconds a spawned worker is kept for the next call.
IDLE_S = 30.0

# A spawned worker's first steps: ignore Ctrl-C (the parent decides), take the parent's import
# path, then serve jobs on the connection whose descriptor is argv[1].
_BOOTSTRAP = ("import signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
              "from multiprocessing.connection import Connection; "
              "c = Connection(int(sys.argv[1])); sys.path[:] = c.recv(); "
              "from pyree.compiler.codegen.common.parallel import serve; serve(c)")


class WorkerDied(CompileError):
    """A worker ended without a result: killed by a signal (``status`` -N), or exited. Callers
    that run native code apart (``run_apart``) catch it to say what crashed."""

    def __init__(self, status: int):
        super().__init__("internal compiler error: a code-generation process ended without a "
                         f"result (exit status {status})")
        self.status = status


def cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def fork_is_safe() -> bool:
    """Whether every other thread of this process is one of pyree's own (``THREAD_PREFIX``) or
    of OpenBLAS's pool (numpy's BLAS, which the compiler imports; OpenBLAS stops its pool before
    any fork, pthread_atfork). Counts the process's threads, not only Python's: JAX's and
    PyTorch's pools are native."""
    if any(t is not threading.current_thread() and not t.name.startswith(THREAD_PREFIX)
           for t in threading.enumerate()):
        return False
    try:
        running = len(os.listdir("/proc/self/task"))
    except OSError:  # no procfs: Python's threads are all that can be seen
        return True
    return running <= threading.active_count() + _openblas_pool()


def _openblas_pool() -> int:
    """The threads of the OpenBLAS pools loaded in this process (one thread fewer than the
    threads each computes on), asked of the libraries themselves as threadpoolctl does."""
    try:
        with open("/proc/self/maps") as f:
            libraries = {line.split()[-1] for line in f if "openblas" in line.rsplit("/", 1)[-1]}
    except OSError:
        return 0
    pool = 0
    for path in libraries:
        try:
            library = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        except OSError:
            continue
        for name in _OPENBLAS_THREADS:
            if hasattr(library, name):
                pool += max(getattr(library, name)() - 1, 0)
                break
    return pool


# openblas_get_num_threads as OpenBLAS builds name it (scipy-openblas is numpy's wheels').
_OPENBLAS_THREADS = [f"{prefix}_get_num_threads{suffix}" for prefix in ("scipy_openblas", "openblas")
                     for suffix in ("64_", "_64_", "")]


def map_jobs(fn: Callable, items: Sequence, done: Callable[[int], None] | None = None) -> list:
    """``[fn(item) for item in items]``, on up to ``cores()`` worker processes; ``done(i)`` is
    called here as job ``i`` finishes. ``fn`` (a module-level function, or a partial of one),
    items and results must pickle. A job's CompileError is raised here as it was raised there,
    any other exception as a CompileError naming it (a compiler bug); on any error or interrupt
    every worker is killed first."""
    workers = min(len(items), cores()) if hasattr(os, "fork") else 1
    if workers <= 1:
        results = []
        for i, item in enumerate(items):
            results.append(fn(item))
            if done is not None:
                done(i)
        return results
    return _in_workers(fn, items, done, workers)


def run_apart(fn: Callable, item):
    """``fn(item)`` in one worker process, as ``map_jobs`` runs a job: the caller waits in
    Python, where Ctrl-C acts at once, while the job runs native code that holds the GIL for
    seconds (torch-mlir's pass pipelines)."""
    return _in_workers(fn, [item], None, 1)[0]


def _in_workers(fn: Callable, items: Sequence, done, workers: int) -> list:
    if fork_is_safe():
        pool = [_fork() for _ in range(workers)]
        try:
            return _run(pool, fn, items, done)
        finally:
            for worker in pool:
                worker.stop()
    pool, kept = _spawned(workers), []
    try:
        results = _run(pool, fn, items, done)
        kept = pool
        return results
    finally:
        for worker in pool if kept is not pool else ():  # perhaps mid-job: never used again
            worker.stop()
        _keep(kept)


# Spawned workers idle between calls, and the timer that stops them (under _IDLE_LOCK).
_IDLE: list = []
_IDLE_LOCK = threading.Lock()
_reaper: threading.Timer | None = None


def _spawned(count: int) -> list:
    """``count`` spawned workers: idle ones first, new ones for the rest."""
    with _IDLE_LOCK:
        if _reaper is not None:
            _reaper.cancel()
        for worker in [w for w in _IDLE if w.process.poll() is not None]:
            worker.stop()  # ended while idle (killed from outside): reaped, never used
            _IDLE.remove(worker)
        pool, _IDLE[:] = _IDLE[:count], _IDLE[count:]
    return pool + [_spawn() for _ in range(count - len(pool))]


def _keep(pool: list) -> None:
    """Keeps ``pool`` for the next call; the idle workers stop IDLE_S seconds after the last."""
    global _reaper
    with _IDLE_LOCK:
        _IDLE.extend(pool)
        if _reaper is not None:
            _reaper.cancel()
        _reaper = threading.Timer(IDLE_S, _stop_idle)
        _reaper.name, _reaper.daemon = "pyree-idle-workers", True
        _reaper.start()


@atexit.register  # (no idle worker outlives the interpreter's own exit either)
def _stop_idle() -> None:
    with _IDLE_LOCK:
        for worker in _IDLE:
            worker.stop()
        _IDLE.clear()


class _Worker:
    """One worker process and the connection it takes jobs and returns results on."""

    def __init__(self, connection: Connection, pid: int, process: subprocess.Popen | None):
        self.connection, self.pid, self.process = connection, pid, process
        self.status: int | None = None
        _LIVE.add(self)

    def wait(self) -> int:
        """The worker's exit status, once it has ended."""
        if self.status is None:
            self.status = self.process.wait() if self.process is not None else \
                os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.status

    def stop(self) -> None:
        """Kills the worker (idle or not: every result that counts has arrived) and reaps it."""
        _LIVE.discard(self)
        if self.status is None:
            _kill(self.pid)
        self.connection.close()
        self.wait()


# Workers not yet stopped: what kill_workers ends if the process must exit at once.
_LIVE: set[_Worker] = set()


def kill_workers() -> None:
    """Kills every worker at once (an interrupted tool that exits without unwinding)."""
    for worker in list(_LIVE):
        _kill(worker.pid)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _run(pool: list[_Worker], fn: Callable, items: Sequence, done) -> list:
    results: dict[int, object] = {}
    queue = iter(range(len(items)))
    busy: dict[Connection, _Worker] = {}
    # Jobs taken from ``items`` before a worker is free for them, up to one per worker: items
    # may build each job as it is taken (llvm-cpu lowers a part then), which then runs while the
    # workers do, and a worker that finishes gets its next job at once.
    ahead: collections.deque = collections.deque()

    def take() -> bool:
        i = next(queue, None)
        if i is not None:
            ahead.append((i, items[i]))
        return i is not None

    def give(worker: _Worker) -> None:
        if ahead or take():
            i, item = ahead.popleft()
            worker.connection.send((i, fn, item))
            busy[worker.connection] = worker

    for worker in pool:
        give(worker)
    more = True
    while busy:
        finished = wait(list(busy), timeout=0) if more and len(ahead) < len(pool) else None
        if finished == []:  # no result yet: take the next job meanwhile
            more = take()
            continue
        for connection in finished or wait(list(busy)):
            worker = busy.pop(connection)
            try:
                i, ok, value = connection.recv()
            except (EOFError, OSError):
                raise WorkerDied(worker.wait()) from None
            if not ok:
                kind, message, location = value
                raise CompileError(message, location) if kind is None else CompileError(
                    f"internal compiler error: {kind}: {message}. Please report this with the "
                    "input file.")
            results[i] = value
            if done is not None:
                done(i)
            give(worker)
    return [results[i] for i in range(len(items))]


def _fork() -> _Worker:
    parent, child = Pipe()
    with warnings.catch_warnings():
        # Python 3.12 warns when a process with threads forks (a held lock stays held in the
        # child); fork_is_safe has found only threads that hold none the child takes.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid:
        child.close()
        return _Worker(parent, pid, None)
    try:  # the child: never returns, never runs the parent's clean-up or flushes its buffers
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for end in (parent, *(worker.connection for worker in _LIVE)):
            end.close()  # so that each worker sees its own connection close with the parent
        serve(child)
    finally:
        os._exit(0)


def _spawn() -> _Worker:
    parent, child = Pipe()
    process = subprocess.Popen([sys.executable, "-c", _BOOTSTRAP, str(child.fileno())],
                               pass_fds=[child.fileno()], stdin=subprocess.DEVNULL)
    child.close()
    worker = _Worker(parent, process.pid, process)
    parent.send(sys.path)
    return worker


def _die_with_parent() -> None:
    """On Linux the worker is killed as its parent ends, however it ends: a job that never
    returns (torch-mlir looped forever importing an ONNX Pad) kept its worker at full CPU after
    the parent was killed, as a busy worker never sees its connection close. (The kernel tells
    the death of the thread that started the worker: an idle worker kept from a thread that has
    ended is gone by the next call, which reaps it and starts another.)"""
    if not sys.platform.startswith("linux"):
        return
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent ended before the request
        os._exit(0)


def serve(connection: Connection) -> None:
    """A worker's loop: jobs ``(i, fn, item)``, each answered with ``(i, True, fn(item))`` or
    ``(i, False, (kind, message, location))``, until the parent closes the connection or kills
    the worker."""
    _die_with_parent()
    try:
        while True:
            i, fn, item = connection.recv()
            try:
                reply = (i, True, fn(item))
            except CompileError as e:
                reply = (i, False, (None, e.message, e.location))
            except BaseException as e:  # noqa: BLE001 - a compiler bug, reported by the parent
                reply = (i, False, (type(e).__name__, str(e), ""))
            connection.send(reply)
    except BaseException:  # noqa: BLE001 - the parent is gone, or sees the connection close
        pass
