"""codegen/common/parallel.py: jobs on worker processes, forked where only pyree's own threads run and
spawned where any other thread does (JAX's, PyTorch's): results in order, progress per job, a
job's errors raised here, no worker left behind, and the same module bytes either way."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence

import pytest
from generated import matmul_chain
from parallel_jobs import pid_of, square_or_fail, square_slowly
from pyree.compiler.codegen.common import parallel
from pyree.compiler.errors import CompileError
from tooling import require_module

START = {"fork": True, "spawn": False}


@pytest.fixture(params=sorted(START))
def start(request, monkeypatch):
    """Four workers, started as the parameter says; no spawned worker before (an earlier test in
    this process may have left some idle) or afterwards."""
    parallel._stop_idle()
    monkeypatch.setattr(parallel, "cores", lambda: 4)
    monkeypatch.setattr(parallel, "fork_is_safe", lambda: START[request.param])
    yield request.param
    parallel._stop_idle()
    assert parallel._LIVE == set()


def idle() -> set:
    """The workers alive between calls: spawned ones kept for the next call."""
    assert parallel._LIVE == set(parallel._IDLE)
    return {worker.pid for worker in parallel._IDLE}


def test_results_come_in_order_with_progress_per_job(start):
    done = []
    items = [0, 1, 2, 4, 6, 7, 8, 9, 11]
    assert parallel.map_jobs(square_or_fail, items, done.append) == [i * i for i in items]
    assert sorted(done) == list(range(len(items)))
    pids = set(parallel.map_jobs(pid_of, range(8)))
    assert os.getpid() not in pids and 1 <= len(pids) <= 4
    assert idle() == (set() if start == "fork" else {w.pid for w in parallel._IDLE})


class BuiltWhenAsked(Sequence):
    """Items 6, 7, 8...: each records, as it is built, how many results had come back."""

    def __init__(self, count: int, done: list):
        self.count, self.done, self.built = count, done, []

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> int:
        if not 0 <= i < self.count:
            raise IndexError(i)
        self.built.append((i, len(self.done)))
        return i + 6


def test_items_are_taken_ahead_of_the_workers(start):
    """llvm-cpu lowers a part as its job is taken: each item is taken once, in order, and up to
    one per worker is taken while the workers run the jobs before it (lowering overlaps code
    generation), never more."""
    done = []
    items = BuiltWhenAsked(9, done)
    assert parallel.map_jobs(square_slowly, items, done.append) == [(i + 6) ** 2 for i in range(9)]
    assert [i for i, _ in items.built] == list(range(9))
    # four workers: jobs 0-3 sent, 4-7 taken ahead before any result; job 8 only after one
    assert [results for _, results in items.built[:8]] == [0] * 8 and items.built[8][1] >= 1


def test_spawned_workers_serve_the_next_call_then_stop_when_idle(monkeypatch):
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    monkeypatch.setattr(parallel, "fork_is_safe", lambda: False)
    first = set(parallel.map_jobs(pid_of, range(6)))
    assert first <= idle() and len(idle()) == 2
    assert set(parallel.map_jobs(pid_of, range(6))) <= first  # the same processes, no new start
    monkeypatch.setattr(parallel, "IDLE_S", 0.1)
    parallel.map_jobs(pid_of, range(2))  # restarts the idle timer, now short
    parallel._reaper.join(timeout=10)
    assert idle() == set()
    for pid in first:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_jobs_error_is_raised_here(start):
    for items in ([0, 1, 2, 4, 3, 6], [3, 1, 2]):
        with pytest.raises(CompileError) as err:
            parallel.map_jobs(square_or_fail, items)
        assert str(err.value) == "in.mlir:3:1: error: three is refused"
    with pytest.raises(CompileError, match="internal compiler error: KeyError: 'five'"):
        parallel.map_jobs(square_or_fail, [0, 5, 1])
    assert idle() == set()  # a call that failed keeps none of its workers


def test_an_interrupt_kills_every_worker(start):
    pids = parallel.map_jobs(pid_of, range(4))

    def interrupt(_):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        parallel.map_jobs(square_or_fail, [1, 2, 4, 6], interrupt)
    assert idle() == set()
    for pid in pids:  # killed and reaped, so gone
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_run_apart_runs_in_another_process(start):
    assert parallel.run_apart(pid_of, None) != os.getpid()
    with pytest.raises(CompileError, match="three is refused"):
        parallel.run_apart(square_or_fail, 3)


ORPHAN_SCRIPT = textwrap.dedent("""
    import sys
    from pyree.compiler.codegen.common import parallel
    from parallel_jobs import spin_forever
    parallel.fork_is_safe = lambda: sys.argv[2] == "fork"
    parallel.run_apart(spin_forever, sys.argv[1])
