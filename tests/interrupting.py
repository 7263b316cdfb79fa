"""Ctrl-C a tool the way a terminal does, and judge how it ends (tests of every tool use this)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

# Ctrl-C must end a tool within this many seconds: the tools' watchers allow one.
PROMPT_S = 2.5


@dataclass
class Interrupted:
    returncode: int
    seconds: float      # from SIGINT to the tool's exit
    stderr: str
    left_behind: list   # processes of the tool's session still running afterwards


def interrupt(argv: list[str], ready, settle_s: float = 0.0, timeout_s: float = 240,
              **popen) -> Interrupted:
    """Starts ``argv`` in a session of its own, waits until ``ready(stderr so far, pids of the
    session)`` holds (and ``settle_s`` more), sends SIGINT to the tool's process alone (a terminal
    sends it to every process of the foreground group; workers must not need it), and waits."""
    setup = popen.pop("preexec_fn", None)

    def preexec() -> None:
        # Ctrl-C at its default, as in a terminal's foreground job, even where this process
        # ignores it (a shell starts a background job so, and the tool would rightly inherit it)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if setup is not None:
            setup()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True, preexec_fn=preexec,
                            **popen)
    err = b""
    try:
        deadline = time.monotonic() + timeout_s
        while not ready(err.decode(errors="replace"), session(proc.pid)):
            assert proc.poll() is None, f"ended before it was interrupted: {err.decode()}"
            assert time.monotonic() < deadline, f"never got ready: {err.decode()}"
            err += _read(proc.stderr, 0.05)
        time.sleep(settle_s)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        while proc.poll() is None and time.monotonic() < sent + 30:
            err += _read(proc.stderr, 0.01)
        seconds = time.monotonic() - sent
        err += _read(proc.stderr, 0.2)  # a worker left behind would hold stderr open
        left = session(proc.pid)
        for _ in range(40):  # killed workers may take a moment to be reaped by init
            if not left:
                break
            time.sleep(0.05)
            left = session(proc.pid)
        return Interrupted(proc.returncode, seconds, err.decode(errors="replace"), left)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _read(stream, timeout_s: float) -> bytes:
    """What ``stream`` has within ``timeout_s``, without waiting for its end."""
    data = b""
    while select.select([stream], [], [], timeout_s)[0]:
        chunk = os.read(stream.fileno(), 65536)
        if not chunk:
            break
        data += chunk
        timeout_s = 0
    return data


def interrupt_benchmark(module: str, device: str, function: str, *inputs: str) -> Interrupted:
    """pyree-benchmark-module on a long run, interrupted once past its start (into the timing)."""
    return interrupt([sys.executable, "-m", "pyree.runtime.tools.benchmark_module",
                      f"--device={device}", f"--module={module}", f"--function={function}",
                      *(f"--input={i}" for i in inputs), "--benchmark_min_time=300"],
                     lambda err, pids: True, settle_s=3.0)


def assert_benchmark_interrupted(result: Interrupted) -> None:
    """Exit 130, "error: interrupted" alone, promptly, nothing left running."""
    assert result.returncode == 130, result.stderr
    assert result.stderr == "error: interrupted\n"
    assert result.seconds < PROMPT_S and result.left_behind == []


def session(sid: int) -> list[int]:
    """The live (not zombie) processes of session ``sid``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(entry))
    return pids
