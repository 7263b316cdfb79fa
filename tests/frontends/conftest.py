"""tests/drivers/vulkan's device fixture and tests/drivers/cuda's GPU marker rule, for the
programs' device runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def _load(relative: str):
    path = Path(__file__).resolve().parents[1] / relative
    spec = importlib.util.spec_from_file_location(relative.replace("/", "_")[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


vulkan_device = _load("drivers/vulkan/conftest.py").vulkan_device
pytest_runtest_setup = _load("drivers/cuda/conftest.py").pytest_runtest_setup
