"""The ``cuda``-marked tests here run pyree's rocm driver on an NVIDIA GPU through the HIP-on-CUDA
shim (hip_on_cuda.c). Like tests/drivers/cuda, they skip only where there is no GPU to test: no
libcuda.so.1, or a CUDA driver (asked directly, not through the shim) that reports no device.
On a host with a GPU, a shim that does not build ($PYREE_HIP_LIBRARY, when set, names a prebuilt
one), a missing pyree-hal-rocm, or a rocm driver that the shim does not make available fails
them with the reason."""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CUDA_ERROR_NO_DEVICE = 100


def run_module(env: dict, *args: str) -> subprocess.CompletedProcess:
    """pyree-run-module in a fresh process (the driver opens libamdhip64 once per process)."""
    return subprocess.run([sys.executable, "-m", "pyree.runtime.tools.run_module", *args],
                          env=env, capture_output=True, text=True, timeout=300)


def _shim() -> tuple[str, str]:
    """(path, "") of the shim library, or ("", why there is none)."""
    path = os.environ.get("PYREE_HIP_LIBRARY")
    if path:
        return (path, "") if Path(path).is_file() else ("", f"$PYREE_HIP_LIBRARY={path} is missing")
    out = tempfile.mkdtemp(prefix="hip_on_cuda-")
    try:
        built = subprocess.run(["bash", str(HERE / "build.sh"), out], capture_output=True,
                               text=True, timeout=120)
    except OSError as e:
        return "", f"building the HIP-on-CUDA shim could not start ({e})"
    if built.returncode:
        return "", f"building the HIP-on-CUDA shim failed: {built.stderr.strip()}"
    return str(Path(out) / "libamdhip64.so"), ""


@functools.cache
def hip_on_cuda() -> tuple[str, str, str]:
    """("ok", "", shim path), ("skip", why, "") or ("fail", why, ""), decided once per session."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return "skip", f"no NVIDIA GPU: libcuda.so.1 could not be loaded ({e})", ""
    if cuda.cuInit(0) == CUDA_ERROR_NO_DEVICE:
        return "skip", "no NVIDIA GPU: libcuda.so.1 is present but cuInit reports no device", ""
    if importlib.util.find_spec("pyree.hal.rocm") is None:
        return "fail", "this host has libcuda but the pyree-hal-rocm driver is not installed", ""
    shim, why = _shim()
    if not shim:
        return "fail", f"this host has libcuda but no HIP-on-CUDA shim: {why}", ""
    listing = run_module({**os.environ, "PYREE_HIP_LIBRARY": shim}, "--list_drivers")
    line = next((ln.strip() for ln in listing.stdout.splitlines()
                 if re.match(r"\s*rocm:", ln)), "")
    if line == "rocm: available":
        return "ok", "", shim
    return "fail", (f"the rocm driver is not available on the HIP-on-CUDA shim {shim}: "
                    f"{line or listing.stdout + listing.stderr}"), ""


def pytest_runtest_setup(item):
    if item.get_closest_marker("cuda") is None:
        return
    state, message, _ = hip_on_cuda()
    if state == "skip":
        pytest.skip(message)
    if state == "fail":
        pytest.fail(message, pytrace=False)


@pytest.fixture(scope="session")
def hip_env() -> dict:
    """The environment of a process whose rocm driver runs on the shim."""
    return {**os.environ, "PYREE_HIP_LIBRARY": hip_on_cuda()[2]}


@pytest.fixture(scope="session")
def cli(hip_env):
    """pyree-run-module with these arguments, on the shim."""
    return lambda *args: run_module(hip_env, *args)
