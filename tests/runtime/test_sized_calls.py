"""Calls of functions with run-time sizes (schema 1.5) through the public API, against numpy:
symbols bound from the arguments' shapes, results of the run-time shape, sizes 0, 1, a prime
and large, and a clear InvocationError (function, argument, dim, symbol) for arguments that
disagree, sizes out of bounds and sizes without an exact value."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.runtime.vm.host_array import HostArray

from .module_factory import SCALE

DEVICES = ["local-sync", "local-task"]
SCALE32 = np.float32(SCALE)


@pytest.fixture(params=DEVICES)
def module(request, sized_bytes):
    return rt.load_module(sized_bytes, device=request.param)


def _floats(rng, *shape) -> np.ndarray:
    values = rng.standard_normal(shape).astype(np.float32)
    values.flat[:4] = [np.nan, np.inf, -np.inf, -0.0][:values.size]  # special values ride along
    return values


@pytest.mark.parametrize("n", [0, 1, 61, 5003, 7])
def test_one_dim_functions_at_any_size(module, rng, n):
    x = _floats(rng, n)
    for name, expected in (("copy", x), ("scale", x * SCALE32), ("staged", x * SCALE32)):
        result = module[name](x)
        assert result.shape == (n,) and result.dtype == np.float32
        np.testing.assert_array_equal(result.to_host(), expected)


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_a_derived_result_shape_and_offsets(module, rng, batch):
    """concat: a (2 * batch)x3 result, b copied at offset batch * 12 bytes."""
    a, b = _floats(rng, batch, 3), _floats(rng, batch, 3)
    result = module.concat(a, b)
    assert result.shape == (2 * batch, 3)
    np.testing.assert_array_equal(result.to_host(), np.concatenate([a, b]))


@pytest.mark.parametrize("m, n", [(3, 5), (0, 4), (4, 0), (0, 0), (1, 1), (127, 13)])
def test_a_result_sized_by_two_symbols(module, rng, m, n):
    a = rng.integers(-9, 9, m).astype(np.int32)
    b = rng.integers(-9, 9, n).astype(np.int32)
    result = module.outer_fill(a, b)
    assert result.shape == (m * n,) and result.dtype == np.int32
    np.testing.assert_array_equal(result.to_host(), np.full(m * n, 7, np.int32))


def test_device_arrays_host_arrays_and_lists_as_arguments(module, rng):
    x = _floats(rng, 37)
    on_device = module.copy(x)
    np.testing.assert_array_equal(module.scale(on_device).to_host(), x * SCALE32)
    host = HostArray.from_numpy(x[:11])
    np.testing.assert_array_equal(module.copy(host).to_host(), x[:11])
    np.testing.assert_array_equal(module.copy([1.5, -2.0, 3.25]).to_host(),
                                  np.array([1.5, -2.0, 3.25], np.float32))
    a, b = _floats(rng, 3, 3), _floats(rng, 3, 3)
    np.testing.assert_array_equal(module.concat(a.tolist(), b).to_host(), np.concatenate([a, b]))


def test_arguments_that_disagree_on_a_symbol(module, rng):
    with pytest.raises(rt.InvocationError, match=r"function 'concat': argument 1 dim 0 is 7 but "
                                                 r"argument 0 dim 0 \(symbol `batch`\) is 5"):
        module.concat(_floats(rng, 5, 3), _floats(rng, 7, 3))
    module.concat(_floats(rng, 5, 3), _floats(rng, 5, 3))  # a size now recorded:
    with pytest.raises(rt.InvocationError, match=r"argument 1 dim 0 is 4 but argument 0 dim 0 "
                                                 r"\(symbol `batch`\) is 5"):
        module.concat(_floats(rng, 5, 3), _floats(rng, 4, 3))  # the same message
    with pytest.raises(rt.InvocationError, match=r"function 'same': argument 1 dim 0 is 2 but "
                                                 r"argument 0 dim 0 \(symbol `n`\) is 3"):
        module.same(_floats(rng, 3), _floats(rng, 2))


@pytest.mark.parametrize("shape, message", [
    ((0, 8), r"`batch` \(argument 0 dim 0\) is 0, below its bound 1"),
    ((65, 8), r"`batch` \(argument 0 dim 0\) is 65, past its bound 64"),
    ((2, 520), r"`seq` \(argument 0 dim 1\) is 520, past its bound 512"),
    ((2, 12), r"`seq` \(argument 0 dim 1\) is 12, not a multiple of 8"),
])
def test_bounds_and_divisor(module, rng, shape, message):
    with pytest.raises(rt.InvocationError, match=f"function 'rows': {message}"):
        module.rows(_floats(rng, *shape))


@pytest.mark.parametrize("shape", [(1, 0), (64, 512), (3, 8), (17, 496)])
def test_sizes_within_bounds(module, rng, shape):
    x = _floats(rng, *shape)
    np.testing.assert_array_equal(module.rows(x).to_host(), x)


def test_rank_static_dims_and_element_types_are_checked(module, rng):
    with pytest.raises(rt.InvocationError, match=r"function 'concat' argument 1: expected "
                                                 r"\?x3xf32, got a shape of 5x2"):
        module.concat(_floats(rng, 5, 3), _floats(rng, 5, 2))
    with pytest.raises(rt.InvocationError, match=r"function 'copy' argument 0: expected \?xf32, "
                                                 r"got a shape of 2x2"):
        module.copy(_floats(rng, 2, 2))
    with pytest.raises(rt.InvocationError, match=r"function 'copy' argument 0: expected 3xf32, "
                                                 r"got 3xi32"):
        module.copy(np.arange(3, dtype=np.int32))


def test_sizes_without_an_exact_value(module, rng):
    with pytest.raises(rt.InvocationError, match=r"function 'diff' at n=3, m=4: result 0 dim 0 "
                                                 r"`n - m` is -1, which is negative"):
        module.diff(_floats(rng, 3), _floats(rng, 4))
    with pytest.raises(rt.InvocationError, match=r"function 'ratio' at n=3, m=0: result 0 dim 0 "
                                                 r"`floordiv\(n, m\)` is undefined: it divides 3 "
                                                 r"by zero"):
        module.ratio(_floats(rng, 3), _floats(rng, 0))
    with pytest.raises(rt.InvocationError, match=r"function 'huge' at n=3: result 0 size "
                                                 r"`n \* 4503599627370496` is "
                                                 r"13510798882111488, past 2\^53"):
        module.huge(_floats(rng, 3))
    with pytest.raises(rt.InvocationError, match=r"function 'overreach' at n=2: command 0 "
                                                 r"\(dispatch\) push constant 0 `n \* 2147483648` "
                                                 r"is 4294967296, past 4294967295"):
        module.overreach(_floats(rng, 2))
    a, b = _floats(rng, 9), _floats(rng, 4)  # the same functions where the sizes work out
    np.testing.assert_array_equal(module.diff(a, b).to_host(), a[:5])
    np.testing.assert_array_equal(module.ratio(a, b).to_host(), a[:2])
    assert module.huge(_floats(rng, 0)).shape == (0,)


def test_a_module_contradicting_itself_at_one_size_is_refused_at_that_size(module, rng):
    """overreach's kernel needs n * 2^33 bytes of bindings of n * 4: fine at n = 0 only."""
    assert module.overreach(_floats(rng, 0)).shape == (0,)
    with pytest.raises(rt.ModuleError, match=r"function 'overreach' at n=1 command 0 \(dispatch\) "
                                             r"binding 0: length 4 is shorter than the "
                                             r"8589934592 bytes the kernel touches"):
        module.overreach(_floats(rng, 1))


