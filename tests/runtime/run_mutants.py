"""Loads and runs hostile module files, one after another, reporting each as a JSON line; run as
a child process that a test watches for crashes (a signal) and hangs (a deadline):

    python run_mutants.py DEVICE FOLDER FIRST

FOLDER holds 0.vmfb, 1.vmfb, ...; the run starts at FIRST. Per mutant it prints
``{"mutant": n, "begin": true}``, then ``{"mutant": n, "outcomes": [...]}``: "refused: ..." when
the load fails with a PyreeError, else per function "ok", "error: ..." (a PyreeError), "leak:
..." (a result holds the poison pattern), "bug: ..." (any other exception) or "loop: ..." (the
call ran past ALARM_S in Python: a host-program loop; the process then exits, as a runtime
interrupted mid-call is not reused; so does a GPU device after a driver error, which may have
left its context unusable). Before each function's first call the module's buffer pool
is seeded with buffers of the poison pattern in the sizes of that function's results and
transient arena, which the call then takes: a byte it returns without writing shows the pattern.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import signal
import sys
import traceback
from pathlib import Path

import numpy as np
import pyree.runtime as rt

faulthandler.enable()  # a crash's report (the watcher keeps stderr) then says where it was
with contextlib.suppress(ImportError):
    # imported here, not by a mutant's first bf16 result inside the alarm: the import takes
    # about a second, over ALARM_S on a loaded CI worker (a mutant retyped to bf16 read as a loop)
    import ml_dtypes  # noqa: F401

POISON = b"\xa5\x5a\xc3\x3c"      # a word no result of random inputs holds by chance
ALARM_S = 2
MAX_ARGUMENT_BYTES = 16 << 20
MAX_POISON_BYTES = 16 << 20


class HostLoop(BaseException):
    pass


_interrupted = []


def _alarm(signum, frame):
    """Raises HostLoop, noted first and re-armed: one raised inside a driver's cffi callback is
    lost or becomes that driver call's error."""
    _interrupted.append(True)
    signal.setitimer(signal.ITIMER_REAL, 0.02)
    raise HostLoop


def _arguments(function, rng: np.random.Generator) -> list | None:
    """Inputs a looping function finishes on: floats in [0.5, 2), small non-negative integers."""
    args = []
    for t in function.argument_types:
        if t.nbytes > MAX_ARGUMENT_BYTES:
            return None
        if t.dtype.kind == "f":
            args.append(rng.uniform(0.5, 2.0, t.shape).astype(t.dtype))
        elif t.dtype.kind == "b":
            args.append(rng.integers(0, 2, t.shape).astype(bool))
        else:
            args.append(rng.integers(0, 6, t.shape).astype(t.dtype))
    return args


def _poison(module, function) -> None:
    """Seeds the pool with poisoned buffers of the function's result and transient keys."""
    pool = module.pool
    plan = function._plan  # (the mutants are of static modules)
    keys = [*plan.result_keys, *(key for key in plan.own_keys if key is not None)]
    buffers = [pool._allocate(key) for key in keys if key[0]]
    for buffer in buffers:   # the first MAX_POISON_BYTES: a mutant may ask for gigabytes
        size = min(buffer.size, MAX_POISON_BYTES)
        buffer.write(0, (POISON * (size // 4 + 1))[:size])
    pool.give_all(buffers)


def _run_function(module, name: str, rng) -> str:
    function = module[name]
    args = _arguments(function, rng)
    if args is None:
        return "skipped: arguments too large"
    _poison(module, function)
    signal.setitimer(signal.ITIMER_REAL, ALARM_S)
    try:
        results = function(*args)
        results = [] if results is None else results if isinstance(results, tuple) else [results]
        host = [np.ascontiguousarray(r.to_host()) for r in results]
    except HostLoop:
        pass
    except rt.PyreeError as e:
        if not _interrupted:
            return f"error: {type(e).__name__}: {str(e)[:200]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if _interrupted:
        return f"loop: {name} ran past {ALARM_S} s"
    for k, array in enumerate(host):
        if POISON in array.tobytes():
            return f"leak: {name} result {k} holds bytes the call did not write"
    return "ok"


def run(device: str, path: Path, rng) -> list[str]:
    try:
        module = rt.load_module(path.read_bytes(), device=device)
    except rt.PyreeError as e:
        return [f"refused: {type(e).__name__}: {str(e)[:300]}"]
    outcomes = []
    for name in module.function_names:
        outcome = _run_function(module, name, rng)
        outcomes.append(outcome)
        if outcome.startswith("loop") or (not device.startswith("local")
                                          and outcome.startswith("error: DriverError")):
            break  # a GPU fault may leave the context unusable: the next function would see it
    return outcomes


def main() -> None:
    device, folder, first = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    signal.signal(signal.SIGALRM, _alarm)
    n = first
    while (folder / f"{n}.vmfb").exists():
        print(json.dumps({"mutant": n, "begin": True}), flush=True)
        try:
            outcomes = run(device, folder / f"{n}.vmfb", np.random.default_rng(n))
        except Exception as e:  # noqa: BLE001 - reported for the test to fail on
            outcomes = [f"bug: {type(e).__name__}: {e}\n{traceback.format_exc()}"]
        print(json.dumps({"mutant": n, "outcomes": outcomes}), flush=True)
        if any(o.startswith("loop") for o in outcomes):
            return
        if not device.startswith("local") and any(o.startswith("error: DriverError")
                                                   for o in outcomes):
            return  # a GPU fault may leave the context unusable: the next mutant gets a fresh one
        n += 1


if __name__ == "__main__":
    main()
