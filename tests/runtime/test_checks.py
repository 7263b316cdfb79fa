"""Check ops: evaluated on the host after the commands before them, IREE-style messages."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest

from .module_factory import COLS, ROWS


@pytest.fixture(params=["local-sync", "local-task"])
def module(request, arith_bytes):
    return rt.load_module(arith_bytes, device=request.param)


def _pair(rng):
    return tuple(rng.standard_normal((ROWS, COLS)).astype(np.float32) for _ in range(2))


def test_passing_checks(module, rng):
    a, b = _pair(rng)
    assert module.checked_add.run_checks(a, b, a + b) == []
    np.testing.assert_array_equal(module.checked_add(a, b, a + b).to_host(), a + b)


def test_failing_eq_sees_the_dispatch_result(module, rng):
    a, b = _pair(rng)
    wrong = a + b
    wrong[5, 7] += 1
    failures = module.checked_add.run_checks(a, b, wrong)
    assert len(failures) == 1
    failure = failures[0]
    assert (failure.location, failure.kind) == ("checks.mlir:7:3", "expect_eq")
    assert failure.message.startswith("Expected equality of these values. Contents does not "
                                      "match. lhs: 37x53xf32=[")
    assert " rhs: 37x53xf32=[" in failure.message
    with pytest.raises(rt.CheckError, match="checks.mlir:7:3: Expected equality") as error:
        module.checked_add(a, b, wrong)
    assert error.value.failures == [failure]


def test_expect_true_and_all_true(module):
    failures = module.flags.run_checks(np.int32(0), np.array([True, False, True, True]))
    assert [(f.kind, f.location) for f in failures] == [("expect_true", "checks.mlir:12:3"),
                                                        ("expect_all_true", "checks.mlir:13:3")]
    assert failures[0].message == "Expected i32=0 to be nonzero."
    assert failures[1].message == "Expected all elements to be nonzero. Contents: 4xi1=1 0 1 1"


def test_almost_eq_uses_the_tolerance(module, rng):
    a = rng.standard_normal(4).astype(np.float32)
    assert module.near.run_checks(a, a + np.float32(5e-4)) == []
    failures = module.near.run_checks(a, a + np.float32(5e-2))
    assert len(failures) == 1
    assert failures[0].message.startswith("Expected near equality of these values. Contents does "
                                          "not match to tolerance parameters atol=0.001, rtol=0.")
    with pytest.raises(rt.CheckError, match="checks.mlir:20:3"):
        module.near(a, a + np.float32(5e-2))
