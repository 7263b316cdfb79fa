"""Stacked serving of a function with a dynamic batch (``?`` leading dims, llvm-cpu), without
Ray's server: BatchPlan on a loaded module, every call counted. A batch's requests become one
call of exactly their rows (no padding), split per request; a declared maximum splits a batch
into calls of at most that many rows; exact calls stay the default; a failed shared call
reruns each request alone; a function that mixes rows still mixes clients when stacked (why
stacking is opt-in); and functions whose leading dims are not one batch size are refused by
name. Every answer is checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from dynamic_batch import check_rows, compile_module, rows_inputs
from tooling import require_module

# Ray's own pydantic models warn on import; nothing of ours.
pytestmark = pytest.mark.filterwarnings("ignore:Using extra keyword arguments on `Field`")


@pytest.fixture(scope="module")
def module_bytes() -> bytes:
    return compile_module()


@pytest.fixture(scope="module")
def loaded(module_bytes):
    require_module("ray.serve")  # pyree.serve imports Ray
    import pyree.runtime as rt
    return rt.load_module(module_bytes, device="local-task")


class Counted:
    """A Function that records the leading dim of each argument of every call."""

    def __init__(self, function):
        self.function, self.calls = function, []

    def __getattr__(self, name):
        return getattr(self.function, name)

    def __call__(self, *arrays):
        self.calls.append([len(a) for a in arrays])
        return self.function(*arrays)


def _plan(function, stack_rows=True):
    from pyree.serve import BatchPlan
    counted = Counted(function)
    return BatchPlan.of(counted, stack_rows), counted


@pytest.mark.parametrize("sizes", [(1,), (3, 1, 4), (2,) * 8, (1, 13, 2, 7), (31, 1)])
def test_a_batch_is_one_call_of_exactly_its_rows(loaded, sizes):
    plan, counted = _plan(loaded["rows"])
    rng = np.random.default_rng(sum(sizes))
    requests = [list(rows_inputs(rng, k)) for k in sizes]
    outcomes = plan.run(requests)
    assert counted.calls == [[sum(sizes)] * 2]  # one call, no padding
    for (x, y), (product, sums) in zip(requests, outcomes):
        assert product.shape == (len(x), 7) and sums.shape == (len(x),)
        check_rows(x, y, product, sums)


def test_exact_calls_stay_the_default(loaded):
    """Without stack_rows each request is its own call, of any size the ``?`` takes (0 too)."""
    plan, counted = _plan(loaded["rows"], stack_rows=False)
    assert plan.rows is None and plan.describe()["batch_rows"] is None
    rng = np.random.default_rng(1)
    requests = [list(rows_inputs(rng, k)) for k in (3, 5)]
    requests.insert(1, [np.zeros((0, 7), np.float32), np.zeros((0, 7), np.int32)])
    for request in requests:
        plan.check(request)
    for (x, y), (product, sums) in zip(requests, plan.run(requests)):
        check_rows(x, y, product, sums)
    assert counted.calls == [[3, 3], [0, 0], [5, 5]]


def test_a_request_that_fails_a_check_fails_alone(loaded):
    """Rows 0-1 | 2-3 (one negative) | 4-6 share one call; it fails, and each request runs
    again alone: only the middle one fails."""
    import pyree.runtime as rt
    plan, counted = _plan(loaded["guarded"])
    rng = np.random.default_rng(3)
    requests = [[rng.uniform(0, 4, (k, 2)).astype(np.float32)] for k in (2, 2, 3)]
    requests[1][0][-1, 0] = -1.0
    good, bad, also_good = plan.run(requests)
    assert isinstance(bad, rt.CheckError) and "Expected all elements to be nonzero" in str(bad)
    for (x,), (result,) in ((requests[0], good), (requests[2], also_good)):
        np.testing.assert_allclose(result, np.sqrt(x), rtol=1e-6)
    assert counted.calls == [[7], [2], [2], [3]]


def test_stacking_a_function_that_mixes_rows_mixes_clients(loaded):
    """center subtracts column sums: stacked, two clients' rows are summed together."""
    plan, counted = _plan(loaded["center"])
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2))
    (got_a,), (got_b,) = plan.run([[a], [b]])
    both = np.concatenate([a, b]).astype(np.float64)
    np.testing.assert_allclose(got_a, a - both.sum(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_b, b - both.sum(axis=0), rtol=1e-5, atol=1e-6)
    assert not np.allclose(got_a, a - a.astype(np.float64).sum(axis=0), rtol=1e-3)
    assert counted.calls == [[4]]


@pytest.mark.parametrize("name, why", [
    ("mixed", r"function 'mixed' \(\?x3xf32, 3x3xf32\) -> \(\?x3xf32\) cannot be served with "
              r"stack_rows=True: its leading dims mix static and run-time sizes \(s0, 3\)"),
    ("two", r"function 'two' \(\?x3xf32, \?x3xf32\) -> \(\?x3xf32, \?x3xf32\) cannot be served "
            r"with stack_rows=True: its leading dims are different run-time sizes \(s0, s1\)"),
    ("wide", r"function 'wide' \(\?x\?xf32\) -> \(\?x\?xf32\) cannot be served with "
             r"stack_rows=True: a row of \?x\?xf32 has a run-time size past its leading dim"),
])
def test_leading_dims_that_are_not_one_batch_size_are_refused(loaded, name, why):
    from pyree.serve import BatchPlan
    with pytest.raises(ValueError, match=why):
        BatchPlan.of(loaded[name], stack_rows=True)
    assert BatchPlan.of(loaded[name]).rows is None  # exact calls serve it


def test_a_request_is_described_and_checked_as_rows(loaded):
    import pyree.runtime as rt
    plan, _ = _plan(loaded["rows"])
    assert plan.describe() == {"function": "rows", "arguments": ["?x7xf32", "?x7xi32"],
                               "results": ["?x7xf32", "?xf32"], "batch_rows": "?"}
    x = np.zeros((2, 6), np.float32)
    with pytest.raises(rt.InvocationError, match=r"function 'rows' argument 0: expected kx7xf32 "
                                                 r"\(k >= 1 rows of the function's \?x7xf32, "
                                                 r"which the server stacks into one call per "
                                                 r"batch\), got 2x6xf32"):
        plan.check([x, x.astype(np.int32)])
    with pytest.raises(rt.InvocationError, match=r"argument 0: expected kx7xf32 .* got 0x7xf32"):
        plan.check([np.zeros((0, 7), np.float32), np.zeros((0, 7), np.int32)])
    exact, _ = _plan(loaded["rows"], stack_rows=False)
    with pytest.raises(rt.InvocationError, match=r"function 'rows' argument 1: expected "
                                                 r"\?x7xi32, got 2x6xi32"):
        exact.check([np.zeros((2, 7), np.float32), x.astype(np.int32)])


def _bounded(module_bytes, least: int, most: int, multiple: int = 1):
    """``rows`` of the module with its batch size declared in [least, most], a multiple of
    ``multiple`` (what a module with bounds says; the loader holds every call to them)."""
    import pyree.runtime as rt
    from runtime.module_mutations import _pack, _unpack

    tree, segment = _unpack(module_bytes)
    (symbol,) = next(f for f in tree.functions if f.name == b"rows" or f.name == "rows").symbols
    symbol.min, symbol.max, symbol.divisor = least, most, multiple
    return rt.load_module(_pack(tree, segment), device="local-task")["rows"]


@pytest.mark.parametrize("least, most, multiple, sizes, calls", [
    (0, 5, 1, (3, 4, 5), [5, 5, 2]),           # 12 rows: calls of at most 5
    (1, 5, 1, (5,), [5]),
    (2, 7, 3, (4, 6), [6, 6]),                 # a multiple of 3: 10 rows in 6 + 4 padded to 6
    (2, 7, 3, (1,), [3]),                      # padded up to the least size allowed
])
def test_a_declared_maximum_splits_a_batch(module_bytes, least, most, multiple, sizes, calls):
    require_module("ray.serve")
    function = _bounded(module_bytes, least, most, multiple)
    assert [s.max for s in function.symbols] == [most]
    plan, counted = _plan(function)
    assert plan.describe()["max_call_rows"] == most
    rng = np.random.default_rng(most + sum(sizes))
    requests = [list(rows_inputs(rng, k)) for k in sizes]
    for (x, y), (product, sums) in zip(requests, plan.run(requests)):
        check_rows(x, y, product, sums)
    assert counted.calls == [[n, n] for n in calls]


def test_bounds_that_allow_no_call_are_refused(module_bytes):
    require_module("ray.serve")
    from pyree.serve import BatchPlan
    with pytest.raises(ValueError, match=r"function 'rows' .* cannot be served with "
                                         r"stack_rows=True: its batch size `s0` has no size of "
                                         r"at least 1 in \[0, 2\] that is a multiple of 4"):
        BatchPlan.of(_bounded(module_bytes, 0, 2, 4), stack_rows=True)
