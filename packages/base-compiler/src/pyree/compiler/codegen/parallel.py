"""Independent code-generation jobs on all of the build machine's cores.

LLVM's optimizer and code emitter are most of a GPU compile (MobileNet v2 for cuda: about 1 s of
a 4 s compile on a 2-core machine), and llvmlite runs every LLVM call under one global lock, so
threads would take turns. The jobs therefore run in forked processes: a fork costs a few
milliseconds and the child already holds everything the job needs (no re-import, no pickling of
the inputs). Only the results travel back, pickled through a pipe. Where there is no fork (or
one core) the jobs run here, one after another, with the same results.
"""

from __future__ import annotations

import os
import pickle
import warnings
from collections.abc import Callable, Sequence

from pyree.compiler.errors import CompileError

# LLVM modules a cuda executable's kernels are compiled as (``llvm_text.Module.parts``): a fixed
# number, so that the code is the same on every build machine; four keep two to four cores busy.
# (rocm cannot: ld.lld keeps one metadata note per object, and a code object may have only one.)
PARTS = 4


def cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def map_jobs(fn: Callable, items: Sequence) -> list:
    """``[fn(item) for item in items]``, spread over up to ``cores()`` processes. Results must
    pickle; a job's CompileError is raised here as it was raised there, any other exception as
    a CompileError naming it (a compiler bug), after every child has been reaped."""
    workers = min(len(items), cores()) if hasattr(os, "fork") else 1
    if workers <= 1:
        return [fn(item) for item in items]
    children = [_fork(fn, items, w, workers) for w in range(1, workers)]
    results: dict[int, object] = {}
    failure = None
    try:
        results.update((i, fn(items[i])) for i in range(0, len(items), workers))
    except BaseException as e:  # noqa: BLE001 - reap the children first, then raise it
        failure = e
    for pid, pipe in children:
        with os.fdopen(pipe, "rb") as f:
            payload = f.read()
        _, status = os.waitpid(pid, 0)
        if failure is not None:
            continue
        if not payload:
            failure = CompileError(f"internal compiler error: a code-generation process "
                                   f"ended without a result (wait status {status})")
            continue
        ok, value = pickle.loads(payload)
        if ok:
            results.update(value)
        else:
            kind, message, location = value
            failure = CompileError(message, location) if kind is None else CompileError(
                f"internal compiler error: {kind}: {message}. Please report this with the input file.")
    if failure is not None:
        raise failure
    return [results[i] for i in range(len(items))]


def _fork(fn: Callable, items: Sequence, first: int, step: int) -> tuple[int, int]:
    """Starts a child that runs ``fn`` on items ``first, first + step, ...``; (pid, read end)."""
    read, write = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12 warns when a process with threads forks (a held lock stays held in the
        # child). The compiler's one other thread is pyree-compile's progress timer; the child
        # runs LLVM and writes its pipe, and takes no lock that thread may hold.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid:
        os.close(write)
        return pid, read
    try:  # the child: never returns, never runs the parent's clean-up or flushes its buffers
        os.close(read)
        try:
            jobs = range(first, len(items), step)
            payload = pickle.dumps((True, [(i, fn(items[i])) for i in jobs]))
        except CompileError as e:
            payload = pickle.dumps((False, (None, e.message, e.location)))
        except BaseException as e:  # noqa: BLE001 - a compiler bug, reported by the parent
            payload = pickle.dumps((False, (type(e).__name__, str(e), "")))
        with os.fdopen(write, "wb") as f:
            f.write(payload)
    finally:
        os._exit(0)
