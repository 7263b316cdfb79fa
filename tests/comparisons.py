"""Comparisons with a reference that several case modules share."""

from __future__ import annotations

import numpy as np


def same_special_values(got: np.ndarray, want: np.ndarray):
    """Asserts ``got`` has ``want``'s shape and, for floats, its NaN and infinities in the same
    places; returns (``got`` in float64, where ``want`` is finite) for the caller's tolerance,
    or None once integers have compared exactly."""
    assert got.shape == want.shape, (got.shape, want.shape)
    if not np.issubdtype(got.dtype, np.floating):
        np.testing.assert_array_equal(got, want)
        return None
    got = got.astype(np.float64)
    for test in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(test(got), test(want))
    return got, np.isfinite(want)