""")


@pytest.mark.parametrize("how", ["fork", "spawn"])
def test_a_worker_never_outlives_its_killed_parent(tmp_path, how):
    """A parent killed while its worker runs a job that never returns: the worker goes too
    (before, a spawned one spun on at full CPU, orphaned)."""
    import signal
    import time

    pid_file = tmp_path / "worker.pid"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), *sys.path])}
    parent = subprocess.Popen([sys.executable, "-c", ORPHAN_SCRIPT, str(pid_file), how], env=env)
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()):
        assert time.monotonic() < deadline and parent.poll() is None
        time.sleep(0.05)
    worker = int(pid_file.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while True:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            break
        if _is_zombie(worker):
            break
        assert time.monotonic() < deadline, "the worker outlived its parent"
        time.sleep(0.05)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


# In a fresh interpreter: the test process may hold native threads of its own (a test module
# that imported JAX or torch), which fork_is_safe rightly counts.
FORK_SAFETY_SCRIPT = textwrap.dedent("""
    import threading
    import time
    from pyree.compiler.codegen.common import parallel
    stop = threading.Event()
    assert parallel.fork_is_safe()
    for name, safe in (("pyree-test-thread", True), ("someone-elses-pool", False)):
        thread = threading.Thread(target=stop.wait, name=name, daemon=True)
        thread.start()
        assert parallel.fork_is_safe() is safe, name
        stop.set()
        thread.join()
        stop.clear()
    # A joined thread's OS thread can linger in /proc/self/task for a moment after join().
    deadline = time.monotonic() + 5
    while not parallel.fork_is_safe():
        assert time.monotonic() < deadline
        time.sleep(0.01)
""")


def test_fork_is_safe_only_beside_pyrees_own_threads():
    done = subprocess.run([sys.executable, "-c", FORK_SAFETY_SCRIPT], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr


# With JAX's thread pools running (JAX's at-fork hook warns on any fork), a cuda compile on four
# workers: no warning of any kind (a warning in an at-fork hook is printed, not raised), and the
# bytes of a compile on one core.
JAX_SCRIPT = textwrap.dedent("""
    import pathlib
    import sys
    import jax.numpy as jnp
    jnp.ones(3).block_until_ready()  # starts JAX's backend and its threads
    from pyree.compiler import compile_str
    from pyree.compiler.codegen.common import parallel
    assert not parallel.fork_is_safe()
    source = pathlib.Path(sys.argv[1]).read_text()
    parallel.cores = lambda: 4
    many = compile_str(source, target_backends=["cuda"])
    parallel.cores = lambda: 1
    assert compile_str(source, target_backends=["cuda"]) == many
    print("same bytes")
""")


def test_beside_jax_threads_workers_are_spawned_and_the_module_is_the_same(tmp_path):
    require_module("jax")
    source = tmp_path / "m.mlir"
    source.write_text(matmul_chain(6))
    proc = subprocess.run([sys.executable, "-W", "error", "-c", JAX_SCRIPT, str(source)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYREE_PTXAS": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == "same bytes\n" and proc.stderr == ""
