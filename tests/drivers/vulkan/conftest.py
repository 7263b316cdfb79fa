"""Tests that need a Vulkan device carry the ``vulkan_device`` fixture and skip, saying why, on
hosts without the pyree-hal-vulkan driver or a Vulkan 1.2 device (CI installs Mesa's lavapipe).
Tests of the driver's own code need only the package (``vulkan_package``): missing, it fails in CI."""

from __future__ import annotations

import pytest
from tooling import require_module


def vulkan_unavailable_reason() -> str:
    try:
        import pyree.runtime as rt
    except ImportError:
        return "pyree-base-runtime is not installed"
    info = next((d for d in rt.list_drivers() if d.name == "vulkan"), None)
    if info is None:
        return "the pyree-hal-vulkan driver is not installed"
    return "" if info.available else f"no Vulkan device: {info.reason}"


@pytest.fixture(scope="session")
def vulkan_device():
    reason = vulkan_unavailable_reason()
    if reason:
        pytest.skip(reason)
    return "vulkan"


@pytest.fixture(scope="session")
def vulkan_package():
    """For tests of the driver's own code that need the package but no device."""
    require_module("pyree.hal.vulkan")


@pytest.fixture(scope="session", autouse=True)
def pipeline_cache_in_a_temporary_folder(tmp_path_factory):
    """The driver's on-disk pipeline cache (on by default) goes to a folder of this session,
    not the user's ~/.cache, for these tests and the processes they start."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYREE_VULKAN_PIPELINE_CACHE", str(tmp_path_factory.mktemp("pipelines")))
        yield
