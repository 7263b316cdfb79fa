"""GPU tests carry the ``cuda`` marker and skip with "no CUDA device" on hosts without one."""

from __future__ import annotations

import pytest


def cuda_device_present() -> bool:
    try:
        import pyree.runtime as rt
        return any(d.name == "cuda" and d.available for d in rt.list_drivers())
    except Exception:  # no runtime or driver installed: certainly no usable device
        return False


def pytest_collection_modifyitems(config, items):
    if cuda_device_present():
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)
