"""IREE's ``iree.runtime.benchmark_module``: times a module's function with the benchmark tool,
run as a process of its own as IREE runs iree-benchmark-module, and returns the tool's rows.

    results = ireert.benchmark_module(vm_module, "main", inputs=[x], benchmark_repetitions=3)
    results[0].time                    # "0.123 ms", as the tool printed it

A separate process keeps the caller's threads and devices out of the timing, and ``timeout``
can end a run that does not. Keyword arguments become the tool's flags (``device="local-sync"``
is ``--device=local-sync``); a loaded module is timed on its own device unless ``device`` says
otherwise. numpy arrays (or anything numpy reads) go to the tool as .npy files, strings as the
tool's ``--input`` text.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections import namedtuple
from collections.abc import Sequence

from pyree.runtime.errors import InvocationError, PyreeError

__all__ = ["BenchmarkResult", "BenchmarkToolError", "benchmark_exe", "benchmark_module"]

BenchmarkResult = namedtuple("BenchmarkResult",
                             "benchmark_name time cpu_time iterations user_counters")
TOOL = "pyree-benchmark-module"


class BenchmarkToolError(PyreeError):
    """The benchmark tool failed; the message is what it said."""


def benchmark_exe() -> str:
    """The path of the benchmark tool (installed beside this interpreter, or on PATH)."""
    search = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    path = shutil.which(TOOL, path=search)
    if path is None:
        raise BenchmarkToolError(f"{TOOL} is not installed beside {sys.executable} or on PATH "
                                 "(pip install pyree-base-runtime)")
    return path


def benchmark_module(module, entry_function: str | None = None, inputs: Sequence = (),
                     timeout: float | None = None, **kwargs) -> list[BenchmarkResult]:
    """Times ``entry_function`` of ``module`` (a VmModule or a loaded module; the module's only
    function when None) on ``inputs``; one BenchmarkResult per row the tool printed."""
    names = list(module.function_names)
    if entry_function is None:
        if len(names) != 1:
            raise InvocationError(f"benchmark_module: no entry_function given and module "
                                  f"'{module.name}' exports {len(names)}: {', '.join(names)}")
        entry_function = names[0]
    if entry_function not in names:
        raise InvocationError(f"benchmark_module: module '{module.name}' has no function "
                              f"'{entry_function}'; it exports {', '.join(names)}")
    device = getattr(module, "device", None)
    if device is not None and "device" not in kwargs:
        kwargs["device"] = device.uri
    with tempfile.TemporaryDirectory(prefix="pyree-benchmark-") as folder:
        path = os.path.join(folder, "module.vmfb")
        with open(path, "wb") as f:
            f.write(_file_bytes(module.module))
        argv = [sys.executable, "-m", "pyree.runtime.tools.benchmark_module", f"--module={path}",
                f"--function={entry_function}", *_input_flags(inputs, folder),
                *(f"--{key}={value}" for key, value in kwargs.items())]
        try:
            run = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BenchmarkToolError(f"{TOOL} on @{entry_function} did not finish within "
                                     f"{timeout} s") from None
    if run.returncode != 0:
        raise BenchmarkToolError(run.stderr.strip() or f"{TOOL} exited with {run.returncode}")
    return [_result(line.split()) for line in run.stdout.splitlines() if line.startswith("BM_")]


def _file_bytes(module) -> bytes:
    """The module file's bytes: the buffer the verified module was read from (its data segment
    is a view into it)."""
    return bytes(module.data.obj)


def _input_flags(inputs: Sequence, folder: str) -> list[str]:
    flags = []
    for index, value in enumerate(inputs):
        if isinstance(value, str):
            flags.append(f"--input={value}")
            continue
        import numpy as np

        path = os.path.join(folder, f"input{index}.npy")
        np.save(path, np.asarray(value))
        flags.append(f"--input=@{path}")
    return flags


def _result(fields: list[str]) -> BenchmarkResult:
    """A console row: name, time and unit, CPU time and unit, iterations, counters."""
    return BenchmarkResult(fields[0], " ".join(fields[1:3]), " ".join(fields[3:5]), fields[5],
                           " ".join(fields[6:]) or None)
