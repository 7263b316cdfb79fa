"""Many threads calling one loaded function at once, every result compared bit for bit with the
single-threaded result for the same input.

One loaded module is meant to serve many threads (ARCHITECTURE.md, Concurrency). A race shows up
as a wrong answer, not an error (on cuda's graph mode, a quarter of ResNet-18's results computed
from another thread's input), so each thread mixes the ways a caller holds results: read at once,
dropped unread (the function recycles the buffer), kept a few calls and read together (several
calls in flight), and arguments that are DeviceArrays shared by every thread (the same buffer read
by many calls at once).
"""

from __future__ import annotations

import random
import threading

import numpy as np
import pyree.runtime as rt

PATTERNS = ("read", "drop", "keep")
KEPT = 4  # results a thread holds before reading them together


def _bits(value) -> np.ndarray:
    host = np.ascontiguousarray(np.asarray(value))
    return host.reshape(-1).view(np.uint8)


def _outputs(result) -> tuple:
    if result is None:
        return ()
    return result if isinstance(result, tuple) else (result,)


def hammer(module, name: str, inputs: list[tuple], threads: int = 8, calls: int = 100,
           seed: int = 0) -> list[str]:
    """Calls ``module[name]`` ``calls`` times from each of ``threads`` threads, on inputs drawn
    from ``inputs`` (tuples of numpy arguments); returns one line per result that differs from
    the single-threaded one, and per exception raised (empty: none)."""
    function = module[name]
    expected = [tuple(_bits(r).copy() for r in _outputs(function(*args))) for args in inputs]
    shared = [tuple(rt.asdevicearray(module.device, a) for a in args) for args in inputs]
    problems: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def report(line: str) -> None:
        with lock:
            problems.append(line)

    def compare(where: str, k: int, outputs) -> None:
        got = [_bits(r) for r in _outputs(outputs)]
        for j, (g, e) in enumerate(zip(got, expected[k], strict=True)):
            if not np.array_equal(g, e):
                differing = int(np.count_nonzero(g != e))
                report(f"{where}: result {j} for input {k} differs from the single-threaded "
                       f"one in {differing} of {e.size} bytes")

    def worker(t: int) -> None:
        rng = random.Random(seed * 1_000_003 + t)
        kept: list = []
        start.wait()
        try:
            for i in range(calls):
                k = rng.randrange(len(inputs))
                args = shared[k] if rng.random() < 0.5 else inputs[k]
                outputs = function(*args)
                pattern = PATTERNS[rng.randrange(len(PATTERNS))]
                if pattern == "read":
                    compare(f"thread {t} call {i}", k, outputs)
                elif pattern == "keep":
                    kept.append((i, k, outputs))
                if len(kept) >= KEPT or (kept and i == calls - 1):
                    for j, kk, held in kept:
                        compare(f"thread {t} call {j} (read later)", kk, held)
                    kept.clear()
                del outputs  # a "drop": the result goes unread
        except Exception as e:  # noqa: BLE001 - every failure of a thread is a finding
            report(f"thread {t}: {type(e).__name__}: {e}")

    workers = [threading.Thread(target=worker, args=(t,), name=f"hammer-{t}")
               for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return problems