def test_checks_with_run_time_sizes(module, rng):
    for n in (0, 1, 13):
        x = _floats(rng, n)
        x[np.isnan(x)] = 1.0  # expect_eq compares bytes: one NaN pattern
        assert module.same.run_checks(x, x.copy()) == []
    x = _floats(rng, 13)
    y = x.copy()
    y[5] += 1
    failures = module.same.run_checks(x, y)
    assert [(f.location, f.kind) for f in failures] == [("sized.mlir:9:3", "expect_eq")]
    with pytest.raises(rt.CheckError, match="sized.mlir:9:3: Expected equality"):
        module.same(x, y)


def test_a_dispatch_with_no_workgroups_is_skipped(module, rng):
    """scale at n = 0 has ceildiv(0, 64) = 0 workgroups: the recording has no dispatch."""
    assert module.scale(_floats(rng, 0)).shape == (0,)
    kinds = [kind for step in module.scale._plans[(0,)].program.steps
             for kind, _, _ in step.contents]
    assert "dispatch" not in kinds
    x = _floats(rng, 3)
    np.testing.assert_array_equal(module.scale(x).to_host(), x * SCALE32)
    assert "dispatch" in [kind for step in module.scale._plans[(3,)].program.steps
                          for kind, _, _ in step.contents]


def test_reflection_shows_dynamic_dims(module):
    reflection = module.concat.reflection
    assert reflection["iree.abi.declaration"] == (
        "sync func @concat(%input0: tensor<?x3xf32>, %input1: tensor<?x3xf32>) -> "
        "(%output0: tensor<?x3xf32>)")
    assert reflection["iree.abi"] == ('{"a": [["ndarray", "f32", 2, null, 3], ["ndarray", "f32", '
                                      '2, null, 3]], "r": [["ndarray", "f32", 2, null, 3]], '
                                      '"v": 1}')
    assert str(module.rows) == "<Function rows(?x?xf32) -> (?x?xf32)>"
