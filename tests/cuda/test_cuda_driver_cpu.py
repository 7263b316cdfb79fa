"""CPU-only: the CUDA driver's pieces that need no GPU, and a host without libcuda."""

from __future__ import annotations

import ctypes.util
import subprocess
import sys

import pytest
from tooling import require_module

require_module("cuda.bindings")  # pyree-hal-cuda depends on it; CI installs the driver

from pyree.hal.cuda.device import parse_device_path  # noqa: E402
from pyree.hal.cuda.executable import cubin_fits  # noqa: E402
from pyree.hal.cuda.symbols import SYMBOLS  # noqa: E402
from pyree.runtime.hal.python_driver import HalError  # noqa: E402

no_libcuda = pytest.mark.skipif(ctypes.util.find_library("cuda") is not None,
                                reason="this host has libcuda")


@no_libcuda
def test_list_drivers_shows_cuda_unavailable_with_the_reason():
    proc = subprocess.run([sys.executable, "-m", "pyree.runtime.tools.run_module", "--list_drivers"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if "cuda" in l)
    assert "unavailable" in line.lower() and "libcuda" in line
    assert "local-task" in proc.stdout


@no_libcuda
def test_cpu_devices_still_work_when_cuda_is_unavailable():
    import numpy as np
    import pyree.runtime as rt
    infos = {d.name: d for d in rt.list_drivers()}
    assert not infos["cuda"].available
    buf = rt.get_device("local-task").allocate(16)
    buf.write(0, np.arange(4, dtype=np.float32))
    assert buf.read(0, 16) == np.arange(4, dtype=np.float32).tobytes()


def test_command_buffer_mode_from_uri_or_environment(monkeypatch):
    monkeypatch.delenv("PYREE_CUDA_COMMAND_BUFFER_MODE", raising=False)
    assert parse_device_path("") == ("", "graph")
    assert parse_device_path("0?command_buffer=stream") == ("0", "stream")
    monkeypatch.setenv("PYREE_CUDA_COMMAND_BUFFER_MODE", "direct")
    assert parse_device_path("GPU-1234") == ("GPU-1234", "direct")
    assert parse_device_path("0?command_buffer=graph") == ("0", "graph")


@pytest.mark.parametrize("path, message", [
    ("0?command_buffer=fast", "unknown command buffer mode 'fast'"),
    ("0?streams=2", "unknown cuda device parameter"),
])
def test_bad_device_parameters_are_named(path, message):
    with pytest.raises(HalError, match=message):
        parse_device_path(path)


@pytest.mark.parametrize("arch, cc, fits", [
    ("sm_90", (9, 0), True), ("sm_80", (8, 6), True), ("sm_86", (8, 0), False),
    ("sm_80", (9, 0), False), ("sm_90a", (9, 0), True), ("sm_90a", (9, 1), False), ("", (9, 0), False),
])
def test_cubin_is_used_only_where_it_runs(arch, cc, fits):
    assert cubin_fits(arch, *cc) is fits


def test_symbol_table_puts_error_lookups_first_and_has_no_duplicates():
    assert SYMBOLS[:2] == ("cuGetErrorName", "cuGetErrorString")
    assert len(set(SYMBOLS)) == len(SYMBOLS)
    assert {"cuLaunchKernel", "cuGraphLaunch", "cuStreamWaitValue64", "cuMemAllocFromPoolAsync"} <= set(SYMBOLS)
