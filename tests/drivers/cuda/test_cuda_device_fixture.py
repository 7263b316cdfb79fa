"""CPU-only: the GPU tests' fixture skips only where there is no GPU; a broken driver fails them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pyree.runtime as rt
import pytest
from pyree.runtime.hal.registry import DriverInfo

_spec = importlib.util.spec_from_file_location("cuda_conftest", Path(__file__).with_name("conftest.py"))
fixture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fixture)


def state(monkeypatch, libcuda: bool, info: DriverInfo | None, device_error: str = ""):
    monkeypatch.setattr(fixture.ctypes.util, "find_library",
                        lambda name: "libcuda.so.1" if libcuda and name == "cuda" else None)
    monkeypatch.setattr(rt, "list_drivers", lambda: [info] if info else [])

    def get_device(uri):
        if device_error:
            raise RuntimeError(device_error)
    monkeypatch.setattr(rt, "get_device", get_device)
    return fixture.cuda_state.__wrapped__()


@pytest.mark.parametrize("libcuda, reason", [
    (False, "libcuda.so.1 could not be loaded (no NVIDIA driver on this host): not found"),
    (True, "the NVIDIA driver reports no CUDA devices"),
    (True, "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"),
    (False, "the CUDA driver libcuda.so.1 (version 11040) is older than CUDA 12.0, which the HAL needs"),
])
def test_no_gpu_skips(monkeypatch, libcuda, reason):
    assert state(monkeypatch, libcuda, DriverInfo("cuda", False, reason))[0] == "skip"


def test_no_driver_package_skips_only_without_libcuda(monkeypatch):
    assert state(monkeypatch, False, None)[0] == "skip"
    assert state(monkeypatch, True, None)[0] == "fail"


@pytest.mark.parametrize("reason", [
    "cuInit: CUDA_ERROR_UNKNOWN: unknown error",
    "cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: system has unsupported display driver / cuda driver combination",
    "the CUDA driver (version 12.0) lacks entry points the HAL needs: cuMemPoolTrimTo",
    "the CUDA driver libcuda.so.1 (version 11040) is older than CUDA 12.0, which the HAL needs",
])
def test_a_broken_driver_fails_with_its_message(monkeypatch, reason):
    verdict, message = state(monkeypatch, True, DriverInfo("cuda", False, reason))
    assert verdict == "fail" and reason in message


def test_a_device_that_cannot_be_created_fails_with_the_drivers_message(monkeypatch):
    verdict, message = state(monkeypatch, True, DriverInfo("cuda", True, ""),
                             device_error="cuCtxCreate: CUDA_ERROR_OUT_OF_MEMORY: out of memory")
    assert verdict == "fail" and "CUDA_ERROR_OUT_OF_MEMORY" in message
    assert state(monkeypatch, True, DriverInfo("cuda", True, ""))[0] == "ok"
