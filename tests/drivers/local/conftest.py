"""The runtime tests' fixtures (tests/runtime/conftest.py: the gcc-built kernel library, the arith
test module made of it, a fresh generator), for the local drivers' tests of that module."""

from runtime.conftest import arith_bytes, kernel_library, offset_constant, rng  # noqa: F401
