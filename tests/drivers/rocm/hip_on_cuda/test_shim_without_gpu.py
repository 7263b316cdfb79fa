"""CPU-only: the HIP-on-CUDA shim builds warning-free, exports exactly the rocm driver's table, and
answers as ROCm does on a host without a GPU: hipInit gives CUDA's cuInit verdict (100,
hipErrorNoDevice, where libcuda.so.1 is absent) and the rocm driver reports no device through it."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))
from tooling import require_module, require_tool  # noqa: E402

NAMES = {0: "hipSuccess", 1: "hipErrorInvalidValue", 2: "hipErrorOutOfMemory",
         100: "hipErrorNoDevice", 101: "hipErrorInvalidDevice", 200: "hipErrorInvalidImage",
         209: "hipErrorNoBinaryForGpu", 218: "hipErrorInvalidKernelFile", 500: "hipErrorNotFound",
         600: "hipErrorNotReady", 719: "hipErrorLaunchFailure"}


def libcuda_verdict() -> int | None:
    """cuInit(0) of this host's libcuda.so.1, or None where there is none."""
    try:
        return ctypes.CDLL("libcuda.so.1").cuInit(0)
    except OSError:
        return None


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    require_tool("gcc")
    out = tmp_path_factory.mktemp("shim")
    subprocess.run(["bash", str(HERE / "build.sh"), str(out)], check=True, timeout=120)
    return out / "libamdhip64.so"


def test_exports_exactly_the_drivers_table(shim):
    symbols = require_module("pyree.hal.rocm.symbols")
    nm = subprocess.run([require_tool("nm"), "-D", "--defined-only", str(shim)], check=True,
                        capture_output=True, text=True).stdout
    exported = {line.split()[-1] for line in nm.splitlines() if line.split()[-2] == "T"}
    assert exported == set(symbols.SYMBOLS)


def test_error_names_are_hips(shim):
    lib = ctypes.CDLL(str(shim))
    lib.hipGetErrorName.restype = ctypes.c_char_p
    assert {code: lib.hipGetErrorName(code).decode() for code in NAMES} == NAMES


def test_init_gives_cudas_verdict(shim):
    lib = ctypes.CDLL(str(shim))
    verdict = libcuda_verdict()
    assert lib.hipInit(0) == (100 if verdict is None else verdict)
    if verdict is None:
        count, pointer = ctypes.c_int(-1), ctypes.c_void_p()
        assert lib.hipGetDeviceCount(ctypes.byref(count)) == 100
        assert lib.hipMalloc(ctypes.byref(pointer), 16) == 100
        assert lib.hipSetDevice(0) == 100


def test_rocm_driver_reports_no_device_through_the_shim(shim):
    if libcuda_verdict() == 0:
        pytest.skip("this host has a CUDA device: test_rocm_on_cuda.py runs the shim on it")
    require_module("pyree.hal.rocm")
    listing = subprocess.run(
        [sys.executable, "-m", "pyree.runtime.tools.run_module", "--list_drivers"],
        env={**os.environ, "PYREE_HIP_LIBRARY": str(shim)}, capture_output=True, text=True,
        timeout=120)
    rocm = next(ln.strip() for ln in listing.stdout.splitlines() if ln.strip().startswith("rocm:"))
    assert rocm.startswith("rocm: unavailable") and "hipErrorNoDevice" in rocm, rocm
