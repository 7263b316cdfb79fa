"""GPU tests carry the ``cuda`` marker. They skip only where there is no GPU to test: no libcuda on
the host, or a driver that reports no device. Anything else — libcuda present but too old or
pyree-hal-cuda missing, cuInit failing, a device that cannot be created — fails them with the
driver's own message, so that a broken driver is never reported as "no CUDA device"."""

from __future__ import annotations

import ctypes.util
import functools

import pytest

# The driver's words for "this host has no GPU" (pyree.hal.cuda.instance, CUDA's error name).
_NO_GPU = ("libcuda.so.1 could not be loaded", "reports no CUDA devices", "CUDA_ERROR_NO_DEVICE")


@functools.cache
def cuda_state() -> tuple[str, str]:
    """("ok", ""), ("skip", why) or ("fail", the driver's message), decided once per session."""
    has_libcuda = ctypes.util.find_library("cuda") is not None
    import pyree.runtime as rt
    info = next((d for d in rt.list_drivers() if d.name == "cuda"), None)
    if info is None:
        if has_libcuda:
            return "fail", "this host has libcuda but the pyree-hal-cuda driver is not installed"
        return "skip", "no CUDA device (no libcuda, and pyree-hal-cuda is not installed)"
    if not info.available:
        if any(words in info.reason for words in _NO_GPU) or not has_libcuda:
            return "skip", f"no CUDA device: {info.reason}"
        return "fail", f"the CUDA driver is unavailable on a host with libcuda: {info.reason}"
    try:
        rt.get_device("cuda")
    except Exception as e:  # noqa: BLE001 - whatever the driver raised is the message to show
        return "fail", f"creating the CUDA device failed: {e}"
    return "ok", ""


def pytest_runtest_setup(item):
    if item.get_closest_marker("cuda") is None:
        return
    state, message = cuda_state()
    if state == "skip":
        pytest.skip(message)
    if state == "fail":
        pytest.fail(message, pytrace=False)
