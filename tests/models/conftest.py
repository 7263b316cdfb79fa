"""The Vulkan device fixture of tests/drivers/vulkan, for the model tests' Vulkan runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "vulkan_conftest", Path(__file__).resolve().parents[1] / "drivers" / "vulkan" / "conftest.py")
_vulkan = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_vulkan)


@pytest.fixture(scope="session")
def vulkan_device():
    reason = _vulkan.vulkan_unavailable_reason()
    if reason:
        pytest.skip(reason)
    return "vulkan"
