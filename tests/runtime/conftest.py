"""Fixtures for runtime tests: the gcc-built kernel library and the arith test module."""

from __future__ import annotations

import numpy as np
import pytest
from tooling import require_tool

from .module_factory import COLS, ROWS, arith_builder, compile_kernels, sized_builder


@pytest.fixture(scope="session")
def kernel_library(tmp_path_factory) -> bytes:
    require_tool("gcc")  # the test kernels are compiled from C
    return compile_kernels(tmp_path_factory.mktemp("kernels"))


@pytest.fixture(scope="session")
def offset_constant() -> np.ndarray:
    return np.random.default_rng().standard_normal((ROWS, COLS)).astype(np.float32)


@pytest.fixture(scope="session")
def arith_bytes(kernel_library, offset_constant) -> bytes:
    return arith_builder(kernel_library, offset_constant).finish()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng()


@pytest.fixture(scope="session")
def sized_bytes(kernel_library) -> bytes:
    """The module of functions with run-time sizes (module_factory.sized_builder)."""
    return sized_builder(kernel_library).finish()
